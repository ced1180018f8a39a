-- One row per event of the service's system log (deduplicated on its uid: delivery is
-- at-least-once and JSONL appends), with what an auditor reads of it; none when the stream
-- was not loaded. The target is the event's first resource, the subject its second (a grant's
-- entitlement and account, an exclusion's entitlement and user); the tap's own reads are the
-- calls whose user agent is tap-accessgov's.
{%- if not raw_stream_exists('system_log') %}
{{ no_rows([
    ('event_uid', dbt.type_string()),
    ('occurred_at', type_timestamp_tz()),
    ('class_uid', dbt.type_bigint()),
    ('activity_id', dbt.type_bigint()),
    ('activity', dbt.type_string()),
    ('operation', dbt.type_string()),
    ('target_type', dbt.type_string()),
    ('target_uid', dbt.type_string()),
    ('subject_type', dbt.type_string()),
    ('subject_uid', dbt.type_string()),
    ('outcome', dbt.type_string()),
    ('src_ip', dbt.type_string()),
    ('actor_user_id', dbt.type_string()),
    ('actor_name', dbt.type_string()),
    ('actor_email', dbt.type_string()),
    ('user_agent', dbt.type_string()),
    ('is_this_tap', dbt.type_boolean()),
]) }}
{%- else %}
with loaded as (
    select
        {{ adapter.quote('uid') }} as event_uid,
        {{ timestamp_tz(adapter.quote('time')) }} as occurred_at,
        {{ adapter.quote('class_uid') }} as class_uid,
        {{ adapter.quote('activity_id') }} as activity_id,
        {{ json_path_text('event', ['activity_name']) }} as activity,
        {{ adapter.quote('api_operation') }} as operation,
        {{ json_path_text('event', ['resources', 0, 'type']) }} as target_type,
        {{ json_path_text('event', ['resources', 0, 'uid']) }} as target_uid,
        {{ json_path_text('event', ['resources', 1, 'type']) }} as subject_type,
        {{ json_path_text('event', ['resources', 1, 'uid']) }} as subject_uid,
        {{ json_path_text('event', ['status']) }} as outcome,
        {{ adapter.quote('src_endpoint_ip') }} as src_ip,
        {{ adapter.quote('actor_user_uid') }} as actor_user_id,
        {{ json_path_text('event', ['actor', 'user', 'name']) }} as actor_name,
        {{ adapter.quote('actor_user_email') }} as actor_email,
        {{ adapter.quote('http_user_agent') }} as user_agent,
        row_number() over (
            partition by {{ adapter.quote('uid') }} order by {{ adapter.quote('time') }}
        ) as copy_number
    from {{ source('accessgov', 'system_log') }}
)

select
    event_uid,
    occurred_at,
    class_uid,
    activity_id,
    activity,
    operation,
    target_type,
    target_uid,
    subject_type,
    subject_uid,
    outcome,
    src_ip,
    actor_user_id,
    actor_name,
    actor_email,
    user_agent,
    coalesce(user_agent like 'tap-accessgov/%', false) as is_this_tap
from loaded
where copy_number = 1
{%- endif %}
