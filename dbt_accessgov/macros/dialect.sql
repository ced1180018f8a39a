{#
  Every point where the engines' SQL differs, each one dispatched macro (macros.yml): a model
  writes {{ timestamp_tz(...) }}, never the type; {{ json_text(...) }}, never an operator. The
  default is what DuckDB and PostgreSQL share; an engine that differs gets its own
  <engine>__ variant here (Spark: spark__). The other dialect points are dbt's own dispatched
  macros: adapter.quote() for identifiers (double quotes on DuckDB and PostgreSQL, backticks
  on Spark), dbt.hash(), dbt.type_string(), dbt.type_bigint(), dbt.current_timestamp().
#}

{% macro type_timestamp_tz() -%}
    {#- The type of an instant (the loaded timestamps are UTC instants). -#}
    {{ return(adapter.dispatch('type_timestamp_tz', 'accessgov')()) }}
{%- endmacro %}

{% macro default__type_timestamp_tz() -%}
    timestamp with time zone
{%- endmacro %}

{% macro spark__type_timestamp_tz() -%}
    {#- Spark's timestamp is an instant (TIMESTAMP_LTZ), shown in the session's time zone. -#}
    timestamp
{%- endmacro %}

{% macro timestamp_tz(expression) -%}
    cast({{ expression }} as {{ type_timestamp_tz() }})
{%- endmacro %}

{% macro epoch_microseconds(expression) -%}
    {#- An instant as whole microseconds since 1970 (bigint): how far apart two instants are. -#}
    {{ return(adapter.dispatch('epoch_microseconds', 'accessgov')(expression)) }}
{%- endmacro %}

{% macro default__epoch_microseconds(expression) -%}
    {#- PostgreSQL's epoch is an exact numeric (DuckDB's a double: its own variant). -#}
    cast(extract(epoch from {{ expression }}) * 1000000 as {{ dbt.type_bigint() }})
{%- endmacro %}

{% macro duckdb__epoch_microseconds(expression) -%}
    epoch_us({{ expression }})
{%- endmacro %}

{% macro spark__epoch_microseconds(expression) -%}
    unix_micros({{ expression }})
{%- endmacro %}

{% macro sorted_text_list(expression, separator) -%}
    {#- An aggregate: the group's texts in order, joined by `separator` (a SQL string); null when
        every one is null. -#}
    {{ return(adapter.dispatch('sorted_text_list', 'accessgov')(expression, separator)) }}
{%- endmacro %}

{% macro default__sorted_text_list(expression, separator) -%}
    string_agg({{ expression }}, {{ separator }} order by {{ expression }})
{%- endmacro %}

{% macro spark__sorted_text_list(expression, separator) -%}
    {#- collect_list skips nulls; a group of nulls only is null, as string_agg's. -#}
    case when count({{ expression }}) > 0
    then array_join(array_sort(collect_list({{ expression }})), {{ separator }}) end
{%- endmacro %}

{% macro json_text(column, key) -%}
    {{ return(adapter.dispatch('json_text', 'accessgov')(column, key)) }}
{%- endmacro %}

{% macro default__json_text(column, key) -%}
    {#- PostgreSQL jsonb, DuckDB JSON or STRUCT alike. -#}
    ({{ column }} ->> '{{ key }}')
{%- endmacro %}

{% macro spark__json_text(column, key) -%}
    {#- The object is JSON text on Spark (declare_jsonl_sources). -#}
    get_json_object({{ column }}, '$.{{ key }}')
{%- endmacro %}

{% macro declare_jsonl_sources() -%}
    {#- The on-run-start hook (dbt_project.yml): the source tables, where the engine needs them declared. -#}
    {{ return(adapter.dispatch('declare_jsonl_sources', 'accessgov')()) }}
{%- endmacro %}

{% macro default__declare_jsonl_sources() -%}
    {#- Nothing to declare: PostgreSQL has target-postgres's tables, DuckDB reads the files
        in place (sources.yml, external_location). -#}
{%- endmacro %}

{% macro spark__declare_jsonl_sources() -%}
    {#-
      Each table of the accessgov source as an external table over target-jsonl's file
      <accessgov_jsonl_dir>/<table>.jsonl, with the columns and types sources.yml gives (a
      field the service omits in every row is still a column, null). Declared anew on every
      run: the directory may have changed, and Spark caches a table's file listing. Dropping
      an external table leaves its file alone. A malformed line fails the query (FAILFAST)
      instead of becoming a row of nulls.
    -#}
    {%- if execute -%}
    {%- set directory = accessgov_jsonl_dir() | replace("\\", "\\\\") | replace("'", "\\'") -%}
    {%- for source in graph.sources.values() if source.package_name == 'accessgov' and source.source_name == 'accessgov' -%}
        {%- if loop.first -%}
            {%- do run_query('create database if not exists ' ~ adapter.quote(source.schema)) -%}
        {%- endif -%}
        {%- set table = adapter.quote(source.schema) ~ '.' ~ adapter.quote(source.identifier) -%}
        {%- set columns = [] -%}
        {%- for column in source.columns.values() -%}
            {%- do columns.append(adapter.quote(column.name) ~ ' ' ~ column.data_type) -%}
        {%- endfor -%}
        {%- do run_query('drop table if exists ' ~ table) -%}
        {%- do run_query(
            'create table ' ~ table ~ ' (' ~ columns | join(', ') ~ ') using json options ('
            ~ "path '" ~ directory ~ '/' ~ source.identifier ~ ".jsonl', mode 'FAILFAST')"
        ) -%}
    {%- endfor -%}
    {%- endif -%}
{%- endmacro %}
