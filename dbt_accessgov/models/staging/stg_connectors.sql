-- One row per connector of each app (how the app's data reaches the service), with its last
-- sync read from its status object (macros/json_documents.sql): all null for a connector that
-- never synced, no completion while its first sync runs. The current rows of the full-table
-- stream (macros/snapshots.sql); none when it was never loaded. Unset fields are null
-- (macros/unset_fields.sql), the sync status enum's zero value included.
{%- if not raw_stream_exists('connectors') %}
{{ no_rows([
    ('app_id', dbt.type_string()),
    ('connector_id', dbt.type_string()),
    ('display_name', dbt.type_string()),
    ('sync_status', dbt.type_string()),
    ('sync_started_at', type_timestamp_tz()),
    ('sync_completed_at', type_timestamp_tz()),
    ('last_error', dbt.type_string()),
    ('updated_at', type_timestamp_tz()),
]) }}
{%- else %}
select
    {{ adapter.quote('appId') }} as app_id,
    {{ adapter.quote('id') }} as connector_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    {{ unset_as_null(json_text(adapter.quote('status'), 'status'), enum_zero='SYNC_STATUS_UNSPECIFIED') }} as sync_status,
    {{ timestamp_from_json(unset_as_null(json_text(adapter.quote('status'), 'startedAt'))) }} as sync_started_at,
    {{ timestamp_from_json(unset_as_null(json_text(adapter.quote('status'), 'completedAt'))) }} as sync_completed_at,
    {{ unset_as_null(json_text(adapter.quote('status'), 'lastError')) }} as last_error,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('connectors', key=['appId', 'id']) }}) as connectors
{%- endif %}
