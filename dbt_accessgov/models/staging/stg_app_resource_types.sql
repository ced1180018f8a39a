-- One row per resource type of each app (a group, a role, a repository...: what an
-- entitlement is on), keyed by (app, type): ids are unique only within their app. The current
-- rows of the full-table stream (macros/snapshots.sql); none when it was never loaded (a
-- release or a credential that refuses the operation). Unset fields are null
-- (macros/unset_fields.sql).
{%- if not raw_stream_exists('app_resource_types') %}
{{ no_rows([
    ('app_id', dbt.type_string()),
    ('app_resource_type_id', dbt.type_string()),
    ('display_name', dbt.type_string()),
    ('updated_at', type_timestamp_tz()),
]) }}
{%- else %}
select
    {{ adapter.quote('appId') }} as app_id,
    {{ adapter.quote('id') }} as app_resource_type_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('app_resource_types', key=['appId', 'id']) }}) as resource_types
{%- endif %}
