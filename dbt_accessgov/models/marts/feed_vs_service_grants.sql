-- Data quality: the grants on which the grant feed and the service disagree now, one row
-- each. unknown_to_feed: held per the service, not per the feed (made before the feed
-- began or before its retention, or the feed missed its ADDED). not_held_per_service: held
-- per the feed, not per the service (its account, entitlement or app was deleted, or the feed
-- missed a REMOVED). Empty until a run has read `grants` in full. docs/models.md.
with disagreements as (
    select
        app_id,
        app_entitlement_id,
        app_user_id,
        case when held_per_service then 'unknown_to_feed' else 'not_held_per_service' end as disagreement,
        service_granted_at,
        feed_granted_at
    from {{ ref('int_grants_feed_and_service') }}
    where service_was_read and held_per_service <> held_per_feed
)

select
    app_id,
    app_display_name,
    app_entitlement_id,
    app_entitlement_display_name,
    app_user_id,
    disagreement,
    service_granted_at,
    feed_granted_at
from ({{ with_catalog_names('disagreements') }}) as named
