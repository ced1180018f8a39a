-- One row per automation exclusion: who the user is, their status in the service and in the
-- directory, and whether that app user holds the entitlement they are excluded from now.
select
    exclusions.app_id,
    exclusions.app_display_name,
    exclusions.app_entitlement_id,
    exclusions.app_entitlement_display_name,
    exclusions.app_user_id,
    exclusions.user_id,
    users.display_name,
    users.email,
    users.status,
    users.directory_status,
    held.app_user_id is not null as holds_entitlement,
    held.granted_at as held_since
from ({{ with_catalog_names(ref('stg_automation_exclusions')) }}) as exclusions
left join {{ ref('stg_users') }} as users
    on users.user_id = exclusions.user_id
left join {{ ref('current_grants') }} as held
    on held.app_id = exclusions.app_id
    and held.app_entitlement_id = exclusions.app_entitlement_id
    and held.app_user_id = exclusions.app_user_id
