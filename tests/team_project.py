"""The models as a dbt package (dbt_accessgov/): a team's own dbt project lists it in its
packages.yml, says in its vars where the tap's streams were loaded, runs ``dbt deps`` and
``dbt build`` (the README's lines), and gets the marts this repository's own build (through
Meltano) makes from the same load: on DuckDB over target-jsonl's files, the package from a git
repository at a release tag (``subdirectory``), and on PostgreSQL over target-postgres's
tables, the package from a local path.

The team's project is its own dbt_project.yml, packages.yml and profiles.yml, and one model of
its own checked with the package's generic test (``PROBES``), in a directory of its own; its
dbt runs with none of this repository's environment (no DBT_* or ACCESSGOV_* variable), so
the vars alone say where the data is.

Each engine's scenario runs it right after its first load and build (tests/test_evidence_models.py),
over the same load, rather than loading a tenant of its own for it."""

from __future__ import annotations

import os
import subprocess
import typing as t
from pathlib import Path

import yaml

import tasks
from emulator.timefmt import format_ns
from tests.conftest import ROOT, libpq_env
from tests.groups import require_group
from tests.readme import REPOSITORY, committed_copy, readme_commands, readme_yaml

PACKAGE = ROOT / "dbt_accessgov"
# The test that runs the README's lines for a dbt project of a team's own (tests/readme.py)
README_RUNNER = (
    "tests/test_evidence_models.py::"
    "test_access_history_evidence_and_removals_on_duckdb_equal_the_emulators_truth"
)
MARTS = sorted(path.stem for path in (PACKAGE / "models" / "marts").glob("*.sql"))


def team_project(
    directory: Path,
    output: dict[str, t.Any],
    variables: dict[str, str],
    package: dict[str, str] | None = None,
) -> Path:
    """A dbt project of a team's own that installs the package (``package``: its packages.yml
    entry, by default this checkout's local path)."""
    directory.mkdir()
    project = {
        "name": "analytics",
        "version": "1.0.0",
        "config-version": 2,
        "profile": "analytics",
        "vars": variables,
    }
    (directory / "dbt_project.yml").write_text(yaml.safe_dump(project))
    packages = {"packages": [package or {"local": str(PACKAGE)}]}
    (directory / "packages.yml").write_text(yaml.safe_dump(packages))
    profiles = {"analytics": {"target": "main", "outputs": {"main": output}}}
    (directory / "profiles.yml").write_text(yaml.safe_dump(profiles))
    (directory / "models").mkdir()
    (directory / "models" / "probe_rows.sql").write_text(PROBE_ROWS)
    (directory / "models" / "probe_rows.yml").write_text(yaml.safe_dump(PROBE_TESTS))
    return directory


# A model of the team's own, checked with the package's generic test (named by its package,
# as a team names it), whose rows break each of its checks once: a key two rows hold (k1), a
# NULL, values not accepted (b; k2). Each probe names some of the test's arguments (every
# one of them; keys alone; accepted values alone, one of them quoted) and warns, so the
# build succeeds, and dbt stores its failures: one row per check that fails, and only those.
PROBE_ROWS = """
select 'k1' as id, 'a' as state
union all select 'k1', 'b'
union all select 'k2', null
"""
PROBES: dict[str, tuple[dict[str, t.Any], list[tuple[str, str, int]]]] = {
    "probe_contract": (
        {
            "keys": [["id"], ["id", "state"]],
            "not_null": ["id", "state"],
            "accepted_values": {"state": ["a", "c"], "id": ["k1", "k2"]},
        },
        [("duplicate key", "id", 1), ("null", "state", 1), ("value not accepted", "state", 1)],
    ),
    "probe_keys": ({"keys": [["id"]]}, [("duplicate key", "id", 1)]),
    "probe_values": (
        {"accepted_values": {"state": ["a", "it's"], "id": ["k1"]}},
        [("value not accepted", "id", 1), ("value not accepted", "state", 1)],
    ),
}
PROBE_TESTS = {
    "version": 2,
    "models": [
        {
            "name": "probe_rows",
            "data_tests": [
                {
                    "accessgov.well_formed_rows": {
                        "name": name,
                        "arguments": arguments,
                        "config": {"severity": "warn", "store_failures": True},
                    }
                }
                for name, (arguments, _) in PROBES.items()
            ],
        }
    ],
}


def probes_fail_as_expected(query: t.Callable[[str], list[tuple]], audit_schema: str) -> None:
    """The stored failures of each of the team's probes of ``well_formed_rows`` (``PROBES``)."""
    for name, (_, expected) in PROBES.items():
        rows = query(f"SELECT failed_check, column_names, failing_rows FROM {audit_schema}.{name}")
        assert sorted((check, columns, int(count)) for check, columns, count in rows) == expected


def dbt(utility: str, project: Path, *args: str) -> None:
    """The team's dbt (the version meltano.yml's utility pins), run in its project."""
    require_group("e2e")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DBT_", "ACCESSGOV_"))}
    env |= {"DBT_PROFILES_DIR": str(project), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    executable = ROOT / ".meltano" / "utilities" / utility / "venv" / "bin" / "dbt"
    result = subprocess.run(
        [str(executable), *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def same_marts(query: t.Callable[[str], list[tuple]], ours: str, theirs: str) -> None:
    """Every mart holds the same rows in both schemas (as multisets, in the same columns)."""
    assert len(MARTS) > 10
    for mart in MARTS:
        mine = query(f"SELECT * FROM {ours}.{mart}")
        team = query(f"SELECT * FROM {theirs}.{mart}")
        assert sorted(map(repr, team)) == sorted(map(repr, mine)), mart
    assert query(f"SELECT count(*) FROM {theirs}.grant_intervals")[0][0] > 0


def builds_the_package_on_duckdb(directory: Path, jsonl: Path, ours: Path, as_of: int) -> None:
    """A team's project over target-jsonl's files in ``jsonl``, the package from a git
    repository at a release tag: its marts equal ours (the DuckDB file ``ours``, schema
    ``access``, built by this repository through Meltano from the same files)."""
    import duckdb

    output = {"type": "duckdb", "path": str(directory / "team.duckdb"), "schema": "analytics"}
    variables = {"accessgov_jsonl_dir": str(jsonl), "as_of": format_ns(as_of)}
    # the README's packages.yml and commands as written: a git repository at the release's
    # tag, the package's directory (the repository a copy of this work tree, tagged as the
    # release it is: the form dbt clones, with this work tree's models)
    repository = committed_copy(directory / "repository", tag=f"v{tasks.package_version()}")
    (package,) = yaml.safe_load(readme_yaml(README_RUNNER))["packages"]
    package["git"] = package["git"].replace(f"{REPOSITORY}.git", repository.as_uri())
    project = team_project(directory / "team", output, variables, package)
    for command in readme_commands(README_RUNNER):
        program, *args = command.split()
        assert program == "dbt", command
        dbt("dbt-duckdb", project, *args)

    with duckdb.connect(str(directory / "team.duckdb")) as db:
        db.execute(f"ATTACH '{ours}' AS ours (READ_ONLY)")
        same_marts(lambda sql: db.execute(sql).fetchall(), "ours.access", "analytics")
        probes_fail_as_expected(lambda sql: db.execute(sql).fetchall(), "analytics_dbt_test__audit")


def builds_the_package_on_postgres(
    directory: Path, connection: t.Any, schema: str, warehouse_url: str, as_of: int
) -> None:
    """A team's project over target-postgres's tables in ``schema``, the package from a
    local path, building into ``<schema>_team``: its marts equal ours (``<schema>_models``,
    built by this repository's shipped job from the same tables)."""
    server = libpq_env(warehouse_url)
    output = {
        "type": "postgres",
        "host": server["PGHOST"],
        "port": int(server["PGPORT"]),
        "user": server["PGUSER"],
        "password": server.get("PGPASSWORD", ""),
        "dbname": server["PGDATABASE"],
        "schema": f"{schema}_team",
        "threads": 4,
    }
    variables = {"accessgov_schema": schema, "as_of": format_ns(as_of)}
    project = team_project(directory / "team", output, variables)
    dbt("dbt-postgres", project, "deps")
    dbt("dbt-postgres", project, "build")

    def query(sql: str) -> list[tuple]:
        return list(connection.execute(sql).fetchall())

    same_marts(query, f'"{schema}_models"', f'"{schema}_team"')
    probes_fail_as_expected(query, f'"{schema}_team_dbt_test__audit"')
