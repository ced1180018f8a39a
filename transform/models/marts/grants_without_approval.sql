-- One row per ADDED grant event that lacks an approval, and why:
--   no_ticket         the event names no ticket (a change made outside the request process);
--   ticket_not_found  the service has no task of that id or numeric id;
--   not_granted       the task is not a grant task that ended granted (denied, cancelled,
--                     still open, another type);
--   self_approved     granted, and every approval is by the grantee themself.
-- A grant a policy granted with no approval step is not listed. The no_ticket rows are the
-- grants_without_ticket model's (which also says whether the event opened access).
with added as (
    select
        app_id,
        app_entitlement_id,
        app_user_id,
        event_at,
        ticket_id
    from {{ ref('stg_grant_events') }}
    where lifecycle_action = 'added'
),

evidence as (
    select
        added.*,
        tasks.task_id,
        tasks.task_type,
        tasks.state as task_state,
        tasks.outcome as task_outcome,
        tasks.identity_user_id as grantee_user_id,
        tasks.requested_by_user_id,
        approvers.approver_count,
        approvers.only_approver_user_id,
        approvers.last_approved_by_user_id
    from added
    left join {{ ref('int_task_refs') }} as refs
        on refs.ticket_ref = added.ticket_id
    left join {{ ref('stg_tasks') }} as tasks
        on tasks.task_id = refs.task_id
    left join {{ ref('int_task_approvers') }} as approvers
        on approvers.task_id = tasks.task_id
),

classified as (
    select
        evidence.*,
        case
            when ticket_id is null then 'no_ticket'
            when task_id is null then 'ticket_not_found'
            when coalesce(task_type, '') <> 'grant'
                or coalesce(task_outcome, '') <> 'GRANT_OUTCOME_GRANTED' then 'not_granted'
            when only_approver_user_id = grantee_user_id then 'self_approved'
        end as reason
    from evidence
)

select
    named.app_id,
    named.app_display_name,
    named.app_entitlement_id,
    named.app_entitlement_display_name,
    named.app_user_id,
    named.event_at as granted_at,
    named.ticket_id,
    named.reason,
    named.task_id,
    named.task_state,
    named.task_outcome,
    named.grantee_user_id,
    grantees.display_name as grantee_name,
    named.requested_by_user_id,
    requesters.display_name as requested_by_name,
    named.last_approved_by_user_id as approved_by_user_id,
    approvers.display_name as approved_by_name
from ({{ with_catalog_names('classified') }}) as named
left join {{ ref('stg_users') }} as grantees
    on grantees.user_id = named.grantee_user_id
left join {{ ref('stg_users') }} as requesters
    on requesters.user_id = named.requested_by_user_id
left join {{ ref('stg_users') }} as approvers
    on approvers.user_id = named.last_approved_by_user_id
where named.reason is not null
