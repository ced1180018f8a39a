-- One row per app entitlement of the tenant's catalog, keyed by (app, entitlement): ids are
-- unique only within their app. The current rows of the full-table stream (macros/snapshots.sql:
-- its latest complete snapshot, the most recently updated copy of each entitlement): removed
-- entitlements are gone. Unset fields are null (macros/unset_fields.sql); an unset
-- isAutomationEnabled is false.
select
    {{ adapter.quote('appId') }} as app_id,
    {{ adapter.quote('id') }} as app_entitlement_id,
    {{ unset_as_null(adapter.quote('displayName')) }} as display_name,
    coalesce({{ adapter.quote('isAutomationEnabled') }}, false) as is_automation_enabled,
    cast({{ adapter.quote('grantCount') }} as {{ dbt.type_bigint() }}) as grant_count,
    {{ timestamp_tz(adapter.quote('updatedAt')) }} as updated_at
from ({{ current_rows('app_entitlements', key=['appId', 'id']) }}) as app_entitlements
