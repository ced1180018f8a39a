"""The two headline ratios side by side (``--only ratios`` of scripts/benchmark.py): on one
emulator of ``--mid-events`` events (50,000) without latency, in the same rounds, alternating:

- the raw loop (scripts/raw_loop.py) and the tap alone (stdout to /dev/null): tap/raw, the
  ratio of records per second (target >= 0.60);
- the raw fetch+COPY loop (``raw_loop.py --copy``) and ``meltano --environment emulator run
  tap-accessgov target-postgres`` as meltano.yml ships it: meltano-run/raw, the ratio of rows
  per second (target >= 0.25).

``--baseline REV`` also runs another revision's tap (its ``tap_accessgov`` package from git,
first on PYTHONPATH, for the tap alone and inside Meltano's run; everything else is this
checkout's: emulator, loaders, meltano.yml) in the same rounds, so a change is measured
against what it changes on the same loaded machine. The machine's load average is printed:
on a shared 2-core machine the tap, Meltano and the target compete with whatever else runs,
and the ratios fall with the load.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import typing as t

from bench_runs import (
    catalog_for,
    meltano_env,
    meltano_run,
    raw_loop,
    run,
    start_emulator,
    tap_command,
)
from support import ROOT, Warehouse, install_plugins, libpq_url

if t.TYPE_CHECKING:
    import argparse
    from pathlib import Path

THIS = "this checkout"


def export_revision(revision: str, workdir: Path) -> Path:
    """``revision``'s tap_accessgov package in a directory of its own (for PYTHONPATH)."""
    directory = workdir / f"baseline-{revision.replace('/', '_')}"
    directory.mkdir()
    archive = subprocess.run(
        ["git", "archive", revision, "tap_accessgov"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
    return directory


def ratios(args: argparse.Namespace, workdir: Path, report: t.Callable[[str], None]) -> None:
    install_plugins()
    events = args.mid_events
    taps: dict[str, dict[str, str]] = {THIS: {}}
    if args.baseline:
        taps[args.baseline] = {"PYTHONPATH": str(export_revision(args.baseline, workdir))}
    warehouse = Warehouse()
    emulator = start_emulator(
        workdir, "ratios", "--events", str(events), "--exclusion-entitlements", "1"
    )
    try:
        catalog = catalog_for(emulator.config_path, "grant_feed", workdir)
        times: dict[str, list[float]] = {"raw": [], "copy": []}
        for name in taps:
            times[f"tap {name}"], times[f"run {name}"] = [], []
        load_before = os.getloadavg()[0]
        for _ in range(args.rounds):
            times["raw"].append(run(raw_loop(emulator.config_path))[0])
            for name, env in taps.items():
                times[f"tap {name}"].append(
                    run(tap_command(emulator.config_path, catalog), env={**os.environ, **env})[0]
                )
            schema = warehouse.new_schema("copy")
            url = libpq_url(warehouse.url)
            times["copy"].append(
                run(raw_loop(emulator.config_path, "--copy", url, f"{schema}.grant_feed"))[0]
            )
            loaded = {"raw fetch+COPY": warehouse.rows(f"{schema}.grant_feed")}
            warehouse.drop(schema)
            for name, env in taps.items():
                schema = warehouse.new_schema("run")
                elapsed, _ = meltano_run(
                    {**meltano_env(emulator, schema, workdir), **env}, workdir / "meltano.log"
                )
                times[f"run {name}"].append(elapsed)
                loaded[f"meltano run ({name})"] = warehouse.rows(f"{schema}.grant_feed")
                warehouse.drop(schema)
            if wrong := {side: rows for side, rows in loaded.items() if rows != events}:
                sys.exit(f"rows loaded {wrong}, events {events}")
        median = {side: statistics.median(values) for side, values in times.items()}
        report(
            f"ratios side by side, grant_feed: {events:,} events, no latency, {args.rounds} "
            f"rounds alternating (load average {load_before:.1f} -> {os.getloadavg()[0]:.1f})"
        )
        report(
            f"  raw loop {median['raw']:.2f} s, raw fetch+COPY {median['copy']:.2f} s "
            f"(medians); rows in PostgreSQL = {events:,} every run"
        )
        for name in taps:
            tap_s, run_s = median[f"tap {name}"], median[f"run {name}"]
            report(
                f"  {name}: tap {tap_s:.2f} s, tap/raw = {median['raw'] / tap_s:.2f} "
                f"(target >= 0.60); meltano run {run_s:.2f} s, "
                f"run/raw fetch+COPY = {median['copy'] / run_s:.2f} (target >= 0.25)"
            )
    finally:
        emulator.stop()
        warehouse.close()
