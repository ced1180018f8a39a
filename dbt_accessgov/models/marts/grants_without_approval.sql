-- One row per ADDED grant event that lacks an approval, and why:
--   no_ticket         the event names no ticket (a change made outside the request process);
--   ticket_not_found  the service has no task of that id or numeric id;
--   not_granted       the task is not a grant task that ended granted (denied, cancelled,
--                     still open, another type);
--   self_approved     granted, and every approval is by the grantee themself.
-- A grant a policy granted with no approval step is not listed. The no_ticket rows are the
-- grants_without_ticket model's (which also says whether the event opened access).
with classified as (
    select
        added.app_id,
        added.app_entitlement_id,
        added.app_user_id,
        added.event_at,
        added.ticket_id,
        tickets.*,
        case
            when added.ticket_id is null then 'no_ticket'
            when tickets.task_id is null then 'ticket_not_found'
            when coalesce(tickets.task_type, '') <> 'grant'
                or coalesce(tickets.task_outcome, '') <> 'GRANT_OUTCOME_GRANTED' then 'not_granted'
            when tickets.only_approver_user_id = tickets.identity_user_id then 'self_approved'
        end as reason
    from {{ ref('stg_grant_events') }} as added
    left join {{ ref('int_ticket_tasks') }} as tickets
        on tickets.ticket_ref = added.ticket_id
    where added.lifecycle_action = 'added'
)

select
    app_id,
    app_display_name,
    app_entitlement_id,
    app_entitlement_display_name,
    app_user_id,
    event_at as granted_at,
    ticket_id,
    reason,
    task_id,
    task_state,
    task_outcome,
    identity_user_id as grantee_user_id,
    identity_name as grantee_name,
    requested_by_user_id,
    requested_by_name,
    last_approved_by_user_id as approved_by_user_id,
    last_approved_by_name as approved_by_name
from ({{ with_catalog_names('classified') }}) as named
where reason is not null
