-- ADDED events that carry no ticket id: access granted outside the request process.
-- opened_access says whether the event opened an interval (false: the grant was already held).
select
    events.app_id,
    apps.display_name as app_display_name,
    events.app_entitlement_id,
    entitlements.display_name as app_entitlement_display_name,
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
-- names from the catalog; an id it does not know keeps its row, with no name
left join {{ ref('stg_apps') }} as apps
    on apps.app_id = events.app_id
left join {{ ref('stg_app_entitlements') }} as entitlements
    on entitlements.app_id = events.app_id
    and entitlements.app_entitlement_id = events.app_entitlement_id
where events.lifecycle_action = 'added'
  and events.ticket_id is null
