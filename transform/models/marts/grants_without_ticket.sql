-- ADDED events that carry no ticket id: access granted outside the request process.
-- opened_access says whether the event opened an interval (false: the grant was already held).
select
    events.app_id,
    events.app_entitlement_id,
    events.app_user_id,
    events.event_at as granted_at,
    coalesce(lifecycle.lifecycle_effect = 'open', false) as opened_access
from {{ ref('stg_grant_events') }} as events
left join {{ ref('int_grant_lifecycle_events') }} as lifecycle
    on lifecycle.app_id = events.app_id
    and lifecycle.app_entitlement_id = events.app_entitlement_id
    and lifecycle.app_user_id = events.app_user_id
    and lifecycle.event_at = events.event_at
    and lifecycle.lifecycle_action = events.lifecycle_action
where events.lifecycle_action = 'added'
  and events.ticket_id is null
