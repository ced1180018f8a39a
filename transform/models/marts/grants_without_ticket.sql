-- ADDED events that carry no ticket id: access granted outside the request process.
-- opened_access says whether the event opened an interval (false: the grant was already held).
-- One pass over int_grant_lifecycle_events, which holds every ADDED event with its ticket and
-- its effect: joining it back to stg_grant_events would let the planner, which cannot
-- estimate filters on computed columns, pick a nested loop that grows with the square of the
-- events (README "Models", At warehouse scale).
select
    app_id,
    app_entitlement_id,
    app_user_id,
    event_at as granted_at,
    coalesce(lifecycle_effect = 'open', false) as opened_access
from {{ ref('int_grant_lifecycle_events') }}
where lifecycle_action = 'added'
  and ticket_id is null
