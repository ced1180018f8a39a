-- One row per user of the service's current exclusion entries: the latest complete snapshot
-- of the full-table stream (see macros/snapshots.sql); the most recently updated copy wins
-- should a snapshot hold a user twice. Unset fields may come empty rather than absent: an
-- empty string, and UNKNOWN (the status enums' zero value, i.e. unset), are null here.
with ranked as (
    select
        "id" as user_id,
        nullif("displayName", '') as display_name,
        nullif("email", '') as email,
        case when "status" not in ('', 'UNKNOWN') then "status" end as status,
        case
            when "directoryStatus" not in ('', 'UNKNOWN') then "directoryStatus"
        end as directory_status,
        {{ timestamp_tz('"updatedAt"') }} as updated_at,
        row_number() over (
            partition by "id"
            order by {{ timestamp_tz('"updatedAt"') }} desc nulls last
        ) as copy_rank
    from ({{ latest_complete_snapshot('users') }}) as users
)

select user_id, display_name, email, status, directory_status, updated_at
from ranked
where copy_rank = 1
