{% test not_null_columns(model, columns) %}
{#-
  None of `columns` holds a NULL: dbt's not_null for several columns in one query, one node
  (a node costs dbt some 20 ms of Python on every build, however small its query). One row
  per column that holds NULLs, naming it, with how many rows hold one. No WHERE without FROM:
  BigQuery has none; SUM over no rows is NULL, which compares as no failure.
-#}
with null_rows as (
    select
    {%- for column in columns %}
        sum(case when {{ column }} is null then 1 else 0 end) as {{ column }}
        {{- "," if not loop.last }}
    {%- endfor %}
    from {{ model }}
)
{%- for column in columns %}
select '{{ column }}' as column_name, {{ column }} as null_rows from null_rows where {{ column }} > 0
{%- if not loop.last %}
union all
{%- endif %}
{%- endfor %}
{% endtest %}
