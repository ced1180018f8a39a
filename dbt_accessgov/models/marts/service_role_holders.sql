-- Who administers the governance service itself: one row per person and role of the service
-- they hold (a user's roleIds), the person as the directory lists them now (stg_users: with
-- the tap's read_directory false, only the users of the exclusion entries) and the role's
-- name (null for a role the tap has not read: iam_roles refused).
select
    held.user_id,
    users.email as user_email,
    users.display_name as user_display_name,
    users.status as user_status,
    held.role_id,
    roles.display_name as role_display_name
from {{ ref('stg_user_roles') }} as held
left join {{ ref('stg_users') }} as users
    on users.user_id = held.user_id
left join {{ ref('stg_iam_roles') }} as roles
    on roles.role_id = held.role_id
