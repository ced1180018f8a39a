{{ config(indexes=[{"columns": ["ticket_ref"]}]) }}

-- The task behind each way the grant feed's ticketId may name it, its id or its numeric id
-- (which one the service sends is undocumented), one row each, so a grant event finds its
-- task with an equality join (an "id or numeric id" condition would be a nested loop); with
-- what the evidence marts show of the task: who asked and why, who approved, the people's
-- names where the users read hold them.
with refs as (
    select
        task_id as ticket_ref,
        task_id
    from {{ ref('stg_tasks') }}
    union all
    select
        cast(numeric_id as {{ dbt.type_string() }}) as ticket_ref,
        task_id
    from {{ ref('stg_tasks') }}
    where numeric_id is not null
)

select
    refs.ticket_ref,
    tasks.task_id,
    tasks.task_type,
    tasks.state as task_state,
    tasks.outcome as task_outcome,
    tasks.identity_user_id,
    identities.display_name as identity_name,
    tasks.requested_by_user_id,
    requesters.display_name as requested_by_name,
    tasks.justification,
    tasks.emergency_access,
    tasks.external_reference,
    approvers.approver_count,
    approvers.only_approver_user_id,
    approvers.last_approved_by_user_id,
    approver_users.display_name as last_approved_by_name,
    approvers.last_approved_at
from refs
inner join {{ ref('stg_tasks') }} as tasks
    on tasks.task_id = refs.task_id
left join {{ ref('int_task_approvers') }} as approvers
    on approvers.task_id = tasks.task_id
left join {{ ref('stg_users') }} as identities
    on identities.user_id = tasks.identity_user_id
left join {{ ref('stg_users') }} as requesters
    on requesters.user_id = tasks.requested_by_user_id
left join {{ ref('stg_users') }} as approver_users
    on approver_users.user_id = approvers.last_approved_by_user_id
