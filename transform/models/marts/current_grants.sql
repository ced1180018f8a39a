-- Who holds what now: the intervals not revoked. Complete only when the extraction's
-- start_date precedes the tenant's first grant (docs/models.md).
select
    app_id,
    app_display_name,
    app_entitlement_id,
    app_entitlement_display_name,
    app_user_id,
    granted_at,
    granted_ticket_id
from {{ ref('grant_intervals') }}
where revoked_at is null
