-- Every period a grant was held, one row per real period, from three sources: the grant
-- feed's intervals (int_feed_intervals), the periods the service says ended (stg_past_grants,
-- back before the feed began) and the grants it holds now (stg_grants, with their start).
-- The rule (docs/models.md, "Access before the feed"): a grant's periods from every source,
-- ordered by start, are one period where they overlap: the earliest start known, the latest
-- end (none while a source says it is held), the feed's tickets. Two periods that touch (a
-- grant revoked and granted again at one instant) stay two, except a feed interval whose
-- start the feed does not know (held since before it began): it is the period that the other
-- sources end at its end, and takes their start.
-- The window is written out in each call, not named (WINDOW clause): Snowflake has none.
{%- set grant_order -%}
    partition by app_id, app_entitlement_id, app_user_id
    order by start_order, start_known, source_order
{%- endset %}
with periods as (
    select
        app_id,
        app_entitlement_id,
        app_user_id,
        granted_at,
        revoked_at,
        granted_ticket_id,
        revoked_ticket_id,
        1 as source_order
    from {{ ref('int_feed_intervals') }}

    union all

    select
        app_id,
        app_entitlement_id,
        app_user_id,
        granted_at,
        revoked_at,
        cast(null as {{ dbt.type_string() }}) as granted_ticket_id,
        cast(null as {{ dbt.type_string() }}) as revoked_ticket_id,
        2 as source_order
    from {{ ref('stg_past_grants') }}

    union all

    select
        app_id,
        app_entitlement_id,
        app_user_id,
        granted_at,
        cast(null as {{ type_timestamp_tz() }}) as revoked_at,
        originating_ticket_id as granted_ticket_id,
        cast(null as {{ dbt.type_string() }}) as revoked_ticket_id,
        3 as source_order
    from {{ ref('stg_grants') }}
),

ordered as (
    select
        *,
        -- A start not known sorts where the period is known to be held: at its end, or
        -- (held now) after every start; there, before the periods that start at that instant.
        coalesce(granted_at, revoked_at, {{ timestamp_tz("'9999-12-31T00:00:00Z'") }}) as start_order,
        case when granted_at is null then 0 else 1 end as start_known,
        coalesce(revoked_at, {{ timestamp_tz("'9999-12-31T00:00:00Z'") }}) as end_order
    from periods
),

compared as (
    select
        *,
        max(end_order) over (
            {{ grant_order }} rows between unbounded preceding and 1 preceding
        ) as previous_end
    from ordered
),

numbered as (
    select
        *,
        sum(
            case
                when previous_end is null then 1
                when start_order > previous_end then 1
                when start_order = previous_end and start_known = 1 then 1
                else 0
            end
        ) over ({{ grant_order }} rows between unbounded preceding and current row) as period_number
    from compared
),

merged as (
    select
        app_id,
        app_entitlement_id,
        app_user_id,
        min(granted_at) as granted_at,
        max(case when revoked_at is null then 1 else 0 end) as held_now,
        max(revoked_at) as last_revoked_at,
        coalesce(
            max(case when source_order = 1 then granted_ticket_id end), max(granted_ticket_id)
        ) as granted_ticket_id,
        max(case when source_order = 1 then revoked_ticket_id end) as revoked_ticket_id,
        max(case when source_order = 1 then 1 else 0 end) as in_feed,
        max(case when source_order = 2 then 1 else 0 end) as in_past_grants,
        max(case when source_order = 3 then 1 else 0 end) as in_grants
    from numbered
    group by app_id, app_entitlement_id, app_user_id, period_number
)

select
    app_id,
    app_entitlement_id,
    app_user_id,
    granted_at,
    case when held_now = 1 then null else last_revoked_at end as revoked_at,
    granted_ticket_id,
    revoked_ticket_id,
    case
        when in_feed = 1 and in_past_grants = 1 and in_grants = 1 then 'feed+past_grants+grants'
        when in_feed = 1 and in_past_grants = 1 then 'feed+past_grants'
        when in_feed = 1 and in_grants = 1 then 'feed+grants'
        when in_feed = 1 then 'feed'
        when in_past_grants = 1 and in_grants = 1 then 'past_grants+grants'
        when in_past_grants = 1 then 'past_grants'
        else 'grants'
    end as source
from merged
