-- One row per user of the directory and of the exclusion entries: the current rows of the
-- full-table stream (macros/snapshots.sql: its latest complete snapshot, the most recently
-- updated copy of each user). Unset fields are null (macros/unset_fields.sql), the status
-- enums' zero value UNKNOWN included. The roles each holds in the service itself (roleIds, an
-- array) are rows of stg_user_roles.
select
    {{ adapter.quote('id') }} as user_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    {{ unset_as_null(adapter.quote('email')) }} as email,
    {{ unset_as_null(adapter.quote('status'), enum_zero='UNKNOWN') }} as status,
    {{ unset_as_null(adapter.quote('directoryStatus'), enum_zero='UNKNOWN') }} as directory_status,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('users', key=['id']) }}) as users
