-- What each app entitlement of the catalog is, for scoping a review: the resource it is on and
-- its type (null for an app-level entitlement), its risk level and the compliance frameworks
-- it falls under (names sorted, joined by ', '; null when none), and how many owners of its own
-- it has (null while no run has read entitlement_owners in full: not known, not none). A
-- rating whose attribute value the tap has not read shows as the value's id.
with frameworks as (
    select
        rated.app_id,
        rated.app_entitlement_id,
        {{ sorted_text_list('coalesce(framework_values.value, rated.framework_value_id)', "', '") }}
            as compliance_frameworks
    from {{ ref('stg_app_entitlement_frameworks') }} as rated
    left join {{ ref('stg_attribute_values') }} as framework_values
        on framework_values.attribute_value_id = rated.framework_value_id
    group by rated.app_id, rated.app_entitlement_id
),

owners as (
    select app_id, app_entitlement_id, count(*) as owner_count
    from {{ ref('stg_entitlement_owners') }}
    group by app_id, app_entitlement_id
)

select
    entitlements.app_id,
    entitlements.app_entitlement_id,
    entitlements.app_display_name,
    entitlements.app_entitlement_display_name,
    entitlements.app_resource_type_id,
    resource_types.display_name as app_resource_type_display_name,
    entitlements.app_resource_id,
    resources.display_name as app_resource_display_name,
    coalesce(risk_levels.value, entitlements.risk_level_value_id) as risk_level,
    frameworks.compliance_frameworks,
    case when {{ stream_was_read('entitlement_owners') }} then coalesce(owners.owner_count, 0) end
        as owner_count
from ({{ catalog_entitlements() }}) as entitlements
left join {{ ref('stg_app_resource_types') }} as resource_types
    on resource_types.app_id = entitlements.app_id
    and resource_types.app_resource_type_id = entitlements.app_resource_type_id
left join {{ ref('stg_app_resources') }} as resources
    on resources.app_id = entitlements.app_id
    and resources.app_resource_type_id = entitlements.app_resource_type_id
    and resources.app_resource_id = entitlements.app_resource_id
left join {{ ref('stg_attribute_values') }} as risk_levels
    on risk_levels.attribute_value_id = entitlements.risk_level_value_id
left join frameworks
    on frameworks.app_id = entitlements.app_id
    and frameworks.app_entitlement_id = entitlements.app_entitlement_id
left join owners
    on owners.app_id = entitlements.app_id
    and owners.app_entitlement_id = entitlements.app_entitlement_id
