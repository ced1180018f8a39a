-- How fresh each app's data is: one row per connector, its last sync (its status, when it
-- completed, its error) and the whole hours from that completion to as_of (the var, or the
-- time of the build; negative when the sync completed after an as_of in the past, whose
-- earlier syncs the service does not say). is_stale: completed more than stale_sync_hours
-- (default 24) before as_of, or never completed (never synced, or its first sync still
-- running). A sync that ended in an error completed too: its error is last_error.
with elapsed as (
    select
        app_id,
        connector_id,
        sync_status,
        sync_completed_at,
        last_error,
        {{ epoch_microseconds(as_of_instant()) }} - {{ epoch_microseconds('sync_completed_at') }}
            as elapsed_us
    from {{ ref('stg_connectors') }}
)

select
    app_id,
    connector_id,
    sync_status,
    sync_completed_at as last_sync_completed_at,
    last_error,
    cast(floor(elapsed_us / 3600000000.0) as {{ dbt.type_bigint() }}) as hours_since_sync,
    coalesce(elapsed_us > {{ stale_sync_hours() }} * 3600000000, true) as is_stale
from elapsed
