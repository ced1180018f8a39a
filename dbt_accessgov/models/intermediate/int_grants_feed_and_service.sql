-- Every grant held now per the service (its latest complete `grants` snapshot) or per the
-- feed (a grant interval not revoked), one row per (app, entitlement, app user), with what
-- each side says: current_grants and the feed-versus-service marts read it.
-- Held per the feed: the grant's last event that changed it opened it (the interval
-- grant_intervals shows not revoked).
with feed_effects as (
    select
        app_id,
        app_entitlement_id,
        app_user_id,
        lifecycle_effect,
        event_at,
        ticket_id,
        row_number() over (
            partition by app_id, app_entitlement_id, app_user_id
            order by event_at desc, same_instant_order desc
        ) as recency
    from {{ ref('int_grant_lifecycle_events') }}
    where lifecycle_effect is not null
),

feed_held as (
    select app_id, app_entitlement_id, app_user_id, event_at as granted_at, ticket_id as granted_ticket_id
    from feed_effects
    where recency = 1 and lifecycle_effect = 'open'
),

service_held as (
    select app_id, app_entitlement_id, app_user_id, granted_at, scheduled_end_at, originating_ticket_id
    from {{ ref('stg_grants') }}
),

service_snapshots as (
    select count(*) as complete_snapshots
    from ({{ complete_snapshots('grants') }}) as snapshots
)

select
    coalesce(service.app_id, feed.app_id) as app_id,
    coalesce(service.app_entitlement_id, feed.app_entitlement_id) as app_entitlement_id,
    coalesce(service.app_user_id, feed.app_user_id) as app_user_id,
    service.app_id is not null as held_per_service,
    feed.app_id is not null as held_per_feed,
    (select complete_snapshots from service_snapshots) > 0 as service_was_read,
    service.granted_at as service_granted_at,
    service.scheduled_end_at,
    service.originating_ticket_id,
    feed.granted_at as feed_granted_at,
    feed.granted_ticket_id as feed_granted_ticket_id
from service_held as service
full outer join feed_held as feed
    on feed.app_id = service.app_id
    and feed.app_entitlement_id = service.app_entitlement_id
    and feed.app_user_id = service.app_user_id
