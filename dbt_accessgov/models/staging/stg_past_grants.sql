-- One row per grant period that ended, per the service's history (past_grants, deduplicated
-- on its key: delivery is at-least-once and JSONL appends); none when the stream was not
-- loaded.
{%- if not raw_stream_exists('past_grants') %}
{{ no_rows([
    ('app_id', dbt.type_string()),
    ('app_entitlement_id', dbt.type_string()),
    ('app_user_id', dbt.type_string()),
    ('granted_at', type_timestamp_tz()),
    ('revoked_at', type_timestamp_tz()),
]) }}
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
