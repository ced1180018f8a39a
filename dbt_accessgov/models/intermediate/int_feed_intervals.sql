-- Every stretch of time the grant feed says a grant was held: opened by an ADDED while not
-- held, closed by the next REMOVED. A grant whose first event is a REMOVED was held since
-- before the feed began: its interval has no granted_at. revoked_at null = held now.
-- The window is written out in each call, not named (WINDOW clause): Snowflake has none.
{%- set grant_order -%}
    partition by app_id, app_entitlement_id, app_user_id order by event_at, same_instant_order
{%- endset %}
with boundaries as (
    select
        *,
        lead(lifecycle_effect) over ({{ grant_order }}) as next_effect,
        lead(event_at) over ({{ grant_order }}) as next_event_at,
        lead(ticket_id) over ({{ grant_order }}) as next_ticket_id,
        lag(lifecycle_effect) over ({{ grant_order }}) as previous_effect
    from {{ ref('int_grant_lifecycle_events') }}
    where lifecycle_effect is not null
)

select
    app_id,
    app_entitlement_id,
    app_user_id,
    event_at as granted_at,
    case when next_effect = 'close' then next_event_at end as revoked_at,
    ticket_id as granted_ticket_id,
    case when next_effect = 'close' then next_ticket_id end as revoked_ticket_id
from boundaries
where lifecycle_effect = 'open'

union all

select
    app_id,
    app_entitlement_id,
    app_user_id,
    {{ timestamp_tz('null') }} as granted_at,
    event_at as revoked_at,
    cast(null as {{ dbt.type_string() }}) as granted_ticket_id,
    ticket_id as revoked_ticket_id
from boundaries
where lifecycle_effect = 'close' and previous_effect is null
