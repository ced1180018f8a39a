{{ config(indexes=[{"columns": ["task_id"]}]) }}

-- Per task, who approved it: how many distinct users, the one when there is one, and the
-- latest approval (who, when). A task with no approved step has no row.
with approved as (
    select
        task_id,
        user_id,
        decided_at,
        row_number() over (partition by task_id order by decided_at desc nulls last, user_id) as recency
    from {{ ref('stg_task_approvals') }}
    where verdict = 'approved'
)

select
    task_id,
    count(distinct user_id) as approver_count,
    case when count(distinct user_id) = 1 then min(user_id) end as only_approver_user_id,
    max(case when recency = 1 then user_id end) as last_approved_by_user_id,
    max(decided_at) as last_approved_at
from approved
group by task_id
