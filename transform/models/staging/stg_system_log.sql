-- One row per event of the service's system log (deduplicated on its uid: delivery is
-- at-least-once and JSONL appends), with what an auditor reads of it; none when the stream
-- was not loaded. The target is the event's first resource, the subject its second (a grant's
-- entitlement and account, an exclusion's entitlement and user); the tap's own reads are the
-- calls whose user agent is tap-accessgov's.
{%- if not raw_stream_exists('system_log') %}
select
    cast(null as {{ dbt.type_string() }}) as event_uid,
    cast(null as {{ type_timestamp_tz() }}) as occurred_at,
    cast(null as {{ dbt.type_bigint() }}) as class_uid,
    cast(null as {{ dbt.type_bigint() }}) as activity_id,
    cast(null as {{ dbt.type_string() }}) as activity,
    cast(null as {{ dbt.type_string() }}) as operation,
    cast(null as {{ dbt.type_string() }}) as target_type,
    cast(null as {{ dbt.type_string() }}) as target_uid,
    cast(null as {{ dbt.type_string() }}) as subject_type,
    cast(null as {{ dbt.type_string() }}) as subject_uid,
    cast(null as {{ dbt.type_string() }}) as outcome,
    cast(null as {{ dbt.type_string() }}) as src_ip,
    cast(null as {{ dbt.type_string() }}) as actor_user_id,
    cast(null as {{ dbt.type_string() }}) as actor_name,
    cast(null as {{ dbt.type_string() }}) as actor_email,
    cast(null as {{ dbt.type_string() }}) as user_agent,
    cast(null as boolean) as is_this_tap
from (select 1 as nothing) as not_loaded  -- BigQuery has no WHERE without a FROM
where 1 = 0
{%- else %}
with loaded as (
    select
        {{ adapter.quote('uid') }} as event_uid,
        {{ timestamp_tz(adapter.quote('time')) }} as occurred_at,
        {{ adapter.quote('class_uid') }} as class_uid,
        {{ adapter.quote('activity_id') }} as activity_id,
        {{ json_path_text('event', ['activity_name']) }} as activity,
        {{ adapter.quote('api_operation') }} as operation,
        {{ json_path_text('event', ['resources', 0, 'type']) }} as target_type,
        {{ json_path_text('event', ['resources', 0, 'uid']) }} as target_uid,
        {{ json_path_text('event', ['resources', 1, 'type']) }} as subject_type,
        {{ json_path_text('event', ['resources', 1, 'uid']) }} as subject_uid,
        {{ json_path_text('event', ['status']) }} as outcome,
        {{ adapter.quote('src_endpoint_ip') }} as src_ip,
        {{ adapter.quote('actor_user_uid') }} as actor_user_id,
        {{ json_path_text('event', ['actor', 'user', 'name']) }} as actor_name,
        {{ adapter.quote('actor_user_email') }} as actor_email,
        {{ adapter.quote('http_user_agent') }} as user_agent,
        row_number() over (
            partition by {{ adapter.quote('uid') }} order by {{ adapter.quote('time') }}
        ) as copy_number
    from {{ source('accessgov', 'system_log') }}
)

select
    event_uid,
    occurred_at,
    class_uid,
    activity_id,
    activity,
    operation,
    target_type,
    target_uid,
    subject_type,
    subject_uid,
    outcome,
    src_ip,
    actor_user_id,
    actor_name,
    actor_email,
    user_agent,
    coalesce(user_agent like 'tap-accessgov/%', false) as is_this_tap
from loaded
where copy_number = 1
{%- endif %}
