-- One row per approval step of a task's latest version (its policy's history): approved or
-- denied, by whom and when. Steps of other kinds (provisioning, waiting, forms) are left
-- out; a task a policy granted with no approval step has none.
with steps as (
    select
        tasks.task_id,
        tasks.numeric_id,
        {{ unset_as_null(json_path_text('step', ['id'])) }} as step_id,
        {{ unset_as_null(json_path_text('step', ['approval', 'approved', 'userId'])) }} as approved_by,
        {{ unset_as_null(json_path_text('step', ['approval', 'approved', 'approvedAt'])) }} as approved_at,
        {{ unset_as_null(json_path_text('step', ['approval', 'denied', 'userId'])) }} as denied_by,
        {{ unset_as_null(json_path_text('step', ['approval', 'denied', 'deniedAt'])) }} as denied_at
    from {{ ref('stg_tasks') }} as tasks
    {{ json_array_rows('tasks', 'policy_object', 'history', 'step') }}
)

select
    task_id,
    numeric_id,
    step_id,
    case when approved_by is not null then 'approved' else 'denied' end as verdict,
    coalesce(approved_by, denied_by) as user_id,
    {{ timestamp_from_json('coalesce(approved_at, denied_at)') }} as decided_at
from steps
where approved_by is not null or denied_by is not null
