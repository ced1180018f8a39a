-- Each grant held now (current_grants) with the evidence of its request: who asked for it
-- and why, who approved it and when (the latest approval), whether it was emergency access,
-- and its external reference (e.g. a Jira issue). The task is the one the ADDED event that
-- opened the grant names, by id or numeric id (int_ticket_tasks); the evidence columns are
-- null when there is none (grants_without_approval says why). Who made the grant, where the
-- system log says it: the actor of the latest CreateGrant of the entitlement and account,
-- unless a DeleteGrant came after it (then the grant held now was not made through the API:
-- null, as where the log does not reach back).
with logged as (
    select
        target_uid,
        subject_uid,
        occurred_at,
        actor_user_id,
        actor_name,
        operation,
        row_number() over (
            partition by target_uid, subject_uid
            order by occurred_at desc, event_uid desc
        ) as recency
    from {{ ref('stg_system_log') }}
    where target_type = 'AppEntitlement'
        and subject_type = 'AppUser'
        and outcome = 'Success'
        and (operation like '%/CreateGrant' or operation like '%/DeleteGrant')
),

granted as (
    select * from logged
    where recency = 1 and operation like '%/CreateGrant'
)

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
    tickets.external_reference,
    granted.actor_user_id as granted_by_user_id,
    granted.actor_name as granted_by_name,
    granted.occurred_at as granted_logged_at
from {{ ref('current_grants') }} as grants
left join {{ ref('int_ticket_tasks') }} as tickets
    on tickets.ticket_ref = grants.granted_ticket_id
left join granted
    on granted.target_uid
    = {{ dbt.concat(['grants.app_id', "'/'", 'grants.app_entitlement_id']) }}
    and granted.subject_uid = {{ dbt.concat(['grants.app_id', "'/'", 'grants.app_user_id']) }}
