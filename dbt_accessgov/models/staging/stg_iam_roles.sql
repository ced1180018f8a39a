-- One row per role of the service itself (Super Admin, Auditor...: what a user's roleIds
-- name). The current rows of the full-table stream (macros/snapshots.sql); none when it was
-- never loaded (a credential without the permission is refused the list). Unset fields are
-- null (macros/unset_fields.sql).
{%- if not raw_stream_exists('iam_roles') %}
{{ no_rows([
    ('role_id', dbt.type_string()),
    ('name', dbt.type_string()),
    ('display_name', dbt.type_string()),
    ('updated_at', type_timestamp_tz()),
]) }}
{%- else %}
select
    {{ adapter.quote('id') }} as role_id,
    {{ unset_as_null(adapter.quote('name')) }} as name,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('iam_roles', key=['id']) }}) as roles
{%- endif %}
