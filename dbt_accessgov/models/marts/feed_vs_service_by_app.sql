-- Data quality, per app: how many grants the service and the feed hold now, and how many
-- of them only one side holds (feed_vs_service_grants lists them). Apps where both agree
-- have zeros. Empty until a run has read `grants` in full. docs/models.md.
with per_app as (
    select
        app_id,
        cast(null as {{ dbt.type_string() }}) as app_entitlement_id,  -- names: the app's only
        sum(case when held_per_service then 1 else 0 end) as held_per_service,
        sum(case when held_per_feed then 1 else 0 end) as held_per_feed,
        sum(case when held_per_service and held_per_feed then 1 else 0 end) as held_per_both,
        sum(case when held_per_service and not held_per_feed then 1 else 0 end) as unknown_to_feed,
        sum(case when held_per_feed and not held_per_service then 1 else 0 end) as not_held_per_service
    from {{ ref('int_grants_feed_and_service') }}
    where service_was_read
    group by app_id
)

select
    app_id,
    app_display_name,
    held_per_service,
    held_per_feed,
    held_per_both,
    unknown_to_feed,
    not_held_per_service
from ({{ with_catalog_names('per_app') }}) as named
