{#
  Full-table streams (automation_exclusions, users, and any other the tap re-reads whole each
  run): every row carries the snapshotAt of the run that read it, and full_table_snapshots
  lists the snapshots a run read in full. A run that failed half-way left rows of its own
  snapshot but no line in full_table_snapshots, so reading the latest *complete* snapshot
  shows exactly what the service held then: nothing partial, nothing removed since.
#}

{% macro complete_snapshots(stream) -%}
    {#- The instants of the complete snapshots of `stream`, one row each (JSONL may repeat). -#}
    select distinct {{ timestamp_tz(adapter.quote('snapshotAt')) }} as snapshot_at
    from {{ source('accessgov', 'full_table_snapshots') }}
    where {{ adapter.quote('stream') }} = '{{ stream }}'
{%- endmacro %}

{% macro latest_complete_snapshot(stream) -%}
    {#-
      The loaded rows of `stream` (a source table of a full-table stream) that belong to its
      latest complete snapshot: the service's current set. In a staging model:
          from ({{ latest_complete_snapshot('users') }}) as users
    -#}
    select loaded.*
    from {{ source('accessgov', stream) }} as loaded
    where {{ timestamp_tz('loaded.' ~ adapter.quote('snapshotAt')) }} = (
        select max(snapshots.snapshot_at)
        from ({{ complete_snapshots(stream) }}) as snapshots
    )
{%- endmacro %}

{% macro current_rows(stream, key) -%}
    {#-
      The latest complete snapshot, one row per `key`: the most recently updated copy
      (macros.yml). In a staging model:
          from ({{ current_rows('apps', key=['id']) }}) as apps
    -#}
    select *
    from (
        select
            in_snapshot.*,
            row_number() over (
                partition by
                {%- for column in key %} in_snapshot.{{ adapter.quote(column) }}{{ "," if not loop.last }}{% endfor %}
                order by {{ timestamp_tz('in_snapshot.' ~ adapter.quote('updatedAt')) }} desc nulls last
            ) as copy_rank
        from ({{ latest_complete_snapshot(stream) }}) as in_snapshot
    ) as copies
    where copy_rank = 1
{%- endmacro %}

{% macro stream_was_read(stream) -%}
    {#-
      Whether any run has read `stream` in full (a boolean expression): a full-table stream
      whose operation the service refuses, or that no run selected, has no complete snapshot,
      and its empty staging model then says nothing (macros.yml). In a mart:
          where {{ stream_was_read('entitlement_owners') }}
    -#}
    ((select count(*) from ({{ complete_snapshots(stream) }}) as read_snapshots) > 0)
{%- endmacro %}
