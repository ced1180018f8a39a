-- One row per automation exclusion the service holds now: the latest complete snapshot of the
-- full-table stream (see macros/snapshots.sql); rows of earlier snapshots and of runs that
-- failed half-way are history (automation_exclusion_history), not current. Unset fields are
-- null (macros/unset_fields.sql).
select distinct
    {{ adapter.quote('appId') }} as app_id,
    {{ adapter.quote('appEntitlementId') }} as app_entitlement_id,
    {{ unset_as_null(adapter.quote('appUserId')) }} as app_user_id,
    {{ adapter.quote('userId') }} as user_id
from ({{ latest_complete_snapshot('automation_exclusions') }}) as exclusions
