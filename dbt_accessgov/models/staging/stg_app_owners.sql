-- One row per owner of each app (the people accountable for it), with the owner's names and
-- statuses as the service sent them with the list: an owner may have left the directory. The
-- current rows of the full-table stream (macros/snapshots.sql); none when it was never
-- loaded. Unset fields are null (macros/unset_fields.sql), the status enums' zero value
-- UNKNOWN included.
{%- if not raw_stream_exists('app_owners') %}
{{ no_rows([
    ('app_id', dbt.type_string()),
    ('user_id', dbt.type_string()),
    ('display_name', dbt.type_string()),
    ('email', dbt.type_string()),
    ('status', dbt.type_string()),
    ('directory_status', dbt.type_string()),
    ('updated_at', type_timestamp_tz()),
]) }}
{%- else %}
select
    {{ adapter.quote('appId') }} as app_id,
    {{ adapter.quote('userId') }} as user_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    {{ unset_as_null(adapter.quote('email')) }} as email,
    {{ unset_as_null(adapter.quote('status'), enum_zero='UNKNOWN') }} as status,
    {{ unset_as_null(adapter.quote('directoryStatus'), enum_zero='UNKNOWN') }} as directory_status,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('app_owners', key=['appId', 'userId']) }}) as owners
{%- endif %}
