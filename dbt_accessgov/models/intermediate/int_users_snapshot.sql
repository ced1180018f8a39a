-- Whether the latest complete `users` snapshot is the directory, one row. With the tap's
-- read_directory false, `users` holds only the users of the exclusion entries, so an owner
-- it does not list has not left: only a directory's listing says who is gone. The records
-- are the same User objects either way, so the tap says which it read: the snapshot's
-- full_table_snapshots row carries scope 'directory' or 'automation_exclusion_users'. A row
-- without one (written by a tap from before the column) counts as not the directory: "not
-- listed" then proves nothing. docs/models.md.
with latest as (
    select max(snapshot_at) as snapshot_at
    from ({{ complete_snapshots('users') }}) as snapshots
),

directory_markers as (
    select count(*) as markers
    from {{ source('accessgov', 'full_table_snapshots') }}
    where {{ adapter.quote('stream') }} = 'users'
        and {{ adapter.quote('scope') }} = 'directory'
        and {{ timestamp_tz(adapter.quote('snapshotAt')) }} = (select snapshot_at from latest)
)

select
    (select snapshot_at from latest) as snapshot_at,
    (select markers from directory_markers) > 0 as from_directory
