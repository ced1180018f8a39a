-- Each grant held now (current_grants) with the evidence of its request: who asked for it
-- and why, who approved it and when (the latest approval), whether it was emergency access,
-- and its external reference (e.g. a Jira issue). The task is the one the ADDED event that
-- opened the grant names, by id or numeric id (int_ticket_tasks); the evidence columns are
-- null when there is none (grants_without_approval says why).
select
    grants.app_id,
    grants.app_display_name,
    grants.app_entitlement_id,
    grants.app_entitlement_display_name,
    grants.app_user_id,
    grants.granted_at,
    grants.granted_ticket_id as ticket_id,
    tickets.task_id,
    tickets.task_type,
    tickets.task_outcome,
    tickets.requested_by_user_id,
    tickets.requested_by_name,
    tickets.justification,
    tickets.last_approved_by_user_id as approved_by_user_id,
    tickets.last_approved_by_name as approved_by_name,
    tickets.last_approved_at as approved_at,
    tickets.emergency_access,
    tickets.external_reference
from {{ ref('current_grants') }} as grants
left join {{ ref('int_ticket_tasks') }} as tickets
    on tickets.ticket_ref = grants.granted_ticket_id
