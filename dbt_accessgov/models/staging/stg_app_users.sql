-- One row per account the service lists now: the current rows of the full-table stream
-- (macros/snapshots.sql), with its owner (user_id: null for an account nobody owns), its type
-- and its own status in its app. Unset fields are null (macros/unset_fields.sql), the enums'
-- zero values included.
select
    {{ adapter.quote('appId') }} as app_id,
    {{ adapter.quote('id') }} as app_user_id,
    {{ unset_as_null(adapter.quote('identityUserId')) }} as user_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    {{ unset_as_null(adapter.quote('email')) }} as email,
    {{ unset_as_null(adapter.quote('appUserType'), enum_zero='APP_USER_TYPE_UNSPECIFIED') }} as app_user_type,
    {{ unset_as_null(json_text(adapter.quote('status'), 'status'), enum_zero='STATUS_UNSPECIFIED') }} as status,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('app_users', key=['appId', 'id']) }}) as app_users
