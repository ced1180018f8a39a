-- What a user-access review at as_of covers: every grant held then (access_as_of: the var
-- as_of, or the time of the build), one row per compliance framework its entitlement falls
-- under (a row with a null framework where it falls under none, or the catalog no longer
-- lists it), with the entitlement's risk level: scope a SOX review with
-- compliance_framework = 'SOX'. The ratings are the catalog's now, not as of as_of; a rating
-- whose attribute value the tap has not read shows as the value's id. The person is the
-- account's owner as the directory lists them now (macros/people.sql).
select
    held.app_id,
    held.app_entitlement_id,
    held.app_user_id,
    held.user_id,
    held.user_email,
    coalesce(framework_values.value, frameworks.framework_value_id) as compliance_framework,
    coalesce(risk_levels.value, entitlements.risk_level_value_id) as risk_level,
    held.granted_at
from {{ ref('access_as_of') }} as held
left join {{ ref('stg_app_entitlement_frameworks') }} as frameworks
    on frameworks.app_id = held.app_id
    and frameworks.app_entitlement_id = held.app_entitlement_id
left join {{ ref('stg_attribute_values') }} as framework_values
    on framework_values.attribute_value_id = frameworks.framework_value_id
left join ({{ catalog_entitlements() }}) as entitlements
    on entitlements.app_id = held.app_id
    and entitlements.app_entitlement_id = held.app_entitlement_id
left join {{ ref('stg_attribute_values') }} as risk_levels
    on risk_levels.attribute_value_id = entitlements.risk_level_value_id
