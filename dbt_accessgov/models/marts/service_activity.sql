-- What happened in the service itself, one row per system-log event: who (the person behind
-- the actor, as the directory lists them now; an API client by its name), what operation on
-- which target, the outcome and where from. is_this_tap marks this tap's own reads, so that
-- one condition (not is_this_tap) leaves them out.
select
    events.event_uid,
    events.occurred_at,
    events.class_uid,
    events.activity_id,
    events.activity,
    events.operation,
    events.target_type,
    events.target_uid,
    events.subject_type,
    events.subject_uid,
    events.outcome,
    events.src_ip,
    events.actor_user_id,
    coalesce(users.display_name, events.actor_name) as actor_name,
    coalesce(users.email, events.actor_email) as actor_email,
    users.status as actor_status,
    users.directory_status as actor_directory_status,
    users.user_id is not null as actor_listed,
    events.user_agent,
    events.is_this_tap
from {{ ref('stg_system_log') }} as events
left join {{ ref('stg_users') }} as users
    on users.user_id = events.actor_user_id
