-- One row per automation exclusion (full-table stream: JSONL repeats it every run). An empty
-- string is an unset field.
select distinct
    "appId" as app_id,
    "appEntitlementId" as app_entitlement_id,
    nullif("appUserId", '') as app_user_id,
    "userId" as user_id
from {{ source('accessgov', 'automation_exclusions') }}
