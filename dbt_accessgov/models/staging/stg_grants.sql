-- One row per grant the service holds now: the latest complete snapshot of the full-table
-- stream `grants` (macros/snapshots.sql); none when no run has read it in full. Unset fields
-- are null (macros/unset_fields.sql).
select distinct
    {{ adapter.quote('appId') }} as app_id,
    {{ adapter.quote('appEntitlementId') }} as app_entitlement_id,
    {{ adapter.quote('appUserId') }} as app_user_id,
    {{ timestamp_tz(adapter.quote('appEntitlementUserBindingCreatedAt')) }} as granted_at,
    {{ timestamp_tz(adapter.quote('appEntitlementUserBindingDeprovisionAt')) }} as scheduled_end_at,
    {{ unset_as_null(adapter.quote('originatingTicketId')) }} as originating_ticket_id
from ({{ latest_complete_snapshot('grants') }}) as grants
