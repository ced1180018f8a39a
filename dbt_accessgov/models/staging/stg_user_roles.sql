-- One row per role of the service itself each user holds (roleIds, an array: one row per
-- item on every engine, macros/json_documents.sql), from the current rows of users
-- (macros/snapshots.sql), as stg_users; none for a user without a role. The role is one of
-- stg_iam_roles.
select distinct
    users.{{ adapter.quote('id') }} as user_id,
    held_role as role_id
from ({{ current_rows('users', key=['id']) }}) as users
{{ json_string_array_rows('users', adapter.quote('roleIds'), 'held_role') }}
where {{ unset_as_null('held_role') }} is not null
