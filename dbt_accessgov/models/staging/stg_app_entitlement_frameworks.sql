-- One row per compliance framework of each app entitlement (its complianceFrameworkValueIds,
-- an array: one row per item on every engine, macros/json_documents.sql), from the current
-- rows of app_entitlements (macros/snapshots.sql), as stg_app_entitlements; none for an
-- entitlement under no framework. The framework is an attribute value (stg_attribute_values).
select distinct
    app_entitlements.{{ adapter.quote('appId') }} as app_id,
    app_entitlements.{{ adapter.quote('id') }} as app_entitlement_id,
    framework_value as framework_value_id
from ({{ current_rows('app_entitlements', key=['appId', 'id']) }}) as app_entitlements
{{ json_string_array_rows('app_entitlements', adapter.quote('complianceFrameworkValueIds'), 'framework_value') }}
where {{ unset_as_null('framework_value') }} is not null
