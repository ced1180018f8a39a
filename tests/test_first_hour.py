"""A new user's first hour, from the README as written: a fresh clone, ``python3 tasks.py
demo``, then the project as theirs: the job's ``meltano install`` and the nightly job into
PostgreSQL, and the embedded DuckDB pipeline, with no step the README does not say.

The clone is of a copy of this work tree (tests/readme.py: the README's address is not
reachable here); the tenant is an emulator and the warehouse the tests' PostgreSQL, given as
the README's ``export`` lines give them. Nothing of this checkout's own installs is used: the
clone makes its .venv and its .meltano as a user's does."""

from __future__ import annotations

import os
import re
import typing as t
from pathlib import Path

import duckdb
import yaml

import tasks
from emulator import Emulator
from tests.conftest import CREDENTIAL, PLUGIN_KINDS, libpq_env, tap_env
from tests.groups import require_group
from tests.readme import REPOSITORY, committed_copy, readme_commands, run_commands
from tests.test_end_to_end import check_loaded_tables

RUNNER = "tests/test_first_hour.py::test_a_fresh_clone_runs_the_demo_and_the_job"
MARTS = sorted(
    path.stem for path in (tasks.ROOT / "dbt_accessgov" / "models" / "marts").glob("*.sql")
)


def test_a_fresh_clone_runs_the_demo_and_the_job(
    e2e_emulator: Emulator, postgres: tuple[t.Any, str], warehouse_url: str, tmp_path: Path
) -> None:
    require_group("e2e")
    connection, schema = postgres
    (tmp_path / "origin" / "tap-accessgov").mkdir(parents=True)  # a clone's directory name
    repository = committed_copy(tmp_path / "origin" / "tap-accessgov")
    home = tmp_path / "home"
    home.mkdir()
    # A user's shell on this machine (its certificates and package index settings): nothing
    # of the tests' own settings (the workers' Meltano and dbt directories, a tenant, a
    # warehouse) but what the README's exports set below.
    shell = {k: v for k, v in os.environ.items() if not k.startswith(NOT_A_USERS)}
    clone_and_demo, job = (
        readme_commands(RUNNER, {f"{REPOSITORY}.git": str(repository)})[:3],
        readme_commands(RUNNER)[3:],
    )
    assert clone_and_demo[-1] == "python3 tasks.py demo"
    assert job[0].startswith(".venv/bin/meltano install ")

    *_, demo = run_commands(clone_and_demo, home, shell)
    clone = home / "tap-accessgov"
    assert "== The answers, after the first run" in demo
    added = re.search(
        r"^It appended (\d+) grant feed rows: the 750 new events and (\d+) ", demo, re.M
    )
    assert added, demo[-3000:]
    assert int(added[1]) == 750 + int(added[2])
    assert "What the answers say now that they did not after the first run:" in demo
    # what an audit is scoped by, answered with names (issue 67)
    by_reviewer = answer(demo, "The SOX-scoped access held now, by reviewer")
    assert by_reviewer[0].split()[:3] == ["reviewer", "reviewer_status", "reviews_as"]
    assert len(by_reviewer) > 2, by_reviewer  # the header, its rule, a reviewer at least
    findings = "\n".join(answer(demo, "Entitlements nobody owns, and the service's admins"))
    assert "entitlement nobody owns" in findings, findings
    assert "admin who has left" in findings, findings

    # the project as a team's: the clone's own Meltano, as the README names it, and its exports
    version = run_commands([".venv/bin/tap-accessgov --version"], clone, shell)[0]
    assert version.startswith(f"tap-accessgov v{tasks.released_versions()[0]},")
    env = {
        **shell,
        **{k: v for k, v in tap_env(e2e_emulator).items() if k in TENANT},
        **libpq_env(warehouse_url),
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        # the tables and the models in this test's schemas, the models at one instant
        "TARGET_POSTGRES_DEFAULT_TARGET_SCHEMA": schema,
        "DBT_POSTGRES_SOURCE_SCHEMA": schema,
        "DBT_POSTGRES_SCHEMA": f"{schema}_models",
        "ACCESSGOV_AS_OF": "2030-01-01T00:00:00Z",
    }
    outputs = run_commands(job, clone, env)
    # Meltano installs a plugin a run needs and lacks (its auto_install setting is not read:
    # meltano 4.4's cli/params.py), so a plugin the install line left out would show here
    installed = {p.name for kind in PLUGIN_KINDS for p in (clone / ".meltano" / kind).glob("*")}
    assert installed == set(job[0].split()[2:])
    assert not any(CREDENTIAL.client_secret in output for output in outputs)

    check_loaded_tables(connection, schema, e2e_emulator)
    embedded = duckdb.connect(str(clone / "accessgov.duckdb"), read_only=True)
    assert len(MARTS) > 10
    # The job's models in PostgreSQL and the embedded ones agree, but for the service's own
    # activity: its system log has the calls of the run between them.
    for mart in sorted(set(MARTS) - {"service_activity"}):
        warehouse = connection.execute(f'SELECT count(*) FROM "{schema}_models".{mart}')
        assert embedded.execute(f"SELECT count(*) FROM analytics.{mart}").fetchone() == (
            warehouse.fetchone()
        ), mart
    held = embedded.execute("SELECT count(*) FROM analytics.current_grants").fetchone()[0]
    assert held > 0


def test_the_jobs_install_line_names_the_plugins_its_runs_use() -> None:
    """The README's job block installs what its runs use, no more: the project also
    declares dbt-spark (PySpark and a JVM, ~600 MB) and Dagster, which a bare ``meltano
    install`` puts in a new user's first hour. A job's name stands for its tasks
    (meltano.yml). Every line is the clone's own Meltano: nothing puts one on a new user's
    PATH."""
    install, *runs = readme_commands(RUNNER)[3:]
    project = yaml.safe_load((tasks.ROOT / "meltano.yml").read_text())
    jobs = {job["name"]: job["tasks"] for job in project["jobs"]}
    used = set()
    for line in runs:
        assert " run " in line, line
        for block in line.split(" run ", 1)[1].split():
            for task in jobs.get(block, [block]):
                used |= {name.split(":")[0] for name in task.split()}
    assert install.split()[:2] == [".venv/bin/meltano", "install"]
    assert all(line.startswith(".venv/bin/meltano ") for line in runs), runs
    named = install.split()[2:]
    assert sorted(named) == sorted(used)
    declared = {p["name"] for kind in project["plugins"].values() for p in kind}
    assert {"dbt-spark", "dagster"} <= declared - set(named)


def answer(printed: str, title: str) -> list[str]:
    """The table the demo printed under the first answer whose title starts with ``title``
    (after the first run): its header, its rule and its rows."""
    lines = printed.split("== The answers, after the first run", 1)[1].splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(title))
    table = []
    for line in lines[start + 1 :]:
        if not line.startswith("  ") or line.strip().startswith("... and"):
            break
        table.append(line.strip())
    assert table, lines[start : start + 5]
    assert table[-1] != "(none)", lines[start : start + 5]
    return table


# The tenant as the README's export lines give it (the emulator's in place of a tenant's)
TENANT = ("TAP_ACCESSGOV_CLIENT_ID", "TAP_ACCESSGOV_CLIENT_SECRET", "TAP_ACCESSGOV_API_URL")
# What the tests set for themselves, which a user's shell does not have
NOT_A_USERS = (
    "MELTANO_",
    "DBT_",
    "TAP_",
    "TARGET_",
    "ACCESSGOV_",
    "PG",
    "PYTEST",
    "VIRTUAL_ENV",
    "PYTHONPATH",
)
