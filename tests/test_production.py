"""Production: the `accessgov` job run from fresh copies of the project that share nothing but
PostgreSQL, as containers, pods or CI runners run it (docs/deployment.md).

Meltano's system database (state, run records, the "already running" guard) is in PostgreSQL
(MELTANO_DATABASE_URI, the `prod` environment); each copy has the project's files and the
installed plugins (what an image holds) and a `.meltano/` of its own that no other copy sees.
The tests check what Meltano 4.4.1 promises and the README repeats: the second runner reads only
the events after the first one's bookmark, an overlapping run is refused and the first one
completes untouched, a SIGKILLed run blocks the next one for 5 minutes after its last heartbeat
and no longer; and the Dagster definitions (orchestrate/) run the job with retries, one run of
it at a time."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import typing as t
from pathlib import Path

import pytest

from emulator import Dataset, Emulator
from emulator.timefmt import format_ns
from tests.conftest import (
    BIN,
    CREDENTIAL,
    DBT_PER_WORKER,
    E2E_DATASET,
    ON_EVERY_SERVER,
    ON_OWN_SERVER,
    PLUGIN_KINDS,
    ROOT,
    libpq_env,
    ns,
    tap_env,
)
from tests.test_evidence_models import compare as compare_evidence
from tests.test_evidence_models import engine_query, grants_read
from tests.test_models import (
    as_of_instant,
    check_plans_stay_linear,
    compare,
    postgres_models_query,
    truth,
)

JOB_STATE_ID = "prod:tap-accessgov-to-target-postgres"  # Meltano's name for the job's EL block


def fresh_copy(directory: Path) -> Path:
    """The project as an image holds it: its files (the dbt utilities' commands among them:
    scripts/) and the installed plugins (linked, read only), with a `.meltano/` of its own and
    nothing from earlier runs."""
    directory.mkdir()
    shutil.copy(ROOT / "meltano.yml", directory)
    for tree in ("transform", "dbt_accessgov", "orchestrate", "scripts"):
        shutil.copytree(
            ROOT / tree,
            directory / tree,
            ignore=shutil.ignore_patterns("target", "logs", "__pycache__"),
        )
    (directory / ".meltano").mkdir()
    for kind in PLUGIN_KINDS:
        (directory / ".meltano" / kind).symlink_to(ROOT / ".meltano" / kind)
    return directory


@pytest.fixture
def warehouse(postgres, warehouse_url: str, tmp_path: Path) -> dict[str, t.Any]:
    """A schema for the tables, one for the models and one for Meltano's system database, all
    named after the `postgres` fixture's schema (which drops them). The system database's
    schema is created empty: Meltano creates its tables there on first use."""
    connection, schema = postgres
    system = schema + "_meltano"
    connection.execute(f'CREATE SCHEMA "{system}"')
    return {
        "connection": connection,
        "schema": schema,
        "system": system,
        "url": warehouse_url,
        "database_uri": f"{warehouse_url}?options=-csearch_path%3D{system}",
    }


def prod_env(emulator: Emulator, warehouse: dict[str, t.Any]) -> dict[str, str]:
    """What a production runner sets: the `prod` environment, the system database, the tenant
    (here the emulator), the warehouse (PG* variables) and the schemas of this test."""
    schema = warehouse["schema"]
    per_worker = {variable for variable, _ in DBT_PER_WORKER}  # each copy builds in its own
    return {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TAP_ACCESSGOV", "PG", "MELTANO")) and k not in per_worker
        },
        **tap_env(emulator),
        **libpq_env(warehouse["url"]),
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "MELTANO_ENVIRONMENT": "prod",
        "MELTANO_DATABASE_URI": warehouse["database_uri"],
        "TARGET_POSTGRES_DEFAULT_TARGET_SCHEMA": schema,
        "DBT_POSTGRES_SOURCE_SCHEMA": schema,
        "DBT_POSTGRES_SCHEMA": schema + "_models",
        "ACCESSGOV_AS_OF": format_ns(as_of_instant(emulator.dataset)),
    }


def start_job(project: Path, env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    """`meltano run accessgov` (or the given meltano command) in a copy, in a process group of
    its own (so a test can kill it with its children, as a container's end does)."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(BIN / "meltano"), *(args or ("run", "accessgov"))],
            cwd=project,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def run_job(
    project: Path, env: dict[str, str], *args: str, timeout: float = 600
) -> tuple[int, str]:
    log = project / f"run-{time.monotonic_ns()}.log"
    process = start_job(project, env, log, *args)
    returncode = process.wait(timeout=timeout)
    output = log.read_text()
    assert CREDENTIAL.client_secret not in output
    return returncode, output


def runs(warehouse: dict[str, t.Any]) -> list[tuple[str, str | None]]:
    """Meltano's records of the job's runs, oldest first: state (RUNNING, SUCCESS, FAIL), error."""
    return (
        warehouse["connection"]
        .execute(
            f"SELECT state, payload::json->>'error' FROM \"{warehouse['system']}\".runs "
            "WHERE job_name = %s ORDER BY started_at",
            (JOB_STATE_ID,),
        )
        .fetchall()
    )


def wait_until_running(
    warehouse: dict[str, t.Any], process: subprocess.Popen[bytes], earlier: int = 0
) -> None:
    """Until the run's record says RUNNING, after ``earlier`` records of runs before it;
    fails if the run ends first or never starts."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before the test could overlap it"
        table = (
            warehouse["connection"]
            .execute("SELECT to_regclass(%s)", (f'"{warehouse["system"]}".runs',))
            .fetchone()[0]
        )
        if table and [state for state, _ in runs(warehouse)][earlier:] == ["RUNNING"]:
            return
        time.sleep(0.2)
    raise AssertionError("the run never started")


def models_query(warehouse: dict[str, t.Any]) -> t.Callable[[str], list[tuple]]:
    return postgres_models_query(warehouse["connection"], warehouse["schema"])


def compare_models(warehouse: dict[str, t.Any], ds: Dataset, as_of: int) -> None:
    """Right after a run: the access history models and the evidence models equal the
    truth."""
    query = models_query(warehouse)
    compare(query, truth(ds, as_of))
    compare_evidence(engine_query(query, "postgres"), "postgres", ds, grants_read(ds))


# The configured server's release runs the models scenario with the plan guard
# (tests/test_evidence_models.py) and this file's other runs of the job in its system database.
@ON_OWN_SERVER
def test_a_second_runner_with_a_fresh_project_continues_from_the_first_ones_state(
    meltano_plugins: None,
    make_emulator: t.Callable[..., Emulator],
    warehouse: dict[str, t.Any],
    tmp_path: Path,
) -> None:
    """Also the models on PostgreSQL with unset fields omitted by every endpoint (sent empty:
    tests/test_evidence_models.py; the vendor's mix: this file's other runs), each run's
    compared with the truth: access history, and evidence on the evidence tests' tenant
    (``compare_models``), and the plan guard: on the tests' own server, where
    tests/test_evidence_models.py's PostgreSQL scenario makes the same checks on the
    configured one."""
    tenant = make_emulator(Dataset(**E2E_DATASET, ticket_ids="mixed"))
    tenant.emit_unpopulated = False
    env = prod_env(tenant, warehouse)
    ds = tenant.dataset
    as_of = as_of_instant(ds)

    first = fresh_copy(tmp_path / "runner-1")
    returncode, output = run_job(first, env)
    assert returncode == 0, output[-4000:]
    compare_models(warehouse, ds, as_of)
    # each release's planner: no model's plan turns quadratic in the events
    check_plans_stay_linear(warehouse["connection"], first / "transform" / "target" / "postgres")
    first_feed_pages = tenant.stats["api_requests_by_path"]["/api/v1/grants/feed"]

    tenant.add_events(count=150)
    assert tenant.close_tasks(count=12)  # approvers decide: the tasks read again, incrementally
    tenant.reset_stats()
    (before_second_run,) = (
        warehouse["connection"].execute("SELECT txid_current() % 4294967296").fetchone()
    )
    second = fresh_copy(tmp_path / "runner-2")
    returncode, output = run_job(second, env)
    assert returncode == 0, output[-4000:]
    assert not (second / ".meltano" / "meltano.db").exists()
    # Incremental: only the pages after the first run's bookmark, and only the new events
    # (plus those at the bookmark instant, which `after` re-reads) written to the table; the
    # feed read twice, by grant_feed and by past_grants (the removals since its bookmark).
    feed_pages = tenant.stats["api_requests_by_path"]["/api/v1/grants/feed"]
    assert feed_pages <= 2 * 3 < first_feed_pages
    (written,) = (
        warehouse["connection"]
        .execute(
            f'SELECT count(*) FROM "{warehouse["schema"]}".grant_feed '
            f"WHERE xmin::text::bigint > {before_second_run}"
        )
        .fetchone()
    )
    assert 150 <= written <= 155
    compare_models(warehouse, ds, as_of)
    assert runs(warehouse) == [("SUCCESS", None), ("SUCCESS", None)]

    # The README's two operations, from yet another copy: the state, and a backfill from a date.
    third = fresh_copy(tmp_path / "runner-3")
    latest = max((e["feed"]["date"] for e in ds.feed_entries()), key=ns)
    returncode, output = run_job(third, env, "state", "get", JOB_STATE_ID)
    assert returncode == 0, output[-4000:]
    state = json.loads(output.strip().splitlines()[-1])
    assert ns(state["singer_state"]["bookmarks"]["grant_feed"]["replication_key_value"]) == ns(
        latest
    )

    since = sorted((e["feed"]["date"] for e in ds.feed_entries()), key=ns)[ds.total // 2]
    tenant.reset_stats()
    returncode, output = run_job(
        third, env | {"TAP_ACCESSGOV_START_DATE": since}, "run", "--full-refresh", "accessgov"
    )
    assert returncode == 0, output[-4000:]
    since_then = sum(ns(e["feed"]["date"]) >= ns(since) for e in ds.feed_entries())
    assert since_then < ds.total
    assert f"grant_feed: {since_then:,} records in" in output  # the tap's count of the run
    compare_models(warehouse, ds, as_of)
    returncode, output = run_job(third, env, "state", "get", JOB_STATE_ID)
    state = json.loads(output.strip().splitlines()[-1])
    assert ns(state["singer_state"]["bookmarks"]["grant_feed"]["replication_key_value"]) == ns(
        latest
    )


REFUSED = f"Another '{JOB_STATE_ID}' pipeline is already running"


def test_a_killed_run_blocks_the_next_for_five_minutes_and_a_running_one_refuses_overlaps(
    meltano_plugins: None, e2e_emulator: Emulator, warehouse, tmp_path: Path
) -> None:
    """One run of the job at a time, from fresh project copies sharing the system database.
    Meltano 4.4.1 writes a heartbeat into the run's record every second and takes a RUNNING
    record whose heartbeat is 5 minutes old (HEARTBEAT_VALID_MINUTES, not a setting) for a dead
    run. The test does not wait those minutes: it moves the killed run's last heartbeat back,
    the one thing Meltano compares with the clock. The run it then lets start reads slowly,
    and a run started meanwhile is refused while it completes."""
    env = prod_env(e2e_emulator, warehouse)
    e2e_emulator.latency = 0.5
    killed = start_job(fresh_copy(tmp_path / "runner-1"), env, tmp_path / "killed.log")
    wait_until_running(warehouse, killed)
    time.sleep(2)  # the tap is reading
    os.killpg(killed.pid, signal.SIGKILL)  # the container is gone: meltano, tap and target
    killed.wait(timeout=60)
    e2e_emulator.latency = 0
    assert runs(warehouse) == [("RUNNING", None)]

    def heartbeat_age(age: str) -> None:
        warehouse["connection"].execute(
            f'UPDATE "{warehouse["system"]}".runs '
            f"SET last_heartbeat_at = (now() AT TIME ZONE 'UTC') - interval '{age}' "
            "WHERE job_name = %s AND state = 'RUNNING'",
            (JOB_STATE_ID,),
        )

    second = fresh_copy(tmp_path / "runner-2")
    returncode, output = run_job(second, env)  # at once
    assert returncode == 1
    assert REFUSED in output
    assert "Wait until" in output
    heartbeat_age("4 minutes 30 seconds")
    returncode, output = run_job(second, env)
    assert returncode == 1
    assert REFUSED in output
    heartbeat_age("5 minutes 1 second")
    # the next run starts, and reads for a while (lifted once a third is refused)
    e2e_emulator.latency = 1.0
    second_log = tmp_path / "second.log"
    running = start_job(second, env, second_log)
    try:
        wait_until_running(warehouse, running, earlier=1)
        returncode, output = run_job(fresh_copy(tmp_path / "runner-3"), env)
        assert running.poll() is None, "the overlap must be tested while the run runs"
        e2e_emulator.latency = 0
        assert running.wait(timeout=600) == 0, second_log.read_text()[-4000:]
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
    assert returncode == 1
    assert REFUSED in output
    # The refused run left no record and touched nothing: the killed run failed, the next one
    # completed, and whatever state the killed run left, the history is whole: nothing lost.
    assert runs(warehouse) == [
        (
            "FAIL",
            "No heartbeat recorded for 5 minutes. The process was likely killed unceremoniously.",
        ),
        ("SUCCESS", None),
    ]
    compare(
        models_query(warehouse), truth(e2e_emulator.dataset, as_of_instant(e2e_emulator.dataset))
    )


def test_dagster_runs_the_job_on_its_schedule_with_retries(
    meltano_plugins: None, e2e_emulator: Emulator, warehouse, tmp_path: Path
) -> None:
    """The shipped Dagster definitions, in the `dagster` orchestrator plugin's own virtualenv:
    the schedule is meltano.yml's, and `meltano invoke dagster:run` (Dagster's in-process
    execution of that schedule's job) runs the job with the secret and the system database
    from the environment, retrying an attempt that failed (the service refused the first
    feed request)."""
    project = fresh_copy(tmp_path / "runner")
    (tmp_path / "dagster").mkdir()
    (tmp_path / "dagster" / "dagster.yaml").write_text("")
    env = prod_env(e2e_emulator, warehouse) | {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",  # `meltano`, as in a runner's image
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "ACCESSGOV_RETRY_DELAY_SECONDS": "1",
    }
    schedule = in_dagster(
        project,
        env,
        "import datetime, dagster as dg; from definitions import defs\n"
        "s = defs.resolve_schedule_def('accessgov_nightly')\n"
        "at = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)\n"
        "with dg.instance_for_test() as instance, dg.build_schedule_context(\n"
        "    instance=instance, scheduled_execution_time=at\n"
        ") as context:\n"
        "    requests = s.evaluate_tick(context).run_requests\n"
        "print(s.cron_schedule, s.execution_timezone, s.job_name, len(requests))",
    )
    assert schedule.split() == ["@daily", "UTC", "accessgov", "1"]

    e2e_emulator.faults.add(kind="403", path="/api/v1/grants/feed", times=1)
    returncode, output = run_job(project, env, "invoke", "dagster:run", timeout=900)
    assert returncode == 0, output[-6000:]
    stored = [p.read_bytes() for p in (tmp_path / "dagster").rglob("*") if p.is_file()]
    assert stored
    assert not [b for b in stored if CREDENTIAL.client_secret.encode() in b]  # EnvVar: not kept
    assert in_dagster(project, env, RUN_EVENTS).split() == [
        "RUN_START",
        "STEP_START",
        "STEP_UP_FOR_RETRY",
        "STEP_RESTARTED",
        "STEP_SUCCESS",
        "RUN_SUCCESS",
    ]
    failed, succeeded = runs(warehouse)
    assert failed[0] == "FAIL"
    assert succeeded == ("SUCCESS", None)
    compare(
        models_query(warehouse), truth(e2e_emulator.dataset, as_of_instant(e2e_emulator.dataset))
    )


# The run's events of the kinds the retry is seen in, in order, as the Dagster instance stored
# them. Not its printed log: a step's lines reach the terminal through Dagster's capture of
# the step's output (LOGS_CAPTURED), mirrored as they are written, and on a loaded machine the
# step's last line (STEP_SUCCESS) was once missing there while the run had it.
RUN_EVENTS = """
import dagster as dg
kinds = {"RUN_START", "STEP_START", "STEP_UP_FOR_RETRY", "STEP_RESTARTED", "STEP_SUCCESS",
         "RUN_SUCCESS", "RUN_FAILURE", "STEP_FAILURE"}
with dg.DagsterInstance.get() as instance:
    (run,) = instance.get_runs()
    for entry in instance.all_logs(run.run_id):
        if entry.is_dagster_event and entry.dagster_event_type.name in kinds:
            print(entry.dagster_event_type.name)
"""


def in_dagster(
    project: Path, env: dict[str, str], code: str, *args: str, timeout: float = 120
) -> str:
    """What ``code`` prints, run with ``args`` by the Python of the project's `dagster` plugin
    in its orchestrate/ directory (the definitions importable), with ``env`` (DAGSTER_HOME);
    a failure shows the end of what it wrote to stderr."""
    python = project / ".meltano" / "orchestrators" / "dagster" / "venv" / "bin" / "python"
    result = subprocess.run(
        [str(python), "-c", code, *args],
        cwd=project / "orchestrate",
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


ONE_AT_A_TIME = """
import datetime, json, sys
import dagster as dg
from definitions import MeltanoProject, defs

schedule = defs.resolve_schedule_def("accessgov_nightly")
job = defs.resolve_job_def("accessgov")
meltano = MeltanoProject(executable=sys.argv[1], client_secret="s", database_uri="u")
at = datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)
out = {}
for earlier in ("STARTED", "SUCCESS"):
    with dg.instance_for_test() as instance:
        status = dg.DagsterRunStatus[earlier]
        instance.add_run(dg.DagsterRun(job_name="accessgov", run_id="earlier", status=status))
        with dg.build_schedule_context(instance=instance, scheduled_execution_time=at) as context:
            tick = schedule.evaluate_tick(context)
        run = job.execute_in_process(
            instance=instance, resources={"meltano": meltano}, raise_on_error=False
        )
        out[earlier] = [len(tick.run_requests or []), tick.skip_message, run.success]
print(json.dumps(out))
"""


def test_dagster_holds_the_job_to_one_run_at_a_time(meltano_plugins: None, tmp_path: Path) -> None:
    """Meltano's guard covers the extract-load only, so a second run could start while the
    first one's dbt build still runs. With a run of the job in progress (started elsewhere:
    only the instance knows it), the schedule skips its tick and a run started by hand fails
    (and is retried) without starting Meltano; with that run finished, both go ahead."""
    calls = tmp_path / "meltano-calls"
    fake_meltano = tmp_path / "meltano"
    fake_meltano.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake_meltano.chmod(0o755)
    printed = in_dagster(
        ROOT,
        {
            **os.environ,
            "PYTHONPATH": str(ROOT / "orchestrate"),
            "DAGSTER_HOME": str(tmp_path),
            "ACCESSGOV_RETRY_DELAY_SECONDS": "0.01",
        },
        ONE_AT_A_TIME,
        str(fake_meltano),
        timeout=300,
    )
    outcome = json.loads(printed.splitlines()[-1])
    assert outcome["STARTED"] == [0, "run earlier of the job accessgov is still in progress", False]
    assert outcome["SUCCESS"] == [1, None, True]
    assert calls.read_text().splitlines() == ["run accessgov"]  # the second case only


@ON_EVERY_SERVER
def test_meltano_creates_its_tables_in_an_empty_schema_but_not_the_schema(
    postgres, warehouse_url: str, tmp_path: Path
) -> None:
    """What "created on first use" means (docs/deployment.md): Meltano migrates an empty schema
    on its first command, and answers a schema that does not exist with a misleading error
    (the README's troubleshooting row quotes it)."""
    connection, schema = postgres
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "meltano.yml", project)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MELTANO")},
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "MELTANO_DATABASE_URI": f"{warehouse_url}?options=-csearch_path%3D{schema}",
    }
    returncode, output = run_job(project, env, "state", "list")
    assert returncode == 1
    assert "MigrationError: Cannot upgrade the system database. It might be corrupted" in output
    connection.execute(f'CREATE SCHEMA "{schema}"')
    returncode, output = run_job(project, env, "state", "list")
    assert returncode == 0, output[-4000:]
    tables = connection.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
    ).fetchall()
    assert {"alembic_version", "runs", "state"} <= {name for (name,) in tables}


@ON_EVERY_SERVER
def test_meltano_creates_its_tables_in_an_empty_database(
    postgres, warehouse_url: str, tmp_path: Path
) -> None:
    """The other form the README gives: a database of its own (tables in its public schema)."""
    import psycopg

    connection, schema = postgres
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "meltano.yml", project)
    base, _, _ = warehouse_url.rpartition("/")
    connection.execute(f'CREATE DATABASE "{schema}"')
    try:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MELTANO")},
            "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
            "MELTANO_DATABASE_URI": f"{base}/{schema}",
        }
        returncode, output = run_job(project, env, "state", "list")
        assert returncode == 0, output[-4000:]
        url = f"{base}/{schema}".replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(url) as database:
            tables = database.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        assert {"alembic_version", "runs", "state"} <= {name for (name,) in tables}
    finally:
        connection.execute(f'DROP DATABASE IF EXISTS "{schema}" WITH (FORCE)')
