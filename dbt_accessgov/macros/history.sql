{#
  History without a copy per run. Every run loads a full copy of each full-table stream
  (snapshots.sql); the history of a stream is kept instead by its history model
  (models/history/history_<stream>.sql), an incremental, append-only log of what changed
  between consecutive complete snapshots, and prune_raw_snapshots lets the raw copies the
  history holds go. docs/decisions.md, "History: a change log per stream", says why a change
  log rather than dbt snapshots.

  Registering a full-table stream is one line, the model file:
      {{ full_table_history('grants') }}
  The columns kept are those sources.yml declares for the stream (but snapshotAt), as text.
#}

{% macro full_table_history(stream) -%}
    {#-
      The body of history_<stream>: per complete snapshot not yet in the table, in order, a
      row 'added' for each distinct row (the stream's declared columns) that the previous
      complete snapshot lacked, 'removed' for each one it had and this one lacks, and one
      'snapshot' row, the marker that this snapshot was read (its rows' columns are null).
      The previous snapshot of the first new one is what the log itself says was present; so
      the raw copies before it are not needed (prune_raw_snapshots). Several runs loaded
      between two builds are each read, in order; a raw table not loaded yet gives no rows.
      Never rebuilt from scratch (full_refresh=false): the copies it replaced are gone.
      A column declared after the log began (a field a newer release reads) is added to it
      (on_schema_change) and read as null from the rows logged before: a row's hash takes
      an unset column as empty text, so a row whose new field is unset keeps its hash, and
      one whose new field is set is logged removed and added again once, at the first
      snapshot read with the column.
    -#}
    {{ config(
        materialized='incremental',
        incremental_strategy='append',
        on_schema_change='append_new_columns',
        full_refresh=false,
        meta={'full_table_stream': stream},
    ) }}
    {%- set raw = source('accessgov', stream) -%}
    {%- set columns = history_columns(stream) -%}
    {%- if not raw_stream_exists(stream) %}
    {%- set typed = [] -%}
    {%- for column in columns -%}
        {%- do typed.append((snake_case(column), dbt.type_string())) -%}
    {%- endfor %}
{{ no_rows(typed + [
    ('row_hash', dbt.type_string()),
    ('change_type', dbt.type_string()),
    ('snapshot_at', type_timestamp_tz()),
]) }}
    {%- else %}
with captured as (
    {%- if is_incremental() %}
    select max(snapshot_at) as snapshot_at from {{ this }} where change_type = 'snapshot'
    {%- else %}
    select cast(null as {{ type_timestamp_tz() }}) as snapshot_at
    {%- endif %}
),

new_snapshots as (
    select
        complete.snapshot_at,
        row_number() over (order by complete.snapshot_at) as snapshot_number
    from ({{ complete_snapshots(stream) }}) as complete
    where not exists (
        select 1 from captured where captured.snapshot_at >= complete.snapshot_at
    )
),

present as (
    {%- if is_incremental() %}
    -- number 0: the rows present at the last captured snapshot, the latest change of each
    {%- set logged_columns = history_logged_columns() %}
    select
        {%- for column in columns %}
        {%- if snake_case(column) in logged_columns %}
        logged.{{ snake_case(column) }},
        {%- else %}
        cast(null as {{ dbt.type_string() }}) as {{ snake_case(column) }},  -- declared since
        {%- endif %}
        {%- endfor %}
        logged.row_hash,
        0 as snapshot_number
    from (
        select
            logged_rows.*,
            row_number() over (
                partition by logged_rows.row_hash order by logged_rows.snapshot_at desc
            ) as recency
        from {{ this }} as logged_rows
        where logged_rows.change_type in ('added', 'removed')
    ) as logged
    where logged.recency = 1 and logged.change_type = 'added'
    union all
    {%- endif %}
    select distinct
        {%- for column in columns %}
        rows_read.{{ snake_case(column) }},
        {%- endfor %}
        {{ dbt.hash(dbt.concat(columns_hashed(columns, 'rows_read'))) }} as row_hash,
        rows_read.snapshot_number
    from (
        select
            {%- for column in columns %}
            cast(loaded.{{ adapter.quote(column) }} as {{ dbt.type_string() }}) as {{ snake_case(column) }},
            {%- endfor %}
            new_snapshots.snapshot_number
        from {{ raw }} as loaded
        inner join new_snapshots
            on {{ timestamp_tz('loaded.' ~ adapter.quote('snapshotAt')) }} = new_snapshots.snapshot_at
    ) as rows_read
),

neighbours as (
    select
        present.*,
        lag(snapshot_number) over (partition by row_hash order by snapshot_number) as previous_number,
        lead(snapshot_number) over (partition by row_hash order by snapshot_number) as next_number
    from present
)

{{ history_changes(columns, 'added', 0, 'previous_number', '< neighbours.snapshot_number - 1') }}

union all

{{ history_changes(columns, 'removed', 1, 'next_number', '> neighbours.snapshot_number + 1') }}

union all

select
    {%- for column in columns %}
    cast(null as {{ dbt.type_string() }}) as {{ snake_case(column) }},
    {%- endfor %}
    cast(null as {{ dbt.type_string() }}) as row_hash,
    'snapshot' as change_type,
    new_snapshots.snapshot_at
from new_snapshots
    {%- endif %}
{%- endmacro %}

{% macro history_changes(columns, change_type, offset, neighbour, apart) -%}
    {#-
      The rows of full_table_history's `neighbours` that changed (`change_type`) at the new
      snapshot `offset` after their own: those whose `neighbour` snapshot number (the
      previous or the next one holding the row) is none, or not the adjacent one (`apart`).
    -#}
select
    {%- for column in columns %}
    neighbours.{{ snake_case(column) }},
    {%- endfor %}
    neighbours.row_hash,
    '{{ change_type }}' as change_type,
    new_snapshots.snapshot_at
from neighbours
inner join new_snapshots on new_snapshots.snapshot_number = neighbours.snapshot_number + {{ offset }}
where neighbours.{{ neighbour }} is null
   or neighbours.{{ neighbour }} {{ apart }}
{%- endmacro %}

{% macro history_columns(stream) -%}
    {#- The columns sources.yml declares for `stream`, but snapshotAt (empty while parsing). -#}
    {%- set found = [] -%}
    {%- if execute -%}
        {%- for source in graph.sources.values()
            if source.package_name == 'accessgov' and source.source_name == 'accessgov' and source.name == stream -%}
            {%- for column in source.columns.values() if column.name != 'snapshotAt' -%}
                {%- do found.append(column.name) -%}
            {%- endfor -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(found) }}
{%- endmacro %}

{% macro history_logged_columns() -%}
    {#- The columns the history model's table has (lowercase names): those declared when it
        began, and those added since (none while parsing). -#}
    {%- set found = [] -%}
    {%- if execute -%}
        {%- for column in adapter.get_columns_in_relation(this) -%}
            {%- do found.append(column.name | lower) -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(found) }}
{%- endmacro %}

{% macro snake_case(name) -%}
    {#- appEntitlementId -> app_entitlement_id: the models' column names. -#}
    {{- modules.re.sub('([a-z0-9])([A-Z])', '\\1_\\2', name) | lower -}}
{%- endmacro %}

{% macro columns_hashed(columns, relation) -%}
    {#- One hash per column (empty for null), so no value can shift into its neighbour. -#}
    {%- set parts = [] -%}
    {%- for column in columns -%}
        {%- do parts.append("coalesce(" ~ dbt.hash(relation ~ '.' ~ snake_case(column)) ~ ", '')") -%}
    {%- endfor -%}
    {{ return(parts) }}
{%- endmacro %}

{% macro raw_stream_exists(stream) -%}
    {#- Whether the loader has written `stream` yet (dispatched; true while parsing). -#}
    {%- if not execute -%}{{ return(true) }}{%- endif -%}
    {{ return(adapter.dispatch('raw_stream_exists', 'accessgov')(stream)) }}
{%- endmacro %}

{% macro default__raw_stream_exists(stream) -%}
    {#- target-postgres's table. -#}
    {%- set raw = source('accessgov', stream) -%}
    {{ return(adapter.get_relation(database=raw.database, schema=raw.schema, identifier=raw.identifier) is not none) }}
{%- endmacro %}

{% macro duckdb__raw_stream_exists(stream) -%}
    {#- target-jsonl's file, read in place (sources.yml). -#}
    {%- set found = run_query("select count(*) from glob('" ~ jsonl_file(stream) ~ "')") -%}
    {{ return(found.columns[0].values()[0] > 0) }}
{%- endmacro %}

{% macro spark__raw_stream_exists(stream) -%}
    {#- declare_jsonl_sources declares every source's table, whether or not its file exists. -#}
    {{ return(true) }}
{%- endmacro %}

{% macro no_rows(columns) -%}
    {#- A select of no rows with these (name, type) columns: a model over a stream the loader
        has not written (raw_stream_exists), with the columns and types of one that has. -#}
select
    {%- for name, type in columns %}
    cast(null as {{ type }}) as {{ name }}{{ ',' if not loop.last }}
    {%- endfor %}
from (select 1 as nothing) as not_loaded  -- BigQuery has no WHERE without a FROM
where 1 = 0
{%- endmacro %}

{% macro jsonl_file(stream) -%}
    {#- Where target-jsonl writes `stream`: as sources.yml's external_location reads it. -#}
    {{- accessgov_jsonl_dir() ~ '/' ~ source('accessgov', stream).identifier ~ '.jsonl' -}}
{%- endmacro %}

{% macro prune_raw_snapshots(dry_run=false) -%}
    {#-
      dbt run-operation prune_raw_snapshots [--args '{dry_run: true}'], after the build: for
      every full-table stream with a history model, deletes the loaded rows of the snapshots
      before the latest one that model has read (and their full_table_snapshots rows). Kept:
      that snapshot (the latest complete one when the build followed the load), everything
      after it (a newer complete snapshot the history has not read yet, a run in progress)
      and rows without snapshotAt. Deleted with them: partial rows of runs that failed before
      it. A stream whose history model is not built or has read nothing is left alone.
      Runs must not overlap the prune (the Meltano job and the Dagster job run it after the
      build, one run at a time).
    -#}
    {%- if not execute -%}{{ return('') }}{%- endif -%}
    {%- for node in graph.nodes.values()
        if node.resource_type == 'model' and node.package_name == 'accessgov'
        and node.config.meta.get('full_table_stream') -%}
        {%- set stream = node.config.meta['full_table_stream'] -%}
        {%- set history = adapter.get_relation(database=node.database, schema=node.schema, identifier=node.alias) -%}
        {%- set read = none -%}
        {%- if history is not none -%}
            {%- set read = run_query(
                "select max(snapshot_at) from " ~ history ~ " where change_type = 'snapshot'"
            ).columns[0].values()[0] -%}
        {%- endif -%}
        {%- if read is none or not raw_stream_exists(stream) -%}
            {{ log(stream ~ ": nothing to prune (no snapshot read by " ~ node.name ~ " yet)", info=true) }}
        {%- else -%}
            {%- set kept_from = timestamp_tz("'" ~ read.isoformat() ~ "'") -%}
            {%- set count = run_query(
                "select count(*) from " ~ source('accessgov', stream) ~ " where "
                ~ timestamp_tz(adapter.quote('snapshotAt')) ~ " < " ~ kept_from
            ).columns[0].values()[0] -%}
            {%- set older = timestamp_tz(raw_field('snapshotAt')) ~ ' < ' ~ kept_from -%}
            {{ log(stream ~ ": " ~ ("would delete " if dry_run else "deleting ") ~ count ~ " rows of snapshots before " ~ read.isoformat(), info=true) }}
            {%- if count > 0 and not dry_run -%}
                {%- do delete_raw_rows(stream, older) -%}
                {%- do delete_raw_rows(
                    'full_table_snapshots',
                    raw_field('stream') ~ " = '" ~ stream ~ "' and " ~ older
                ) -%}
            {%- endif -%}
        {%- endif -%}
    {%- endfor -%}
{%- endmacro %}

{% macro raw_field(name) -%}
    {#- A loaded field in delete_raw_rows's condition (dispatched). -#}
    {{ return(adapter.dispatch('raw_field', 'accessgov')(name)) }}
{%- endmacro %}

{% macro default__raw_field(name) -%}
    {{ adapter.quote(name) }}
{%- endmacro %}

{% macro duckdb__raw_field(name) -%}
    {#- A field of one line of target-jsonl's file, read as JSON text (delete_raw_rows). -#}
    (json ->> '{{ name }}')
{%- endmacro %}

{% macro delete_raw_rows(stream, condition) -%}
    {#- Deletes the loaded rows of `stream` where `condition` holds (dispatched). -#}
    {{ return(adapter.dispatch('delete_raw_rows', 'accessgov')(stream, condition)) }}
{%- endmacro %}

{% macro default__delete_raw_rows(stream, condition) -%}
    {#- target-postgres's table. run-operation commits nothing itself, so the statement does. -#}
    {%- do run_query("delete from " ~ source('accessgov', stream) ~ " where " ~ condition) -%}
    {%- do run_query("commit") -%}
{%- endmacro %}

{% macro duckdb__delete_raw_rows(stream, condition) -%}
    {#-
      target-jsonl's file, rewritten with the other lines, each exactly as it was (read as
      JSON text, written back unquoted; a JSON line holds no raw control character, so the
      \x01 delimiter never occurs). DuckDB writes the new file beside the old one and then
      renames it, so an interrupted prune leaves the old file whole.
    -#}
    {%- set path = jsonl_file(stream) -%}
    {%- do run_query(
        "create or replace temporary table accessgov_kept_lines as select json from "
        ~ "read_ndjson_objects('" ~ path ~ "') where not coalesce(" ~ condition ~ ", false)"
    ) -%}
    {%- do run_query(
        "copy accessgov_kept_lines to '" ~ path ~ "' "
        ~ "(format csv, header false, quote '', escape '', delimiter '\x01', use_tmp_file true)"
    ) -%}
    {%- do run_query("drop table accessgov_kept_lines") -%}
{%- endmacro %}

{% macro spark__delete_raw_rows(stream, condition) -%}
    {%- do exceptions.raise_compiler_error(
        "prune_raw_snapshots: on Spark the loaded rows are target-jsonl's files, which Spark "
        ~ "SQL cannot rewrite in place; the raw copies were left as they are "
        ~ "(transform/README.md, History and pruning)"
    ) -%}
{%- endmacro %}
