-- Current grants of people who left: the account's owner is disabled or deleted in the
-- directory or in the service, or no longer listed by the directory. "Not listed" counts
-- only when the latest `users` snapshot is the directory's listing (int_users_snapshot):
-- with the tap's read_directory false it holds only the exclusions' users, and an owner
-- outside them is unknown, not gone. Accounts nobody owns are unowned_accounts_with_access.
select
    app_id,
    app_display_name,
    app_entitlement_id,
    app_entitlement_display_name,
    app_user_id,
    user_id,
    user_display_name,
    user_email,
    user_status,
    user_directory_status,
    user_listed,
    app_user_status,
    granted_at,
    granted_ticket_id
from {{ ref('current_grants') }}
where user_id is not null
    and (
        user_status in ('DISABLED', 'DELETED')
        or user_directory_status in ('DISABLED', 'DELETED')
        or (not user_listed and (select from_directory from {{ ref('int_users_snapshot') }}))
    )
