-- One row per access review (campaign) the service holds now: the current rows of the
-- full-table stream (macros/snapshots.sql). Unset fields are null (macros/unset_fields.sql).
select
    {{ adapter.quote('id') }} as access_review_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    {{ unset_as_null(adapter.quote('state'), enum_zero='ACCESS_REVIEW_STATE_UNSPECIFIED') }} as state,
    {{ unset_as_null(adapter.quote('createdById')) }} as created_by_user_id,
    {{ timestamp_tz(adapter.quote('startedAt')) }} as started_at,
    {{ timestamp_tz(adapter.quote('closedAt')) }} as closed_at,
    {{ timestamp_tz(adapter.quote('completionDate')) }} as due_at,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('access_reviews', key=['id']) }}) as reviews
