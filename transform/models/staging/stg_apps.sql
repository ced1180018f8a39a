-- One row per app the tenant's catalog holds now: the latest complete snapshot of the
-- full-table stream (see macros/snapshots.sql); the most recently updated copy wins should a
-- snapshot hold an app twice. An empty string is an unset field (the service
-- may send unset fields empty rather than omit them).
with ranked as (
    select
        "id" as app_id,
        nullif("displayName", '') as display_name,
        cast("userCount" as {{ dbt.type_bigint() }}) as user_count,
        {{ timestamp_tz('"updatedAt"') }} as updated_at,
        row_number() over (
            partition by "id"
            order by {{ timestamp_tz('"updatedAt"') }} desc nulls last
        ) as copy_rank
    from ({{ latest_complete_snapshot('apps') }}) as apps
)

select app_id, display_name, user_count, updated_at
from ranked
where copy_rank = 1
