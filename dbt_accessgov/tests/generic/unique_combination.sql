{% test unique_combination(model, columns) %}
{#- No two rows share these columns (a composite key); NULLs compare equal. -#}
select {{ columns | join(', ') }}, count(*) as rows_with_this_key
from {{ model }}
group by {{ columns | join(', ') }}
having count(*) > 1
{% endtest %}
