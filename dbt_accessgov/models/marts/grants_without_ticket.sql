-- ADDED events that carry no ticket id: access granted outside the request process.
-- opened_access says whether the event opened an interval (false: the grant was already held).
-- One pass over int_grant_lifecycle_events, which holds every ADDED event with its ticket and
-- its effect: joining it back to stg_grant_events would let the planner, which cannot
-- estimate filters on computed columns, pick a nested loop that grows with the square of the
-- events (docs/models.md, At warehouse scale).
select
    added.app_id,
    added.app_display_name,
    added.app_entitlement_id,
    added.app_entitlement_display_name,
    added.app_user_id,
    added.event_at as granted_at,
    coalesce(added.lifecycle_effect = 'open', false) as opened_access
from ({{ with_catalog_names(ref('int_grant_lifecycle_events')) }}) as added
where added.lifecycle_action = 'added'
  and added.ticket_id is null
