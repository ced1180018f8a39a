"""Benchmark section ``snapshots``: what telling today's full-table rows from removed ones costs.

Two candidates, loading the same tenant (all streams: the grant feed with ``--mid-events``
events, 40 entitlements with exclusions, their users) into PostgreSQL with target-postgres as
meltano.yml ships it (COPY, no target-side validation), alternating, each run twice into one
schema (the second run is the nightly case: the tables exist and hold the previous run):

- snapshot markers (shipped): ``snapshotAt`` in the full-table rows and their key, the
  ``full_table_snapshots`` stream; no ``_sdc_*`` columns (``add_record_metadata: false``);
- ACTIVATE_VERSION: the same tap with ``emit_activate_version_messages: true``, and the target
  with ``add_record_metadata: true`` and ``activate_version: true`` (soft delete), which it
  needs for it: ``_sdc_*`` columns on every stream, the grant feed's included.

The tap is piped into the target directly (``tap | target``), not through ``meltano run``:
Meltano passes a plugin only the settings meltano.yml declares, and the tap's
``emit_activate_version_messages`` is not one of them. Both candidates run the same way.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import typing as t
from pathlib import Path

from harness.bench_runs import start_emulator
from harness.support import ROOT, TAP, EmulatorProcess, Warehouse, install_plugins

TARGET = ROOT / ".meltano/loaders/target-postgres/venv/bin/target-postgres"

# target-postgres as meltano.yml ships it, plus what differs per candidate.
SHIPPED_TARGET = {"use_copy": True, "validate_records": False, "add_record_metadata": False}
CANDIDATES: dict[str, tuple[dict[str, t.Any], dict[str, t.Any]]] = {
    "snapshot markers (shipped)": ({}, {**SHIPPED_TARGET, "activate_version": False}),
    "ACTIVATE_VERSION + _sdc metadata": (
        {"emit_activate_version_messages": True},
        {**SHIPPED_TARGET, "add_record_metadata": True, "activate_version": True},
    ),
}


def load(
    emulator: EmulatorProcess,
    tap_settings: dict[str, t.Any],
    target_settings: dict[str, t.Any],
    warehouse: Warehouse,
    schema: str,
    workdir: Path,
) -> float:
    """Wall seconds of ``tap-accessgov | target-postgres`` into ``schema`` of the warehouse."""
    tap_config = workdir / "snapshots-tap.json"
    tap_config.write_text(json.dumps({**emulator.config, **tap_settings}))
    target_config = workdir / "snapshots-target.json"
    target_config.write_text(
        json.dumps(
            {**target_settings, "sqlalchemy_url": warehouse.url, "default_target_schema": schema}
        )
    )
    log = workdir / "snapshots.log"
    started = time.perf_counter()
    with log.open("w") as errors:
        tap = subprocess.Popen(
            [str(TAP), "--config", str(tap_config)],
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=ROOT,
        )
        target = subprocess.Popen(
            [str(TARGET), "--config", str(target_config)],
            stdin=tap.stdout,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            cwd=ROOT,
        )
        assert tap.stdout is not None
        tap.stdout.close()
        statuses = (tap.wait(), target.wait())
    elapsed = time.perf_counter() - started
    if statuses != (0, 0):
        sys.exit(f"tap | target failed {statuses}; its log: {log}\n{log.read_text()[-3000:]}")
    return elapsed


def spread(times: list[float]) -> str:
    return f"{min(times):.1f}-{max(times):.1f} s"


def full_table_snapshots(
    args: argparse.Namespace, workdir: Path, report: t.Callable[[str], None]
) -> None:
    install_plugins("loader", "target-postgres")
    events = args.mid_events
    emulator = start_emulator(workdir, "snapshots", "--events", str(events))
    warehouse = Warehouse()
    try:
        report(
            f"full-table snapshots: all streams ({events:,} grant events, 40 entitlements with "
            f"exclusions) into PostgreSQL, tap | target-postgres, {args.rounds} rounds "
            "alternating, each candidate twice into one schema"
        )
        first: dict[str, list[float]] = {name: [] for name in CANDIDATES}
        second: dict[str, list[float]] = {name: [] for name in CANDIDATES}
        rows: dict[str, dict[str, int]] = {}
        for _ in range(args.rounds):
            for name, (tap_settings, target_settings) in CANDIDATES.items():
                schema = warehouse.new_schema("snapshots")
                first[name].append(
                    load(emulator, tap_settings, target_settings, warehouse, schema, workdir)
                )
                second[name].append(
                    load(emulator, tap_settings, target_settings, warehouse, schema, workdir)
                )
                rows[name] = {
                    table: warehouse.rows(f"{schema}.{table}")
                    for table in ("grant_feed", "automation_exclusions", "users")
                }
                warehouse.drop(schema)
        base = statistics.median(second["snapshot markers (shipped)"])
        for name in CANDIDATES:
            again = statistics.median(second[name])
            counts = ", ".join(f"{table} {n:,}" for table, n in rows[name].items())
            report(
                f"  {name:<34} first run {statistics.median(first[name]):6.2f} s "
                f"({spread(first[name])}), next run {again:6.2f} s ({spread(second[name])}; "
                f"{again / base:.2f}x)"
            )
            report(f"  {'':<34} rows after two runs: {counts}")
    finally:
        warehouse.close()
        emulator.stop()
