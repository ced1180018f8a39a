-- One row per distinct grant event: the loaded feed deduplicated on its primary key
-- (delivery is at-least-once and JSONL appends). Every event type is kept, known or not;
-- lifecycle_action says what it does to the grant ('other' = nothing). Unset fields are null
-- (macros/unset_fields.sql); an unset event type is the enum's zero value.
with loaded as (
    select
        {{ adapter.quote('appId') }} as app_id,
        {{ adapter.quote('appEntitlementId') }} as app_entitlement_id,
        {{ adapter.quote('appUserId') }} as app_user_id,
        coalesce({{ unset_as_null(adapter.quote('eventType')) }}, 'GRANT_EVENT_TYPE_UNSPECIFIED') as event_type,
        {{ timestamp_tz(adapter.quote('date')) }} as event_at,
        {{ unset_as_null(json_text('feed', 'ticketId')) }} as ticket_id
    from {{ source('accessgov', 'grant_feed') }}
),

distinct_events as (
    select
        app_id,
        app_entitlement_id,
        app_user_id,
        event_type,
        event_at,
        max(ticket_id) as ticket_id,
        count(*) as times_loaded
    from loaded
    group by app_id, app_entitlement_id, app_user_id, event_type, event_at
)

select
    app_id,
    app_entitlement_id,
    app_user_id,
    event_type,
    case event_type
        when 'GRANT_EVENT_TYPE_ADDED' then 'added'
        when 'GRANT_EVENT_TYPE_REMOVED' then 'removed'
        else 'other'
    end as lifecycle_action,
    event_at,
    ticket_id,
    times_loaded
from distinct_events
