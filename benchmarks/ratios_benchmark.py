"""The two headline ratios side by side (``--only ratios`` of benchmarks/benchmark.py): at each of
``--ratio-events`` (50,000 and 200,000), on one emulator without latency, in the same rounds,
alternating:

- the raw loop (benchmarks/raw_loop.py: decode each page, write each event as a JSON line) and
  the tap alone with the catalog Meltano passes (discovered, only ``grant_feed`` selected;
  stdout to /dev/null): tap/raw, the ratio of records per second (target >= 0.60);
- the raw fetch+COPY loop (``raw_loop.py --copy``: ``copy.write_row`` of the ten columns into
  a table with grant_feed's primary key) and ``meltano --environment emulator run
  tap-accessgov target-postgres`` as meltano.yml ships it: meltano-run/raw, the ratio of rows
  per second (target >= 0.30, issue 68; 0.25 before it).

The server costs next to nothing: the emulator is frozen (``--frozen``: its data never
changes, so each answer is built once and kept), and untimed runs of every side build every
answer before the timed ones: runs of each tap alone until one builds none (``warm_up``),
then one round of every side. The baselines' timed runs build none (the emulator's count is
checked); a tap's may, where its windows grew under load and split (the loader and the
server share the machine's cores with it), and the answers they built are said beside it. A
server that built each page again would add its seconds to both sides of a ratio and move it
towards 1 (the raw loop waits for each page; the tap overlaps them). So that the tap asks the
same pages in every run, its settings name an ``end_date`` a day after the data (both
sides read every event): without one, its windows are cut up to the run's own start and
every run asks pages the server has not built yet. Nothing else differs from what Meltano
passes: the discovered catalog with only ``grant_feed`` selected, meltano.yml's settings.

Beside the tap, a plain SDK tap of the feed (benchmarks/plain_sdk_tap.py: one ``RESTStream``, the
SDK's paginator and msgspec writer, none of this tap's windows, retries or conformance, nor
its savings in the SDK's per-record path), run the same way: what singer-sdk gives a tap
that does nothing more; and its floor (``--floor``: the raw loop's entries, unchanged, through
the SDK's record path alone, no bookmark, no selection pass): the ratio no tap on that path
can reach beyond. And this checkout's tap with one window in flight (``max_concurrency`` 1,
for the tap alone and in Meltano's run): what its windows in flight cost on a server that
answers at once (docs/performance.md).

``--baseline REV`` also runs another revision's tap (its ``tap_accessgov`` package from git,
first on PYTHONPATH for the tap alone, first on the tap plugin's path inside Meltano's run,
``baseline_inside_meltano``; everything else is this
checkout's: emulator, loaders, meltano.yml) in the same rounds, so a change is measured
against what it changes on the same loaded machine. ``--ratio-batch`` also runs this
checkout's tap with ``batch_config`` (BATCH files of 10,000 records, gzipped, then without
compression), alone and inside Meltano's run (``TAP_ACCESSGOV_BATCH_CONFIG``): what the
target reading files instead of a message per record buys (docs/performance.md). The
machine's load average is printed:
on a shared 2-core machine the tap, Meltano and the target compete with whatever else runs,
and the ratios fall with the load.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import typing as t
from pathlib import Path

from harness.bench_runs import (
    catalog_for,
    meltano_env,
    meltano_run,
    raw_loop,
    run,
    start_emulator,
    tap_command,
    with_settings,
)
from harness.support import ROOT, Warehouse, install_plugins, libpq_url

if t.TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

    from harness.support import EmulatorProcess

THIS = "this checkout"
ONE_WINDOW = "this checkout, max_concurrency 1"
BATCH = "this checkout, BATCH files (gzip)"
PLAIN_BATCH = "this checkout, BATCH files (no compression)"
MAX_WARM_UPS = 12  # untimed runs of a tap alone, at most, until one builds no answer
# run as a module from the repository's root (``run``'s directory): it imports the raw loop's
# token request from the package
PLAIN_SDK_TAP = "benchmarks.plain_sdk_tap"


class Side(t.NamedTuple):
    """One tap in the rounds: the environment it runs in (a baseline's PYTHONPATH) and the
    settings it adds to the tap's, given both ways: in its config file when it runs alone,
    as TAP_ACCESSGOV_* variables in Meltano's run."""

    env: dict[str, str]
    settings: dict[str, t.Any]


def export_revision(revision: str, workdir: Path) -> Path:
    """``revision``'s tap_accessgov package in a directory of its own (for PYTHONPATH)."""
    directory = workdir / f"baseline-{revision.replace('/', '_')}"
    directory.mkdir()
    archive = subprocess.run(
        ["git", "archive", revision, "tap_accessgov"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
    # compiled, as this checkout's is (tasks.py compile_checkout): the same start-up on both sides
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(directory)], check=True)
    return directory


# Meltano drops PYTHONPATH from a plugin's environment (PluginInvoker.env, 4.4: "Ensure
# Meltano venv is not inherited"): inside `meltano run` a baseline ran this checkout's tap
# until 2026-12-07. It is put first on the tap plugin's path by a .pth file of the plugin's
# venv instead, there for the benchmark's length, which reads this variable (unset: nothing).
BASELINE_PATH = "ACCESSGOV_BENCH_TAP_PATH"


@contextlib.contextmanager
def baseline_inside_meltano() -> Iterator[None]:
    """The tap plugin's venv puts ``$ACCESSGOV_BENCH_TAP_PATH`` first on its path (a .pth
    file), until the block ends."""
    (site,) = ROOT.glob(".meltano/extractors/tap-accessgov/venv/lib/python*/site-packages")
    pth = site / f"accessgov_bench_baseline_{os.getpid()}.pth"  # two benchmarks at once
    pth.write_text(
        f"import os, sys; path = os.environ.get({BASELINE_PATH!r}); path and sys.path.insert(0, path)\n"
    )
    try:
        yield
    finally:
        pth.unlink(missing_ok=True)


def ranges_at_once(log: Path) -> str:
    """How many time ranges a tap run read at once at most, from its log line (windowed.py):
    the windows in flight are what set a tap apart from its one-query form on this server."""
    said = re.search(r"read (\d+) time range\(s\) at once at most", log.read_text())
    return said[1] if said else "-"


def ratios(args: argparse.Namespace, workdir: Path, report: t.Callable[[str], None]) -> None:
    install_plugins()
    taps = {THIS: Side({}, {}), ONE_WINDOW: Side({}, {"max_concurrency": 1})}
    if args.ratio_batch:  # BATCH files (JSON lines) instead of RECORD messages
        storage = {"root": (workdir / "batch").as_uri()}
        for side, compression in ((BATCH, "gzip"), (PLAIN_BATCH, "none")):
            encoding = {"format": "jsonl", "compression": compression}
            batch = {"encoding": encoding, "storage": storage, "batch_size": 10_000}
            taps[side] = Side({}, {"batch_config": batch})
    if args.baseline:
        directory = str(export_revision(args.baseline, workdir))
        taps[args.baseline] = Side({"PYTHONPATH": directory, BASELINE_PATH: directory}, {})
    warehouse = Warehouse()
    try:
        with baseline_inside_meltano() if args.baseline else contextlib.nullcontext():
            for events in args.ratio_events:
                emulator = start_emulator(
                    workdir,
                    f"ratios{events}",
                    "--events",
                    str(events),
                    "--exclusion-entitlements",
                    "1",
                    "--frozen",
                )
                try:
                    side_by_side(emulator, events, taps, args.rounds, warehouse, workdir, report)
                finally:
                    emulator.stop()
    finally:
        warehouse.close()


def answers_built(emulator: EmulatorProcess) -> int:
    return int(emulator.control("stats")["frozen_answers_built"])


@contextlib.contextmanager
def counted(
    emulator: EmulatorProcess, built: collections.Counter[str], side: str
) -> Iterator[None]:
    """Count into ``built[side]`` the answers the emulator builds inside the block."""
    before = answers_built(emulator)
    yield
    built[side] += answers_built(emulator) - before


def warm_up(emulator: EmulatorProcess, command: list[str], env: dict[str, str]) -> int:
    """Runs of a tap alone, untimed, until one builds no answer (at most ``MAX_WARM_UPS``):
    how many it took. A tap splits its windows only while it reads several at once, and it
    reads several while it waits for answers being built (a server that costs about what
    the tap does per page); a run that split a window early leaves the rest of the window
    unbuilt, which the next run, reading it whole, waits for in turn. Once every page of
    the whole windows is built, nothing waits, nothing is split, and every run asks the
    same pages (measured at 200,000 events: 328 new answers a run for six runs, then
    none)."""
    for runs in range(1, MAX_WARM_UPS + 1):
        before = answers_built(emulator)
        run(command, env={**os.environ, **env})
        if answers_built(emulator) == before:
            return runs
    return MAX_WARM_UPS


def side_by_side(
    emulator: EmulatorProcess,
    events: int,
    taps: dict[str, Side],
    rounds: int,
    warehouse: Warehouse,
    workdir: Path,
    report: t.Callable[[str], None],
) -> None:
    """Untimed runs (every answer built), then ``rounds`` timed ones, alternating; the
    medians and both ratios of every tap."""
    catalog = catalog_for(emulator.config_path, "grant_feed", workdir)
    end_date = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    settings = {name: {"end_date": end_date, **tap.settings} for name, tap in taps.items()}
    configs = {
        name: with_settings(emulator, workdir, f"ratios{events}-{n}", **settings[name])
        for n, name in enumerate(taps)
    }
    times: dict[str, list[float]] = {"raw": [], "copy": [], "plain": [], "floor": []}
    for name in taps:
        times[f"tap {name}"], times[f"run {name}"] = [], []
    at_once: dict[str, list[str]] = {name: [] for name in taps}
    load_before = os.getloadavg()[0]
    warm_ups = {
        name: warm_up(emulator, tap_command(configs[name], catalog), tap.env)
        for name, tap in taps.items()
    }
    # Answers built in the timed rounds, by side: a tap whose windows grew under load (the
    # loader and the server share the machine's two cores with it) splits them and asks
    # pieces no earlier run asked; what they cost is that side's, and is said beside it.
    built_in_timed: collections.Counter[str] = collections.Counter()
    for timed in [False] + [True] * rounds:
        round_times: dict[str, float] = {}
        new: collections.Counter[str] = collections.Counter()  # answers built, by side
        with counted(emulator, new, "raw"):
            round_times["raw"] = run(raw_loop(emulator.config_path))[0]
        for name, tap in taps.items():
            command = tap_command(configs[name], catalog)
            log = workdir / "tap.log"
            with counted(emulator, new, f"tap {name}"):
                env = {**os.environ, **tap.env}
                round_times[f"tap {name}"] = run(command, env=env, log=log)[0]
            if timed:
                at_once[name].append(ranges_at_once(log))
        plain = [
            sys.executable,
            "-m",
            PLAIN_SDK_TAP,
            "--config",
            str(configs[THIS]),  # the same end_date
            "--catalog",
            str(catalog),
        ]
        with counted(emulator, new, "plain, floor"):
            round_times["plain"] = run(plain)[0]
            round_times["floor"] = run([*plain, "--floor"])[0]
        schema = warehouse.new_schema("copy")
        url = libpq_url(warehouse.url)
        copy_command = raw_loop(emulator.config_path, "--copy", url, f"{schema}.grant_feed")
        with counted(emulator, new, "copy"):
            round_times["copy"] = run(copy_command)[0]
        loaded = {"raw fetch+COPY": warehouse.rows(f"{schema}.grant_feed")}
        warehouse.drop(schema)
        for name, tap in taps.items():
            schema = warehouse.new_schema("run")
            env = {
                **meltano_env(emulator, schema, workdir),
                **{
                    f"TAP_ACCESSGOV_{key.upper()}": json.dumps(value)
                    if isinstance(value, dict)
                    else str(value)
                    for key, value in settings[name].items()
                },
                **tap.env,
            }
            with counted(emulator, new, f"run {name}"):
                round_times[f"run {name}"], _ = meltano_run(env, workdir / "meltano.log")
            loaded[f"meltano run ({name})"] = warehouse.rows(f"{schema}.grant_feed")
            warehouse.drop(schema)
        if wrong := {side: rows for side, rows in loaded.items() if rows != events}:
            sys.exit(f"rows loaded {wrong}, events {events}")
        if timed:
            built_in_timed.update(new)
            if wrong := {
                side: answers
                for side, answers in new.items()
                if answers and not side.startswith(("tap ", "run "))
            }:
                sys.exit(f"the frozen emulator built answers in a timed round: {wrong}")
            for side, seconds in round_times.items():
                times[side].append(seconds)
    built = answers_built(emulator) - sum(built_in_timed.values())
    median = {side: statistics.median(values) for side, values in times.items()}
    warm_up_runs = (
        ", ".join(f"{runs} of {name}" for name, runs in warm_ups.items())
        + ", then a round of every side"
    )
    report(
        f"ratios side by side, grant_feed: {events:,} events, no latency, frozen server "
        f"({built:,} answers, built in untimed runs: {warm_up_runs}), {rounds} rounds alternating "
        f"(load average {load_before:.1f} -> {os.getloadavg()[0]:.1f})"
    )
    report(
        f"  raw loop {median['raw']:.2f} s ({events / median['raw']:,.0f} records/s), raw "
        f"fetch+COPY {median['copy']:.2f} s ({events / median['copy']:,.0f} rows/s) (medians); "
        f"rows in PostgreSQL = {events:,} every run"
    )
    report(
        f"  a plain SDK tap (benchmarks/plain_sdk_tap.py): {median['plain']:.2f} s, "
        f"plain/raw = {median['raw'] / median['plain']:.2f}"
    )
    report(
        f"  the SDK's record path alone (plain_sdk_tap.py --floor): {median['floor']:.2f} s, "
        f"floor/raw = {median['raw'] / median['floor']:.2f}"
    )
    for name in taps:
        tap_s, run_s = median[f"tap {name}"], median[f"run {name}"]
        report(
            f"  {name}: tap {tap_s:.2f} s, tap/raw = {median['raw'] / tap_s:.2f} "
            f"(target >= 0.60); meltano run {run_s:.2f} s ({events / run_s:,.0f} rows/s), "
            f"run/raw fetch+COPY = {median['copy'] / run_s:.2f} (target >= 0.30)"
        )
        if any(ranges != "-" for ranges in at_once[name]):  # not read as one query
            report(f"    time ranges read at once at most, tap alone: {', '.join(at_once[name])}")
        if asked := built_in_timed[f"tap {name}"] + built_in_timed[f"run {name}"]:
            report(
                f"    answers built in its timed runs: {asked:,} (tap alone "
                f"{built_in_timed[f'tap {name}']:,}, meltano run {built_in_timed[f'run {name}']:,}"
                "): its windows grew under load and it asked pieces no earlier run had"
            )
