"""The models as a dbt package (dbt_accessgov/): a team's own dbt project lists it in its
packages.yml, says in its vars where the tap's streams were loaded, runs ``dbt deps`` and
``dbt build``, and gets the marts this repository's own build (transform/, through Meltano)
makes from the same load: on DuckDB over target-jsonl's files, the package from a git
repository at a release tag (``subdirectory``), and on PostgreSQL over target-postgres's
tables, the package from a local path.

The team's project is nothing but its own dbt_project.yml, packages.yml and profiles.yml, in a
directory of its own; its dbt runs with none of this repository's environment (no DBT_* or
ACCESSGOV_* variable), so the vars alone say where the data is."""

from __future__ import annotations

import os
import subprocess
import typing as t
from pathlib import Path

import yaml

from emulator import Emulator
from emulator.timefmt import format_ns
from tests.conftest import ROOT, libpq_env, meltano
from tests.groups import require_group
from tests.test_models import as_of_instant, duckdb_models, postgres_models
from tests.test_release import TAG_VERSION, tagged_checkout

PACKAGE = ROOT / "dbt_accessgov"
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
    return directory


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


def test_a_teams_dbt_project_builds_the_package_on_duckdb(
    meltano_plugins: None, e2e_emulator: Emulator, tmp_path: Path
) -> None:
    import duckdb

    as_of = as_of_instant(e2e_emulator.dataset)
    env, _ = duckdb_models(e2e_emulator, tmp_path, as_of)
    meltano("run", "tap-accessgov", "target-jsonl", "dbt-duckdb:build", env=env)

    output = {"type": "duckdb", "path": str(tmp_path / "team.duckdb"), "schema": "analytics"}
    variables = {"accessgov_jsonl_dir": str(tmp_path / "jsonl"), "as_of": format_ns(as_of)}
    # as the README's packages.yml: a git repository, a release tag, the package's directory
    # (a tagged copy of this checkout: the form dbt clones, with this work tree's models)
    repository = tagged_checkout(tmp_path / "repository")
    package = {
        "git": repository.as_uri(),
        "revision": f"v{TAG_VERSION}",
        "subdirectory": "dbt_accessgov",
    }
    project = team_project(tmp_path / "team", output, variables, package)
    dbt("dbt-duckdb", project, "deps")
    dbt("dbt-duckdb", project, "build")

    with duckdb.connect(str(tmp_path / "team.duckdb")) as db:
        db.execute(f"ATTACH '{tmp_path / 'models.duckdb'}' AS ours (READ_ONLY)")
        same_marts(lambda sql: db.execute(sql).fetchall(), "ours.access", "analytics")


def test_a_teams_dbt_project_builds_the_package_on_postgres(
    meltano_plugins: None,
    e2e_emulator: Emulator,
    postgres: tuple[t.Any, str],
    warehouse_url: str,
    tmp_path: Path,
) -> None:
    connection, schema = postgres
    as_of = as_of_instant(e2e_emulator.dataset)
    env, _ = postgres_models(e2e_emulator, tmp_path, as_of, connection, schema, warehouse_url)
    meltano("run", "tap-accessgov", "target-postgres", "dbt-postgres:build", env=env)

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
    project = team_project(tmp_path / "team", output, variables)
    dbt("dbt-postgres", project, "deps")
    dbt("dbt-postgres", project, "build")

    def query(sql: str) -> list[tuple]:
        return list(connection.execute(sql).fetchall())

    same_marts(query, f'"{schema}_models"', f'"{schema}_team"')
