{% macro with_catalog_names(relation) -%}
    {#-
      Names next to ids (macros.yml). In a mart, selecting the columns it shows:
          from ({{ with_catalog_names(ref('int_grant_lifecycle_events')) }}) as events
    -#}
    select
        unnamed.*,
        apps.display_name as app_display_name,
        entitlements.display_name as app_entitlement_display_name
    from {{ relation }} as unnamed
    left join {{ ref('stg_apps') }} as apps
        on apps.app_id = unnamed.app_id
    left join {{ ref('stg_app_entitlements') }} as entitlements
        on entitlements.app_id = unnamed.app_id
        and entitlements.app_entitlement_id = unnamed.app_entitlement_id
{%- endmacro %}

{% macro catalog_entitlements() -%}
    {#-
      Every app entitlement the catalog lists now, with its app's name and its own next to the
      ids (macros.yml). In a mart:
          from ({{ catalog_entitlements() }}) as entitlements
    -#}
    select
        entitlements.*,
        apps.display_name as app_display_name,
        entitlements.display_name as app_entitlement_display_name
    from {{ ref('stg_app_entitlements') }} as entitlements
    left join {{ ref('stg_apps') }} as apps
        on apps.app_id = entitlements.app_id
{%- endmacro %}
