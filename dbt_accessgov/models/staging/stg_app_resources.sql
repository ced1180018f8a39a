-- One row per resource (the group, role, repository or license an entitlement is on), keyed
-- by (app, resource type, resource). The current rows of the full-table stream
-- (macros/snapshots.sql); none when it was never loaded. Unset fields are null
-- (macros/unset_fields.sql).
{%- if not raw_stream_exists('app_resources') %}
{{ no_rows([
    ('app_id', dbt.type_string()),
    ('app_resource_type_id', dbt.type_string()),
    ('app_resource_id', dbt.type_string()),
    ('display_name', dbt.type_string()),
    ('parent_app_resource_id', dbt.type_string()),
    ('updated_at', type_timestamp_tz()),
]) }}
{%- else %}
select
    {{ adapter.quote('appId') }} as app_id,
    {{ adapter.quote('appResourceTypeId') }} as app_resource_type_id,
    {{ adapter.quote('id') }} as app_resource_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    {{ unset_as_null(adapter.quote('parentAppResourceId')) }} as parent_app_resource_id,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('app_resources', key=['appId', 'appResourceTypeId', 'id']) }}) as resources
{%- endif %}
