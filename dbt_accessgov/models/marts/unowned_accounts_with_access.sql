-- Current grants of accounts nobody owns (service and system accounts, and any account
-- whose owner is unset): the account is listed by its app and names no owner. A grant of an
-- account its app no longer lists is in current_grants with app_user_listed false, not here.
select
    app_id,
    app_display_name,
    app_entitlement_id,
    app_entitlement_display_name,
    app_user_id,
    app_user_display_name,
    app_user_type,
    app_user_status,
    granted_at,
    granted_ticket_id,
    scheduled_end_at
from {{ ref('current_grants') }}
where app_user_listed and user_id is null
