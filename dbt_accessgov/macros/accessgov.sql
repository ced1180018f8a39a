{# The as-of question. The engines' differences are in dialect.sql. #}

{% macro accessgov_jsonl_dir() -%}
    {#- Where target-jsonl wrote the streams (DuckDB, Spark): the var, else ACCESSGOV_JSONL_DIR, else output. -#}
    {{- return(var('accessgov_jsonl_dir', env_var('ACCESSGOV_JSONL_DIR', 'output'))) -}}
{%- endmacro %}

{% macro as_of_instant(at=none) -%}
    {#- The instant `at` (text), else the var as_of, else ACCESSGOV_AS_OF, else now. -#}
    {%- set value = at if at is not none else var('as_of', none) -%}
    {%- if value is none -%}{%- set value = env_var('ACCESSGOV_AS_OF', '') -%}{%- endif -%}
    {%- if value is none or value == '' -%}
        {{ dbt.current_timestamp() }}
    {%- else -%}
        {{ timestamp_tz("'" ~ value ~ "'") }}
    {%- endif -%}
{%- endmacro %}

{% macro access_as_of(at=none) -%}
    {#-
      The grants held at one instant, for use in your own models:
          select * from ({{ access_as_of('2025-03-01T00:00:00Z') }}) as held
      At `at` every event dated at or before it has applied: an interval revoked exactly then
      no longer holds, one granted exactly then does. Complete only when the extraction's
      start_date precedes the tenant's first grant (see docs/models.md).
    -#}
    select
        app_id,
        app_display_name,
        app_entitlement_id,
        app_entitlement_display_name,
        app_user_id,
        granted_at,
        granted_ticket_id,
        user_id,
        user_display_name,
        user_email,
        user_status,
        user_directory_status,
        {{ as_of_instant(at) }} as as_of
    from {{ ref('grant_intervals') }}
    where (granted_at is null or granted_at <= {{ as_of_instant(at) }})
      and (revoked_at is null or revoked_at > {{ as_of_instant(at) }})
{%- endmacro %}

{% macro stale_sync_hours() -%}
    {#- How many hours after its last sync a connector's data is stale: the var stale_sync_hours,
        else ACCESSGOV_STALE_SYNC_HOURS, else 24 (a number: anything else fails the build). -#}
    {%- set value = var('stale_sync_hours', env_var('ACCESSGOV_STALE_SYNC_HOURS', '24')) | string -%}
    {%- if not modules.re.fullmatch('[0-9]+([.][0-9]+)?', value.strip()) -%}
        {%- do exceptions.raise_compiler_error("stale_sync_hours: a number of hours, not '" ~ value ~ "'") -%}
    {%- endif -%}
    {{- return(value.strip()) -}}
{%- endmacro %}
