-- When each automation exclusion was in force, as far as the complete snapshots saw it: the
-- first and last complete snapshot that held it, and the first complete snapshot after that
-- which no longer did ("when did this exclusion disappear?"). Read from the stream's change
-- log (history_automation_exclusions, macros/history.sql), not from the loaded copies, which
-- prune_raw_snapshots deletes once the log holds them. Rows of runs that failed half-way are
-- never counted (macros/snapshots.sql).
with changes as (
    select * from {{ ref('history_automation_exclusions') }}
),

snapshots as (
    select
        snapshot_at,
        lag(snapshot_at) over (order by snapshot_at) as previous_snapshot_at
    from changes
    where change_type = 'snapshot'
),

spans as (
    select
        app_id,
        app_entitlement_id,
        app_user_id,
        user_id,
        min(case when change_type = 'added' then snapshot_at end) as first_seen_at,
        max(case when change_type = 'added' then snapshot_at end) as last_added_at,
        max(case when change_type = 'removed' then snapshot_at end) as last_removed_at
    from changes
    where change_type in ('added', 'removed')
    group by app_id, app_entitlement_id, app_user_id, user_id
),

latest as (
    select max(snapshot_at) as snapshot_at from snapshots
)

select
    spans.app_id,
    spans.app_entitlement_id,
    spans.app_user_id,
    spans.user_id,
    spans.first_seen_at,
    coalesce(removal.previous_snapshot_at, latest.snapshot_at) as last_seen_at,
    removal.snapshot_at as removed_at,
    removal.snapshot_at is null as is_current
from spans
cross join latest
left join snapshots as removal
    on spans.last_removed_at > spans.last_added_at
    and removal.snapshot_at = spans.last_removed_at
