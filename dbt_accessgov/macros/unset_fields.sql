{% macro unset_as_null(expression, enum_zero=none) -%}
    {#-
      A text field of the service, null when unset: empty, or the enum's zero value
      (macros.yml). In a staging model:
          {{ unset_as_null(adapter.quote('status'), enum_zero='UNKNOWN') }} as status
    -#}
    {%- if enum_zero is none -%}
        nullif({{ expression }}, '')
    {%- else -%}
        case when {{ expression }} not in ('', '{{ enum_zero }}') then {{ expression }} end
    {%- endif -%}
{%- endmacro %}
