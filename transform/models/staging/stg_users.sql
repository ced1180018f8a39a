-- One row per user (full-table stream: JSONL repeats every user every run; the most
-- recently updated copy wins).
with ranked as (
    select
        "id" as user_id,
        "displayName" as display_name,
        "email" as email,
        "status" as status,
        "directoryStatus" as directory_status,
        {{ timestamp_tz('"updatedAt"') }} as updated_at,
        row_number() over (
            partition by "id"
            order by {{ timestamp_tz('"updatedAt"') }} desc nulls last
        ) as copy_rank
    from {{ source('accessgov', 'users') }}
)

select user_id, display_name, email, status, directory_status, updated_at
from ranked
where copy_rank = 1
