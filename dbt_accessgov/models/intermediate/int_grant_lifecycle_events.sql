-- The ADDED and REMOVED events of each grant in the order the lifecycle applies them (date,
-- then REMOVED before ADDED at one instant), each marked with what it does:
--   'open'  ADDED while not held (no earlier event, or the previous one was a REMOVED);
--   'close' REMOVED while held (previous event ADDED), or the grant's first event (held
--           since before the data begins);
--   null    changes nothing (ADDED while held, REMOVED while not held).
-- After any ADDED a grant is held and after any REMOVED it is not, so the state before an
-- event is simply the previous event's action.
with lifecycle_events as (
    select
        app_id,
        app_entitlement_id,
        app_user_id,
        lifecycle_action,
        event_at,
        ticket_id,
        case lifecycle_action when 'removed' then 0 else 1 end as same_instant_order
    from {{ ref('stg_grant_events') }}
    where lifecycle_action in ('added', 'removed')
),

sequenced as (
    select
        *,
        lag(lifecycle_action) over (
            partition by app_id, app_entitlement_id, app_user_id
            order by event_at, same_instant_order
        ) as previous_action
    from lifecycle_events
)

select
    app_id,
    app_entitlement_id,
    app_user_id,
    lifecycle_action,
    event_at,
    same_instant_order,
    ticket_id,
    previous_action,
    case
        when lifecycle_action = 'added' and (previous_action is null or previous_action = 'removed')
            then 'open'
        when lifecycle_action = 'removed' and (previous_action is null or previous_action = 'added')
            then 'close'
    end as lifecycle_effect
from sequenced
