-- Who holds what now, and who they are: the grants of the service's latest complete `grants`
-- snapshot (the feed does not reach back to every grant held today); where no run has read
-- `grants` in full, the fold of the feed (grant intervals not revoked). granted_at is when
-- the grant began: the feed's ADDED that opened it where the feed knows it, else the
-- service's start. The person (null where the account has no owner) and the account's own
-- status and type: macros/people.sql. docs/models.md.
with held as (
    select
        app_id,
        app_entitlement_id,
        app_user_id,
        coalesce(feed_granted_at, service_granted_at) as granted_at,
        case when held_per_feed then feed_granted_ticket_id else originating_ticket_id end as granted_ticket_id,
        held_per_feed as feed_knows,
        case when service_was_read then 'service' else 'feed' end as held_per,
        service_granted_at,
        scheduled_end_at
    from {{ ref('int_grants_feed_and_service') }}
    where held_per_service or (held_per_feed and not service_was_read)
)

select
    app_id,
    app_display_name,
    app_entitlement_id,
    app_entitlement_display_name,
    app_user_id,
    granted_at,
    granted_ticket_id,
    feed_knows,
    held_per,
    service_granted_at,
    scheduled_end_at,
    user_id,
    user_display_name,
    user_email,
    user_status,
    user_directory_status,
    user_listed,
    app_user_display_name,
    app_user_type,
    app_user_status,
    app_user_listed
from ({{ with_people('(' ~ with_catalog_names('held') ~ ')') }}) as named
