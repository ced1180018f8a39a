-- Each grant held now (current_grants) with the evidence of its request: who asked for it
-- and why, who approved it and when (the latest approval), whether it was emergency access,
-- and its external reference (e.g. a Jira issue). The task is the one the ADDED event that
-- opened the grant names, by id or numeric id; the evidence columns are null when there is
-- none (grants_without_approval says why).
select
    grants.app_id,
    grants.app_display_name,
    grants.app_entitlement_id,
    grants.app_entitlement_display_name,
    grants.app_user_id,
    grants.granted_at,
    grants.granted_ticket_id as ticket_id,
    tasks.task_id,
    tasks.task_type,
    tasks.outcome as task_outcome,
    tasks.requested_by_user_id,
    requesters.display_name as requested_by_name,
    tasks.justification,
    approvers.last_approved_by_user_id as approved_by_user_id,
    approver_users.display_name as approved_by_name,
    approvers.last_approved_at as approved_at,
    tasks.emergency_access,
    tasks.external_reference
from {{ ref('current_grants') }} as grants
left join {{ ref('int_task_refs') }} as refs
    on refs.ticket_ref = grants.granted_ticket_id
left join {{ ref('stg_tasks') }} as tasks
    on tasks.task_id = refs.task_id
left join {{ ref('int_task_approvers') }} as approvers
    on approvers.task_id = tasks.task_id
left join {{ ref('stg_users') }} as requesters
    on requesters.user_id = tasks.requested_by_user_id
left join {{ ref('stg_users') }} as approver_users
    on approver_users.user_id = approvers.last_approved_by_user_id
