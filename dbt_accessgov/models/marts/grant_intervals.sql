-- Every period a grant was held, from the grant feed, the service's ended grants and the
-- grants it holds now (int_grant_periods: one row per real period, and the source column).
-- revoked_at null = held now; granted_at null = held since before anything says. The person
-- behind the account, as the directory lists them now: macros/people.sql.
with numbered as (
    select
        *,
        row_number() over (
            partition by app_id, app_entitlement_id, app_user_id
            order by granted_at nulls first
        ) as interval_number
    from {{ ref('int_grant_periods') }}
)

select
    {{ dbt.hash(
        "app_id || '/' || app_entitlement_id || '/' || app_user_id || '/' || cast(interval_number as "
        ~ dbt.type_string() ~ ")"
    ) }} as interval_id,
    app_id,
    app_display_name,
    app_entitlement_id,
    app_entitlement_display_name,
    app_user_id,
    interval_number,
    granted_at,
    revoked_at,
    granted_ticket_id,
    revoked_ticket_id,
    revoked_at is null as is_current,
    source,
    user_id,
    user_display_name,
    user_email,
    user_status,
    user_directory_status,
    app_user_type,
    app_user_status
from ({{ with_people('(' ~ with_catalog_names('numbered') ~ ')') }}) as named
