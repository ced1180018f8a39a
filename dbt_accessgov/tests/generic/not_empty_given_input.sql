{% test not_empty_given_input(model, input, input_where=none) %}
{#-
  The model has rows whenever `input` (a ref or source it is built from) has rows matching
  `input_where`: fails on a model that builds empty and would pass every other test, e.g. when
  an identifier a dialect reads as a string constant makes a filter or a join match nothing.
  One row (both counts) when it fails. No WHERE without FROM: BigQuery has none.
-#}
select model_rows.row_count as model_rows, input_rows.row_count as input_rows
from (select count(*) as row_count from {{ model }}) as model_rows
cross join (
    select count(*) as row_count
    from {{ input }}
    {%- if input_where %}
    where {{ input_where }}
    {%- endif %}
) as input_rows
where model_rows.row_count = 0 and input_rows.row_count > 0
{% endtest %}
