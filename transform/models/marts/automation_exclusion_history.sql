-- When each automation exclusion was in force, as far as the complete snapshots saw it: the
-- first and last complete snapshot that held it, and the first complete snapshot after that
-- which no longer did ("when did this exclusion disappear?"). Rows of runs that failed
-- half-way are never counted (macros/snapshots.sql).
with snapshots as (
    {{ complete_snapshots('automation_exclusions') }}
),

seen as (
    select distinct
        {{ adapter.quote('appId') }} as app_id,
        {{ adapter.quote('appEntitlementId') }} as app_entitlement_id,
        {{ adapter.quote('appUserId') }} as app_user_id,
        {{ adapter.quote('userId') }} as user_id,
        {{ timestamp_tz(adapter.quote('snapshotAt')) }} as snapshot_at
    from {{ source('accessgov', 'automation_exclusions') }}
),

spans as (
    select
        seen.app_id,
        seen.app_entitlement_id,
        seen.app_user_id,
        seen.user_id,
        min(seen.snapshot_at) as first_seen_at,
        max(seen.snapshot_at) as last_seen_at
    from seen
    inner join snapshots on snapshots.snapshot_at = seen.snapshot_at
    group by seen.app_id, seen.app_entitlement_id, seen.app_user_id, seen.user_id
)

select
    spans.app_id,
    spans.app_entitlement_id,
    spans.app_user_id,
    spans.user_id,
    spans.first_seen_at,
    spans.last_seen_at,
    (
        select min(later.snapshot_at)
        from snapshots as later
        where later.snapshot_at > spans.last_seen_at
    ) as removed_at,
    spans.last_seen_at = (select max(latest.snapshot_at) from snapshots as latest) as is_current
from spans
