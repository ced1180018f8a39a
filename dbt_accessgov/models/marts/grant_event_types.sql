-- How many distinct events of each type the feed holds, and what each type does to a grant:
-- unspecified and unknown (newer) types are counted here, never dropped silently.
select
    event_type,
    lifecycle_action,
    count(*) as events,
    sum(times_loaded) as rows_loaded
from {{ ref('stg_grant_events') }}
group by event_type, lifecycle_action
