-- When each automation exclusion was in force, as far as the complete snapshots saw it: the
-- first and last complete snapshot that held it, and the first complete snapshot after that
-- which no longer did ("when did this exclusion disappear?"). Read from the stream's change
-- log (history_automation_exclusions, macros/history.sql), not from the loaded copies, which
-- prune_raw_snapshots deletes once the log holds them. Rows of runs that failed half-way are
-- never counted (macros/snapshots.sql). Who made the change, where the system log says it:
-- added_by, the latest AddAutomationExclusion of the entitlement and user up to the snapshot
-- that last found it added; removed_by, the latest RemoveAutomationExclusion after that, up
-- to its removal (null where the log has none: an entitlement or user removed whole, or a
-- change older than the log).
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
),

history as (
    select
        spans.app_id,
        spans.app_entitlement_id,
        spans.app_user_id,
        spans.user_id,
        spans.first_seen_at,
        spans.last_added_at,
        coalesce(removal.previous_snapshot_at, latest.snapshot_at) as last_seen_at,
        removal.snapshot_at as removed_at,
        removal.snapshot_at is null as is_current
    from spans
    cross join latest
    left join snapshots as removal
        on spans.last_removed_at > spans.last_added_at
        and removal.snapshot_at = spans.last_removed_at
),

logged as (
    select
        event_uid,
        occurred_at,
        target_uid,
        subject_uid,
        actor_user_id,
        actor_name,
        case when operation like '%/AddAutomationExclusion' then 'added' else 'removed' end
            as change_type
    from {{ ref('stg_system_log') }}
    where target_type = 'AppEntitlement'
        and subject_type = 'User'
        and outcome = 'Success'
        and (
            operation like '%/AddAutomationExclusion'
            or operation like '%/RemoveAutomationExclusion'
        )
),

matched as (
    -- per exclusion and kind of change, its logged changes up to the snapshot that last
    -- found it added (additions) or that found it gone (removals), the latest first
    select
        history.app_id,
        history.app_entitlement_id,
        history.user_id,
        logged.change_type,
        logged.occurred_at,
        logged.actor_user_id,
        logged.actor_name,
        row_number() over (
            partition by
                history.app_id, history.app_entitlement_id, history.user_id, logged.change_type
            order by logged.occurred_at desc, logged.event_uid desc
        ) as recency
    from history
    inner join logged
        on logged.target_uid
        = {{ dbt.concat(['history.app_id', "'/'", 'history.app_entitlement_id']) }}
        and logged.subject_uid = history.user_id
        and logged.occurred_at <= case
            when logged.change_type = 'added' then history.last_added_at
            else history.removed_at
        end
)

select
    history.app_id,
    history.app_entitlement_id,
    history.app_user_id,
    history.user_id,
    history.first_seen_at,
    history.last_seen_at,
    history.removed_at,
    history.is_current,
    added.actor_user_id as added_by_user_id,
    added.actor_name as added_by_name,
    added.occurred_at as added_logged_at,
    removed.actor_user_id as removed_by_user_id,
    removed.actor_name as removed_by_name,
    removed.occurred_at as removed_logged_at
from history
left join matched as added
    on added.app_id = history.app_id
    and added.app_entitlement_id = history.app_entitlement_id
    and added.user_id = history.user_id
    and added.change_type = 'added'
    and added.recency = 1
left join matched as removed
    on removed.app_id = history.app_id
    and removed.app_entitlement_id = history.app_entitlement_id
    and removed.user_id = history.user_id
    and removed.change_type = 'removed'
    and removed.recency = 1
    -- a removal before the addition is an earlier span's
    and (added.occurred_at is null or removed.occurred_at >= added.occurred_at)
