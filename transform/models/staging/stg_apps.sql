-- One row per app of the tenant's catalog (full-table stream: JSONL repeats every app every
-- run; the most recently updated copy wins). An empty string is an unset field (the service
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
    from {{ source('accessgov', 'apps') }}
)

select app_id, display_name, user_count, updated_at
from ranked
where copy_rank = 1
