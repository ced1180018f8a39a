-- One row per app entitlement of the tenant's catalog, keyed by (app, entitlement): ids are
-- unique only within their app. The latest complete snapshot of the full-table stream (see
-- macros/snapshots.sql): removed entitlements are gone; the most recently updated copy wins. An
-- empty string is an unset field; an unset isAutomationEnabled is false.
with ranked as (
    select
        "appId" as app_id,
        "id" as app_entitlement_id,
        nullif("displayName", '') as display_name,
        coalesce("isAutomationEnabled", false) as is_automation_enabled,
        cast("grantCount" as {{ dbt.type_bigint() }}) as grant_count,
        {{ timestamp_tz('"updatedAt"') }} as updated_at,
        row_number() over (
            partition by "appId", "id"
            order by {{ timestamp_tz('"updatedAt"') }} desc nulls last
        ) as copy_rank
    from ({{ latest_complete_snapshot('app_entitlements') }}) as app_entitlements
)

select app_id, app_entitlement_id, display_name, is_automation_enabled, grant_count, updated_at
from ranked
where copy_rank = 1
