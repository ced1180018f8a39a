{#
  Reading the service's nested objects (a task's type, its policy's history, its external
  references) where the engines differ: PostgreSQL holds them as jsonb (target-postgres), DuckDB
  as JSON (sources.yml reads them unsniffed), Spark as JSON text (declare_jsonl_sources). Each
  macro is the one place its SQL is written (macros.yml).
#}

{% macro json_path_text(column, keys) -%}
    {{ return(adapter.dispatch('json_path_text', 'accessgov')(column, keys)) }}
{%- endmacro %}

{% macro default__json_path_text(column, keys) -%}
    {#- PostgreSQL jsonb and DuckDB JSON alike: -> down the path, ->> for the last key (a
        number: an array position). -#}
    ({{ column }}
    {%- for key in keys -%}
        {{ ' ->> ' if loop.last else ' -> ' }}{{ key if key is number else "'" ~ key ~ "'" }}
    {%- endfor -%})
{%- endmacro %}

{% macro spark__json_path_text(column, keys) -%}
    get_json_object({{ column }}, '$
    {%- for key in keys -%}
        {{ '[' ~ key ~ ']' if key is number else '.' ~ key }}
    {%- endfor -%}')
{%- endmacro %}

{% macro json_first_item_text(column, key) -%}
    {{ return(adapter.dispatch('json_first_item_text', 'accessgov')(column, key)) }}
{%- endmacro %}

{% macro default__json_first_item_text(column, key) -%}
    {#- DuckDB: the array is JSON. -#}
    ({{ column }} -> 0 ->> '{{ key }}')
{%- endmacro %}

{% macro postgres__json_first_item_text(column, key) -%}
    {#- jsonb, or jsonb[] (target-postgres's type for an array of objects): to_jsonb reads both. -#}
    (to_jsonb({{ column }}) -> 0 ->> '{{ key }}')
{%- endmacro %}

{% macro spark__json_first_item_text(column, key) -%}
    get_json_object({{ column }}, '$[0].{{ key }}')
{%- endmacro %}

{% macro json_member_name(column) -%}
    {{ return(adapter.dispatch('json_member_name', 'accessgov')(column)) }}
{%- endmacro %}

{% macro default__json_member_name(column) -%}
    {#- DuckDB: the first key of the object (a oneof such as a task's type has one). -#}
    json_keys({{ column }})[1]
{%- endmacro %}

{% macro postgres__json_member_name(column) -%}
    (
        select min(member.key)
        from jsonb_each(case when jsonb_typeof({{ column }}) = 'object' then {{ column }} end) as member
        where jsonb_typeof(member.value) <> 'null'
    )
{%- endmacro %}

{% macro spark__json_member_name(column) -%}
    json_object_keys({{ column }})[0]
{%- endmacro %}

{% macro json_array_rows(relation, column, key, alias) -%}
    {{ return(adapter.dispatch('json_array_rows', 'accessgov')(relation, column, key, alias)) }}
{%- endmacro %}

{% macro default__json_array_rows(relation, column, key, alias) -%}
    {#- DuckDB: one row per item of the array at `key` of `relation`.`column`, as `alias`. -#}
    cross join (
        select unnest(json_extract({{ relation }}.{{ column }}, '$.{{ key }}[*]')) as {{ alias }}
    ) as {{ alias }}_items
{%- endmacro %}

{% macro postgres__json_array_rows(relation, column, key, alias) -%}
    cross join lateral jsonb_array_elements(
        case when jsonb_typeof({{ relation }}.{{ column }} -> '{{ key }}') = 'array'
        then {{ relation }}.{{ column }} -> '{{ key }}' end
    ) as {{ alias }}_items({{ alias }})
{%- endmacro %}

{% macro spark__json_array_rows(relation, column, key, alias) -%}
    lateral view explode(
        from_json(get_json_object({{ relation }}.{{ column }}, '$.{{ key }}'), 'array<string>')
    ) {{ alias }}_items as {{ alias }}
{%- endmacro %}

{% macro timestamp_from_json(expression) -%}
    {{ return(adapter.dispatch('timestamp_from_json', 'accessgov')(expression)) }}
{%- endmacro %}

{% macro default__timestamp_from_json(expression) -%}
    {#- DuckDB (and Spark) keep the first six fractional digits, as the loaders do. -#}
    {{ timestamp_tz(expression) }}
{%- endmacro %}

{% macro postgres__timestamp_from_json(expression) -%}
    {#- PostgreSQL rounds nanoseconds to the nearest microsecond: cut them off first. -#}
    {{ timestamp_tz("regexp_replace(" ~ expression ~ ", '([.][0-9]{6})[0-9]+', '\\1')") }}
{%- endmacro %}

{% macro json_string_array_rows(relation, column, alias) -%}
    {{ return(adapter.dispatch('json_string_array_rows', 'accessgov')(relation, column, alias)) }}
{%- endmacro %}

{% macro default__json_string_array_rows(relation, column, alias) -%}
    {#- DuckDB: one row per item of the array of strings `relation`.`column` (JSON), as `alias`. -#}
    cross join (
        select unnest(json_extract_string({{ relation }}.{{ column }}, '$[*]')) as {{ alias }}
    ) as {{ alias }}_items
{%- endmacro %}

{% macro postgres__json_string_array_rows(relation, column, alias) -%}
    {#- text[] (target-postgres's type for an array of strings), jsonb[] or jsonb: to_jsonb reads each. -#}
    cross join lateral jsonb_array_elements_text(
        case when jsonb_typeof(to_jsonb({{ relation }}.{{ column }})) = 'array'
        then to_jsonb({{ relation }}.{{ column }}) end
    ) as {{ alias }}_items({{ alias }})
{%- endmacro %}

{% macro spark__json_string_array_rows(relation, column, alias) -%}
    lateral view explode(from_json({{ relation }}.{{ column }}, 'array<string>')) {{ alias }}_items as {{ alias }}
{%- endmacro %}
