-- One row per app entitlement of the tenant's catalog, keyed by (app, entitlement): ids are
-- unique only within their app. The current rows of the full-table stream (macros/snapshots.sql:
-- its latest complete snapshot, the most recently updated copy of each entitlement): removed
-- entitlements are gone. Unset fields are null (macros/unset_fields.sql); an unset
-- isAutomationEnabled is false. What it is on (its resource and the resource's type, null for
-- an app-level entitlement) and its risk level are ids of stg_app_resources,
-- stg_app_resource_types and stg_attribute_values; its compliance frameworks, an array, are
-- rows of stg_app_entitlement_frameworks.
select
    {{ adapter.quote('appId') }} as app_id,
    {{ adapter.quote('id') }} as app_entitlement_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    coalesce({{ adapter.quote('isAutomationEnabled') }}, false) as is_automation_enabled,
    cast({{ adapter.quote('grantCount') }} as {{ dbt.type_bigint() }}) as grant_count,
    {{ unset_as_null(adapter.quote('appResourceTypeId')) }} as app_resource_type_id,
    {{ unset_as_null(adapter.quote('appResourceId')) }} as app_resource_id,
    {{ unset_as_null(adapter.quote('riskLevelValueId')) }} as risk_level_value_id,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('app_entitlements', key=['appId', 'id']) }}) as app_entitlements
