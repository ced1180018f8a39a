{{ config(materialized="table", indexes=[{"columns": ["task_id"]}]) }}

-- One row per task (ticket), its latest version: the loaded tasks deduplicated on id, the
-- most recently updated copy (then the latest outcome) kept. An incremental run delivers a
-- task again when it changed, and JSONL appends every version. What the task is about (app,
-- entitlement, app user, the user) and its outcome come from its type's object, whichever
-- type it is; a type newer than this project keeps its name, its other fields null. Unset
-- fields are null (macros/unset_fields.sql). policy_object is the version's policy as sent,
-- for stg_task_approvals.
with loaded as (
    select
        {{ adapter.quote('id') }} as task_id,
        cast({{ adapter.quote('numericId') }} as {{ dbt.type_bigint() }}) as numeric_id,
        {{ json_member_name(adapter.quote('type')) }} as task_type,
        {{ adapter.quote('type') }} as type_object,
        {{ adapter.quote('policy') }} as policy_object,
        {{ unset_as_null(adapter.quote('state'), enum_zero='TASK_STATE_UNSPECIFIED') }} as state,
        {{ unset_as_null(adapter.quote('origin'), enum_zero='TASK_ORIGIN_UNSPECIFIED') }} as origin,
        {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
        {{ unset_as_null(adapter.quote('description')) }} as justification,
        {{ timestamp_tz(adapter.quote('createdAt')) }} as created_at,
        {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at,
        {{ unset_as_null(adapter.quote('createdByUserId')) }} as requested_by_user_id,
        {{ unset_as_null(adapter.quote('userId')) }} as subject_user_id,
        coalesce({{ adapter.quote('emergencyAccess') }}, false) as emergency_access,
        {{ unset_as_null(json_first_item_text(adapter.quote('externalRefs'), 'url')) }} as external_reference
    from {{ source('accessgov', 'tasks') }}
),

typed as (
    select
        loaded.*,
        {% for field, column in [
            ('appId', 'app_id'),
            ('appEntitlementId', 'app_entitlement_id'),
            ('appUserId', 'app_user_id'),
            ('identityUserId', 'identity_user_id'),
            ('accessReviewId', 'access_review_id'),
            ('outcome', 'outcome_text'),
            ('outcomeTime', 'outcome_time')
        ] -%}
        case task_type
            {%- for kind in ['grant', 'revoke', 'certify', 'offboarding'] %}
            when '{{ kind }}' then {{ unset_as_null(json_path_text('type_object', [kind, field])) }}
            {%- endfor %}
        end as {{ column }}{{ "," if not loop.last }}
        {% endfor %}
    from loaded
),

versions as (
    select
        typed.*,
        row_number() over (
            partition by task_id
            order by updated_at desc nulls last, {{ timestamp_from_json('outcome_time') }} desc nulls last
        ) as version_rank,
        count(*) over (partition by task_id) as times_loaded
    from typed
)

select
    task_id,
    numeric_id,
    task_type,
    state,
    origin,
    display_name,
    justification,
    created_at,
    updated_at,
    requested_by_user_id,
    subject_user_id,
    emergency_access,
    external_reference,
    app_id,
    app_entitlement_id,
    app_user_id,
    identity_user_id,
    access_review_id,
    case when outcome_text not like '%_UNSPECIFIED' then outcome_text end as outcome,
    {{ timestamp_from_json('outcome_time') }} as outcome_at,
    policy_object,
    times_loaded
from versions
where version_rank = 1
