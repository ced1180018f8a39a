-- App entitlements of the catalog that someone holds now (current_grants) and that have no
-- owner of their own (their app's owners may still review them: entitlement_reviewers), with
-- how many grants are held. None while no run has read entitlement_owners in full: the
-- owners are then unknown, not missing.
select
    held.app_id,
    held.app_entitlement_id,
    entitlements.app_entitlement_display_name,
    count(*) as grants_held
from {{ ref('current_grants') }} as held
inner join ({{ catalog_entitlements() }}) as entitlements
    on entitlements.app_id = held.app_id
    and entitlements.app_entitlement_id = held.app_entitlement_id
left join (
    select distinct app_id, app_entitlement_id from {{ ref('stg_entitlement_owners') }}
) as owned
    on owned.app_id = held.app_id
    and owned.app_entitlement_id = held.app_entitlement_id
where owned.app_id is null and {{ stream_was_read('entitlement_owners') }}
group by held.app_id, held.app_entitlement_id, entitlements.app_entitlement_display_name
