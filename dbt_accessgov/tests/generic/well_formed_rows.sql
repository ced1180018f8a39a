{% test well_formed_rows(model, keys=none, not_null=none, accepted_values=none) %}
{#-
  A model's rows hold its contract: each of `keys` (lists of columns) is held by one row at
  most (NULLs compare equal), none of `not_null` holds a NULL, and each column of
  `accepted_values` holds only its listed values (or NULL). One test, one query, one node a
  model, where dbt's unique, not_null and accepted_values are a node a column each (a node
  costs dbt some 20 ms of Python on every build, and a query on a cloud warehouse, however
  small). One row per check that fails: the check, the columns it names, and how many rows
  fail it (for a key, how many of its values more than one row holds; group by the key
  with having count(*) > 1 to list them). No WHERE without FROM: BigQuery has none; SUM over
  no rows is NULL, which compares as no failure.
-#}
{%- set keys = keys or [] -%}
{%- set not_null = not_null or [] -%}
{%- set accepted_values = accepted_values or {} -%}
{%- if not (keys or not_null or accepted_values) -%}
  {{ exceptions.raise_compiler_error("well_formed_rows on " ~ model ~ ": name keys, not_null or accepted_values") }}
{%- endif -%}
{%- for key in keys if key is string -%}
  {{ exceptions.raise_compiler_error("well_formed_rows on " ~ model ~ ": each of keys is a list of columns, not " ~ key) }}
{%- endfor -%}
{%- set failures = [] -%}
with
{%- for key in keys %}
duplicate_key_{{ loop.index }} as (
    select count(*) as failing_rows
    from (
        select 1 as held_twice
        from {{ model }}
        group by {{ key | join(', ') }}
        having count(*) > 1
    ) as duplicates
){{ "," if not loop.last or not_null or accepted_values }}
{%- do failures.append(("duplicate key", key | join(", "), "duplicate_key_" ~ loop.index, "failing_rows")) %}
{%- endfor %}
{%- if not_null or accepted_values %}
column_counts as (
    select
    {%- for column in not_null %}
        sum(case when {{ column }} is null then 1 else 0 end) as null_{{ loop.index }}
        {{- "," if not loop.last or accepted_values }}
        {%- do failures.append(("null", column, "column_counts", "null_" ~ loop.index)) %}
    {%- endfor %}
    {%- for column, values in accepted_values.items() %}
        sum(case when {{ column }} not in (
            {%- for value in values -%}
            '{{ dbt.escape_single_quotes(value) }}'{{ ", " if not loop.last }}
            {%- endfor -%}
        ) then 1 else 0 end) as other_{{ loop.index }}
        {{- "," if not loop.last }}
        {%- do failures.append(("value not accepted", column, "column_counts", "other_" ~ loop.index)) %}
    {%- endfor %}
    from {{ model }}
)
{%- endif %}
{%- for check, columns, counts, count in failures %}
select '{{ check }}' as failed_check, '{{ columns }}' as column_names, {{ count }} as failing_rows
from {{ counts }}
where {{ count }} > 0
{%- if not loop.last %}
union all
{%- endif %}
{%- endfor %}
{% endtest %}
