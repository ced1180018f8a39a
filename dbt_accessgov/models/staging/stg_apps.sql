-- One row per app the tenant's catalog holds now: the current rows of the full-table stream
-- (macros/snapshots.sql: its latest complete snapshot, the most recently updated copy of each
-- app). Unset fields are null (macros/unset_fields.sql).
select
    {{ adapter.quote('id') }} as app_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    cast({{ adapter.quote('userCount') }} as {{ dbt.type_bigint() }}) as user_count,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('apps', key=['id']) }}) as apps
