-- Whether the latest complete `users` snapshot is the directory, one row. With the tap's
-- read_directory false, `users` holds only the users of the exclusion entries, so an owner
-- it does not list has not left: only a directory's listing says who is gone. The records
-- are the same User objects either way; what tells them apart is the data already loaded:
-- the directory lists someone who was never a user of an exclusion entry (the exclusions'
-- change log, which outlives the pruned copies), the exclusions-only read never does. Known
-- only when the same run read the exclusion entries in full (automation_exclusions selected
-- with users); otherwise, and when every user of the directory is excluded somewhere,
-- from_directory is false: "not listed" then proves nothing. docs/models.md.
with latest as (
    select max(snapshot_at) as snapshot_at
    from ({{ complete_snapshots('users') }}) as snapshots
),

exclusions_read_with_users as (
    select count(*) as complete_snapshots
    from ({{ complete_snapshots('automation_exclusions') }}) as snapshots
    where snapshots.snapshot_at = (select snapshot_at from latest)
),

ever_excluded as (
    select distinct user_id
    from {{ ref('history_automation_exclusions') }}
    where change_type = 'added'
),

never_excluded as (
    select count(*) as users
    from ({{ latest_complete_snapshot('users') }}) as users
    left join ever_excluded
        on ever_excluded.user_id = users.{{ adapter.quote('id') }}
    where ever_excluded.user_id is null
)

select
    (select snapshot_at from latest) as snapshot_at,
    (select complete_snapshots from exclusions_read_with_users) > 0
    and (select users from never_excluded) > 0 as from_directory
