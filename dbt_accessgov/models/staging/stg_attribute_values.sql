-- One row per value of the tenant's attributes (a risk level such as High, a compliance
-- framework such as SOX): what an entitlement's riskLevelValueId and
-- complianceFrameworkValueIds name. The current rows of the full-table stream
-- (macros/snapshots.sql); none when it was never loaded. Unset fields are null
-- (macros/unset_fields.sql).
{%- if not raw_stream_exists('attribute_values') %}
{{ no_rows([
    ('attribute_value_id', dbt.type_string()),
    ('attribute_type_id', dbt.type_string()),
    ('value', dbt.type_string()),
    ('updated_at', type_timestamp_tz()),
]) }}
{%- else %}
select
    {{ adapter.quote('id') }} as attribute_value_id,
    {{ unset_as_null(adapter.quote('attributeTypeId')) }} as attribute_type_id,
    {{ unset_as_null(adapter.quote('value')) }} as value,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('attribute_values', key=['id']) }}) as attribute_values
{%- endif %}
