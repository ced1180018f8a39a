"""The models at warehouse scale (``python3 tasks.py benchmark --only models``).

For each size (100,000 and 1,000,000 events by default) the tap extracts an emulated tenant
once into a file of Singer messages: extraction runs at the service's pace, which the
warehouse does not choose, so it is not part of the comparison. Then, for each engine, the
shipped loader loads that file into fresh tables (timed: the load) and dbt builds and tests
every model right away (timed: the build):

- PostgreSQL: ``meltano invoke target-postgres`` as meltano.yml configures it (COPY, merge on
  the primary key) into a new schema, then ``meltano invoke dbt-postgres build``;
- DuckDB: ``meltano invoke target-jsonl`` into a new directory, then ``meltano invoke
  dbt-duckdb build`` over those files (the embedded default);
- Spark, when ``--model-engines`` names it: ``meltano invoke target-jsonl`` into a new
  directory, then ``meltano invoke dbt-spark:build`` over those files (a JVM started, a new
  metastore and warehouse).

Both times include Meltano's start (a few seconds, the same at every size), as a user's run
does. Then the nightly case at the largest size: the emulator adds a night's events, the tap
extracts them from the first extraction's bookmark (re-reading the bookmark instant, as every
run does), each loader adds them to the same tables and the models are rebuilt from scratch:
what every nightly run pays for the models. Each build's slowest model and its share of the
build come from dbt's run_results.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import typing as t
from dataclasses import dataclass
from pathlib import Path

from harness.support import BIN, ROOT, TAP, EmulatorProcess, Warehouse, libpq_env

if t.TYPE_CHECKING:
    from collections.abc import Callable

ENGINES = ("postgres", "duckdb", "spark")  # Spark only when asked (--model-engines): minutes
LABELS = {"postgres": "PostgreSQL", "duckdb": "DuckDB", "spark": "Spark"}
LOADERS = {"postgres": "target-postgres", "duckdb": "target-jsonl", "spark": "target-jsonl"}


@dataclass
class Side:
    """One engine's fresh tables for one size: the environment of its meltano runs."""

    engine: str
    env: dict[str, str]
    log: Path
    target: Path  # dbt's target path (run_results.json)


@dataclass
class Build:
    seconds: float  # wall time of `meltano invoke dbt-... build`, start-up included
    dbt_seconds: float  # dbt's own elapsed time for the models and tests, after its start-up
    slowest: str
    slowest_seconds: float
    models_seconds: float

    def describe(self) -> str:
        share = self.slowest_seconds / self.models_seconds if self.models_seconds else 0.0
        return (
            f"{self.seconds:6.1f} s (dbt {self.dbt_seconds:5.1f} s; slowest model "
            f"{self.slowest} {self.slowest_seconds:.1f} s, {share:.0%} of the models)"
        )


def load_average() -> str:
    """The machine's load when a size starts: on a shared machine absolute times vary."""
    return f"load average {os.getloadavg()[0]:.1f}"


def extract(tenant: EmulatorProcess, messages: Path, state: Path | None = None) -> int:
    """The tap's output for the tenant (all streams), from ``state`` if given; the last STATE
    goes next to the messages. Returns the records written."""
    command = [str(TAP), "--config", str(tenant.config_path)]
    if state is not None:
        command += ["--state", str(state)]
    with messages.open("w") as output:
        subprocess.run(command, stdout=output, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
    records, last_state = 0, None
    with messages.open() as lines:
        for line in lines:
            kind = line[:30]  # every Singer message starts with its type
            if '"RECORD"' in kind:
                records += 1
            elif '"STATE"' in kind:
                last_state = json.loads(line)["value"]
    messages.with_suffix(".state.json").write_text(json.dumps(last_state))
    return records


def meltano(side: Side, *args: str, stdin: Path | None = None) -> float:
    """Wall seconds of ``meltano --environment emulator <args>``; exits with its log on error."""
    log = side.log
    started = time.perf_counter()
    with log.open("w") as output, (stdin or Path(os.devnull)).open("rb") as source:
        status = subprocess.run(
            [str(BIN / "meltano"), "--environment", "emulator", *args],
            cwd=ROOT,
            env=side.env,
            stdin=source,
            stdout=output,
            stderr=output,
            check=False,
        ).returncode
    elapsed = time.perf_counter() - started
    if status != 0:
        sys.exit(
            f"meltano {' '.join(args)} failed ({status}); its log: {log}\n{log.read_text()[-3000:]}"
        )
    return elapsed


def load(side: Side, messages: Path) -> float:
    """The shipped loader of the engine, reading the tap's messages."""
    return meltano(side, "invoke", LOADERS[side.engine], stdin=messages)


def build(side: Side) -> Build:
    """``dbt build`` of every model and test, and the slowest model from run_results.json."""
    seconds = meltano(side, "invoke", f"dbt-{side.engine}:build")
    results = json.loads((side.target / "run_results.json").read_text())
    models = {
        result["unique_id"].rsplit(".", 1)[-1]: float(result["execution_time"])
        for result in results["results"]
        if result["unique_id"].startswith("model.")
    }
    slowest = max(models, key=lambda name: models[name])
    return Build(
        seconds, float(results["elapsed_time"]), slowest, models[slowest], sum(models.values())
    )


def fresh_side(engine: str, workdir: Path, name: str, schemas: Warehouse) -> Side:
    """Where one engine's load and build go: fresh tables of their own."""
    target = workdir / f"dbt-{engine}-{name}"
    env = {
        **os.environ,
        "MELTANO_DATABASE_URI": f"sqlite:///{workdir / 'meltano.db'}",
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        f"DBT_{engine.upper()}_TARGET_PATH": str(target),
        f"DBT_{engine.upper()}_LOG_PATH": str(target / "logs"),
    }
    if engine == "postgres":
        source = schemas.new_schema(f"models_source_{name}")
        tables = {
            # the database the warehouse connection uses, for target-postgres and dbt alike
            **libpq_env(schemas.url),
            "TARGET_POSTGRES_DEFAULT_TARGET_SCHEMA": source,
            "DBT_POSTGRES_SOURCE_SCHEMA": source,
            "DBT_POSTGRES_SCHEMA": schemas.new_schema(f"models_{name}"),
        }
    else:
        jsonl = workdir / f"jsonl-{engine}-{name}"
        jsonl.mkdir()
        tables = {"TARGET_JSONL_DESTINATION_PATH": str(jsonl)}
        if engine == "duckdb":
            tables["DBT_DUCKDB_JSONL_DIR"] = str(jsonl)
            tables["DBT_DUCKDB_DATABASE_PATH"] = str(workdir / f"models-{name}.duckdb")
        else:
            tables["DBT_SPARK_JSONL_DIR"] = str(jsonl)
            tables["DBT_SPARK_WAREHOUSE_DIR"] = str(workdir / f"spark-warehouse-{name}")
    return Side(engine, env | tables, log=workdir / f"{engine}-{name}.log", target=target)


def models_section(
    engines: list[str],
    sizes: list[int],
    nightly_events: int,
    workdir: Path,
    start_emulator: Callable[[str, int], EmulatorProcess],
    schemas: Warehouse,
    report: Callable[[str], None],
) -> None:
    """Load and build side by side for each size and engine, then the nightly case."""
    builds: dict[tuple[str, int], Build] = {}
    for events in sizes:
        tenant = start_emulator(f"models{events}", events)
        try:
            messages = workdir / f"messages-{events}.jsonl"
            records = extract(tenant, messages)
            report(
                f"models: {events:,} events (the tap's output: {records:,} records), "
                f"load into fresh tables, then dbt build; {load_average()}"
            )
            sides = [fresh_side(engine, workdir, str(events), schemas) for engine in engines]
            for side in sides:
                engine = side.engine
                load_s = load(side, messages)
                builds[engine, events] = done = build(side)
                report(
                    f"  {LABELS[engine]:<10} load {load_s:6.1f} s  build {done.describe()}  "
                    f"build/load {done.seconds / load_s:.2f}"
                )
            if events == max(sizes) and nightly_events:
                nightly(tenant, messages, sides, nightly_events, events, report)
            messages.unlink()
        finally:
            tenant.stop()
    low, high = min(sizes), max(sizes)
    if low != high:
        for engine in engines:
            big, small = builds[engine, high], builds[engine, low]
            report(
                f"  {LABELS[engine]:<10} build {high:,} / {low:,} events = "
                f"{big.seconds / small.seconds:.1f}x (dbt {big.dbt_seconds / small.dbt_seconds:.1f}x)"
                f" for {high / low:.0f}x the events   (target <= ~{high / low:.0f}x)"
            )


def nightly(
    tenant: EmulatorProcess,
    first: Path,
    sides: list[Side],
    count: int,
    events: int,
    report: Callable[[str], None],
) -> None:
    """A night's events on top of the loaded tables: the load and the full rebuild."""
    tenant.control("events", {"count": count})
    messages = first.with_name("messages-nightly.jsonl")
    records = extract(tenant, messages, state=first.with_suffix(".state.json"))
    report(
        f"nightly: {count:,} new events after {events:,} (the tap's output: {records:,} "
        "records, bookmark instant and full-table streams included), load, then full rebuild; "
        f"{load_average()}"
    )
    for side in sides:
        load_s = load(side, messages)
        done = build(side)
        report(f"  {LABELS[side.engine]:<10} load {load_s:6.1f} s  rebuild {done.describe()}")
    messages.unlink()
