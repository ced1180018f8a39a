"""The models' portability check: what the project runs on (DuckDB, PostgreSQL, Spark) is not
all its users run, so every compiled model must at least parse as Snowflake and BigQuery SQL,
and the constructs one of those lacks, or reads otherwise, fail here rather than in a user's
warehouse:

- a named ``WINDOW`` clause: Snowflake has none (write the window in each ``over (...)``);
- a double-quoted identifier: an identifier in Snowflake and PostgreSQL, a string constant in
  Spark and BigQuery, where a filter on it silently matches nothing (identifiers go through
  ``adapter.quote``, which writes each engine's quoting);
- ``md5()`` written out: BigQuery's returns bytes, not hex text (``dbt.hash`` dispatches).

The compiled SQL is DuckDB's (no JVM, seconds): its identifier quoting is Snowflake's, so it is
parsed as written; Spark's compiled SQL, quoted as BigQuery quotes, is parsed as BigQuery by the
Spark test of tests/test_models.py. Parsing is what sqlglot checks: a function one warehouse
lacks still parses, which is why each dialect point is a dispatched macro (transform/README.md).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from tests.conftest import ROOT, meltano

PACKAGE = ROOT / "dbt_accessgov"  # the models, macros and tests (transform/ installs it)
# One worker compiles the package once (compiled_with_probes) for every test here: spread
# over the workers, each compiled it again.
pytestmark = pytest.mark.xdist_group("portability")
WAREHOUSES = ("snowflake", "bigquery")
_JINJA = re.compile(r"\{#.*?#\}|\{\{.*?\}\}|\{%.*?%\}", re.S)
_SQL_COMMENT_OR_STRING = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'", re.S)


def sql_text(source: str) -> str:
    """A model's, macro's or test's SQL as written: without Jinja, comments and string literals."""
    return _SQL_COMMENT_OR_STRING.sub("''", _JINJA.sub(" ", source))


def source_problems(source: str) -> list[str]:
    """What a model, macro or test file writes that some warehouse reads otherwise: in its SQL,
    and in the SQL text it hands a macro (``timestamp_tz('loaded."snapshotAt"')``)."""
    text = sql_text(source)
    handed = [
        name
        for block in _JINJA.findall(source)
        for literal in re.findall(r"'([^'\n]*)'", block)
        for name in re.findall(r'"(\w+)"', literal)
    ]
    problems = [
        f'double-quoted identifier "{name}": a string constant in Spark and BigQuery; '
        f"write {{{{ adapter.quote('{name}') }}}}"
        for name in [*re.findall(r'"([^"]*)"', text), *handed]
    ]
    if re.search(r"\bmd5\s*\(", text, flags=re.I):
        problems.append("md5(): BigQuery's returns bytes; write {{ dbt.hash(...) }}")
    return problems


def compiled_problems(sql: str, engine: str, warehouses: tuple[str, ...]) -> list[str]:
    """What a model compiled for ``engine`` uses that a warehouse lacks, and each warehouse in
    which it does not parse."""
    problems = []
    for select in sqlglot.parse_one(sql, read=engine).find_all(exp.Select):
        problems += [
            f"named WINDOW clause {window.alias_or_name}: Snowflake has none; "
            "write the window in each over (...)"
            for window in select.args.get("windows") or []
        ]
    for warehouse in warehouses:
        try:
            sqlglot.parse(sql, read=warehouse)
        except sqlglot.errors.ParseError as error:
            problems.append(f"does not parse as {warehouse}: {str(error).splitlines()[0]}")
    return problems


def compiled_models(target: Path) -> dict[str, str]:
    """The compiled SQL of every model under a dbt target path, by path within the project."""
    root = target / "compiled" / "accessgov"
    return {
        path.relative_to(root).as_posix(): path.read_text()
        for path in sorted((root / "models").rglob("*.sql"))
    }


def portability_problems(project: Path, target: Path, engine: str) -> dict[str, list[str]]:
    """Every problem of the project's models, macros and tests (source) and of its models as
    compiled for ``engine`` under ``target``, by file; none is an empty dict."""
    found: dict[str, list[str]] = {}
    for folder in ("models", "macros", "tests"):
        for path in sorted((project / folder).rglob("*.sql")):
            if problems := source_problems(path.read_text()):
                found[path.relative_to(project).as_posix()] = problems
    compiled = compiled_models(target)
    assert compiled, f"no compiled model under {target}"
    for name, sql in compiled.items():
        if problems := compiled_problems(sql, engine, WAREHOUSES):
            found.setdefault(name, []).extend(problems)
    return found


PROBES = {
    # what grant_intervals wrote before this check
    "probe_named_window.sql": """
        select lead(event_at) over grant_order as next_event_at
        from {{ ref('int_grant_lifecycle_events') }}
        window grant_order as (partition by app_id order by event_at)
    """,
    # what automation_exclusion_history wrote before this check
    "probe_double_quoted.sql": """
        select "appId" as app_id, loaded."snapshotAt" as snapshot_at,
            {{ timestamp_tz('loaded."userId"') }} as handed_to_a_macro
        from {{ source('accessgov', 'automation_exclusions') }} as loaded
        where "appId" <> 'a "quoted" literal, which is fine'
    """,
    "probe_md5.sql": """
        select md5(app_id) as app_hash from {{ ref('stg_apps') }}
    """,
}


@pytest.fixture(scope="module")
def compiled_with_probes(meltano_plugins: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the models' package with the probe models, compiled on DuckDB by the
    dbt-duckdb utility (the copy its project); the package's directory."""
    work = tmp_path_factory.mktemp("portability")
    project = work / "dbt_accessgov"
    shutil.copytree(PACKAGE, project, ignore=shutil.ignore_patterns("target", "logs"))
    for name, sql in PROBES.items():
        (project / "models" / name).write_text(sql)
    # A history model compiles to its full SQL only where its stream was loaded (an absent
    # raw table gives an empty select): an empty file of each stream is enough to compile.
    (work / "jsonl").mkdir()
    for model in (project / "models" / "history").glob("history_*.sql"):
        (work / "jsonl" / f"{model.stem.removeprefix('history_')}.jsonl").touch()
    env = {
        **os.environ,
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "MELTANO_DATABASE_URI": f"sqlite:///{work / 'meltano.db'}",
        # the dbt-duckdb utility's settings (meltano.yml)
        "DBT_DUCKDB_PROJECT_DIR": str(project),
        "DBT_DUCKDB_TARGET_PATH": str(work / "target"),
        "DBT_DUCKDB_LOG_PATH": str(work / "logs"),
        "DBT_DUCKDB_DATABASE_PATH": str(work / "compile.duckdb"),
        "DBT_DUCKDB_JSONL_DIR": str(work / "jsonl"),
    }
    meltano("invoke", "dbt-duckdb", "compile", env=env)
    return project


def test_every_model_parses_as_snowflake_and_bigquery_sql(compiled_with_probes: Path):
    problems = portability_problems(
        compiled_with_probes, compiled_with_probes.parent / "target", "duckdb"
    )
    theirs = {name: found for name, found in problems.items() if "probe_" not in name}
    assert theirs == {}
    history = compiled_models(compiled_with_probes.parent / "target")[
        "models/history/history_automation_exclusions.sql"
    ]
    assert "'removed' as change_type" in history, "the history's full SQL was checked"
    assert len(compiled_models(compiled_with_probes.parent / "target")) >= 13 + len(PROBES)


def test_the_check_fails_on_a_named_window_clause(compiled_with_probes: Path):
    problems = portability_problems(
        compiled_with_probes, compiled_with_probes.parent / "target", "duckdb"
    )
    found = problems["models/probe_named_window.sql"]
    assert any(p.startswith("named WINDOW clause grant_order") for p in found), found
    assert any(p.startswith("does not parse as snowflake") for p in found), found


def test_the_check_fails_on_a_double_quoted_identifier(compiled_with_probes: Path):
    problems = portability_problems(
        compiled_with_probes, compiled_with_probes.parent / "target", "duckdb"
    )
    found = problems["models/probe_double_quoted.sql"]
    assert sorted(p.split(":")[0] for p in found) == [
        'double-quoted identifier "appId"',
        'double-quoted identifier "appId"',
        'double-quoted identifier "snapshotAt"',
        'double-quoted identifier "userId"',
    ]


def test_the_check_fails_on_md5_written_out(compiled_with_probes: Path):
    problems = portability_problems(
        compiled_with_probes, compiled_with_probes.parent / "target", "duckdb"
    )
    assert problems["models/probe_md5.sql"] == [
        "md5(): BigQuery's returns bytes; write {{ dbt.hash(...) }}"
    ]
