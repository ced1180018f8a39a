{{ config(indexes=[{"columns": ["ticket_ref"]}]) }}

-- Every way the grant feed's ticketId may name a task: its id or its numeric id (which one
-- the service sends is undocumented), one row each, so a grant event finds its task with an
-- equality join (an "id or numeric id" condition would be a nested loop).
select
    task_id as ticket_ref,
    task_id
from {{ ref('stg_tasks') }}
union all
select
    cast(numeric_id as {{ dbt.type_string() }}) as ticket_ref,
    task_id
from {{ ref('stg_tasks') }}
where numeric_id is not null
