-- One row per grant period that ended, per the service's history (past_grants, deduplicated
-- on its key: delivery is at-least-once and JSONL appends); none when the stream was not
-- loaded.
{%- if not raw_stream_exists('past_grants') %}
select
    cast(null as {{ dbt.type_string() }}) as app_id,
    cast(null as {{ dbt.type_string() }}) as app_entitlement_id,
    cast(null as {{ dbt.type_string() }}) as app_user_id,
    cast(null as {{ type_timestamp_tz() }}) as granted_at,
    cast(null as {{ type_timestamp_tz() }}) as revoked_at
from (select 1 as nothing) as not_loaded  -- BigQuery has no WHERE without a FROM
where 1 = 0
{%- else %}
with loaded as (
    select
        {{ adapter.quote('appId') }} as app_id,
        {{ adapter.quote('appEntitlementId') }} as app_entitlement_id,
        {{ adapter.quote('appUserId') }} as app_user_id,
        {{ timestamp_tz(adapter.quote('grantedAt')) }} as granted_at,
        {{ timestamp_tz(adapter.quote('revokedAt')) }} as revoked_at
    from {{ source('accessgov', 'past_grants') }}
)

select app_id, app_entitlement_id, app_user_id, granted_at, max(revoked_at) as revoked_at
from loaded
group by app_id, app_entitlement_id, app_user_id, granted_at
{%- endif %}
