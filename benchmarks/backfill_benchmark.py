"""The ``backfill`` section of benchmarks/benchmark.py: a real tenant's first sync.

A tenant answers each page in about 100-300 ms, so a backfill is bound by latency. The service
does not document the order of the feed, nor does the tap know where a tenant's data begins.
Against emulators whose events crowd into the recent past (``--distribution recent``: 70% in
the last tenth of 60 days) at 100 ms per request, for every feed order the emulator serves
(``--feed-order``: ascending, descending, near-chronological, none) and every kind of
``start_date`` (at the data, two years before it, unset), side by side in one run,
alternating, medians:

1. at each number of requests in flight (``--backfill-in-flight``, default 8, the tap's
   default, and 16, its most), the tap at that ``max_concurrency`` versus a sequential raw
   loop (requests, pages of 100): the speed-up (issue 68's goal: >= 7x at 100,000 events,
   >= 12x at 16 in flight; at 8 that is this machine's ceiling, docs/backfills.md), the tap's
   requests, and how busy its slots were, measured by the emulator (the requests in flight
   on average over the most allowed; the ramp, before the most at once were first reached,
   and the tail, after they were last left: what keeps a slot idle); beside them the limit
   on this machine: the same raw loop reading as many windows of equal counts at once, cut
   at the dates of every event (read beforehand, without latency): what a client that knew
   the data in advance does; and the ceiling of any tap on the SDK here: the limit plus
   what the tap's imports take over the raw loop's (``python -c "import
   tap_accessgov.tap"`` versus ``python -c "import requests"``, timed in the same rounds);
2. the events read twice when the tap is killed with SIGKILL after 70% of the records and
   resumed from its last STATE (goal: no more than the windows in flight);

then, on the near-chronological feed with ``start_date`` at the data:

3. the run time and exactness against a service that allows only 2 requests in flight (429 +
   Retry-After beyond them);
4. ``meltano run tap-accessgov target-postgres`` as shipped versus the same with the
   sequential tap (``max_concurrency`` 1): the end-to-end gain;
5. the tap without latency, default settings versus ``max_concurrency`` 1 (today's single
   query), on a uniform feed: no regression when the service answers at once.

``--backfill-orders`` and ``--backfill-starts`` run a subset of the table; ``--baseline REV``
adds another revision's tap to the table (its ``tap_accessgov`` package first on PYTHONPATH),
in the same rounds: before and after a change, side by side.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import typing as t

from benchmarks.ratios_benchmark import export_revision
from harness import bench_runs as bench
from harness.support import TAP, EmulatorProcess, Warehouse, install_plugins

if t.TYPE_CHECKING:
    import argparse
    from pathlib import Path


def _records_and_state(output: bytes) -> tuple[int, dict[str, t.Any] | None]:
    records, state = 0, None
    for line in output.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            break  # a line cut by SIGKILL
        if message["type"] == "RECORD":
            records += 1
        elif message["type"] == "STATE":
            state = message["value"]
    return records, state


def _killed_then_resumed(
    config: Path, catalog: Path, workdir: Path, kill_after: int, env: dict[str, str] | None
) -> tuple[int, int]:
    """Records delivered by a run killed with SIGKILL after ``kill_after`` records, and by
    the run resumed from the last STATE the killed one wrote."""
    command = bench.tap_command(config, catalog)
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert first.stdout is not None
    lines = []
    for line in first.stdout:
        lines.append(line)
        if b'"type":"RECORD"' in line.replace(b" ", b""):
            kill_after -= 1
            if kill_after == 0:
                first.send_signal(signal.SIGKILL)
                break
    lines.append(first.stdout.read())
    first.wait()
    delivered, state = _records_and_state(b"".join(lines))
    state_path = workdir / "killed-state.json"
    state_path.write_text(json.dumps(state or {}))
    second = subprocess.run(
        [*command, "--state", str(state_path)], capture_output=True, check=True, env=env
    )
    return delivered, _records_and_state(second.stdout)[0]


ORDERS = ("ascending", "descending", "near", "none")
STARTS = ("data", "early", "unset")  # start_date at the data, two years before it, unset
START_NAMES = {"data": "at the data", "early": "two years early", "unset": "unset"}
TWO_YEARS = 730 * 86_400  # s
# 70% of the events in the last tenth of 60 days, 100 ms per request
RECENT = ("--distribution", "recent", "--span-days", "60", "--latency", "0.1")


def start_config(emulator: EmulatorProcess, workdir: Path, start: str) -> Path:
    """The emulator's tap config with ``start_date`` at the data (an hour before the first
    event), two years before that, or unset."""
    config = dict(emulator.config)
    if start == "early":
        at = datetime.datetime.fromisoformat(config["start_date"].replace("Z", "+00:00"))
        early = at - datetime.timedelta(seconds=TWO_YEARS)
        config["start_date"] = early.strftime("%Y-%m-%dT%H:%M:%SZ")
    elif start == "unset":
        del config["start_date"]
    path = workdir / f"{emulator.name}-{start}.json"
    path.write_text(json.dumps(config))
    return path


def known_dates(emulator: EmulatorProcess, config: Path, workdir: Path) -> Path:
    """The dates of the events ``config`` reads, read once without latency (not timed), for
    the limit's windows."""
    path = workdir / f"{config.stem}-dates.json"
    latency = emulator.control("settings", {})["latency"]
    emulator.control("settings", {"latency": 0})
    try:
        subprocess.run(bench.raw_loop(config, "--dates", str(path)), check=True)
    finally:
        emulator.control("settings", {"latency": latency})
    return path


FEED = "/api/v1/grants/feed"


def _rows(
    emulator: EmulatorProcess,
    config: Path,
    catalog: Path,
    dates: Path,
    taps: dict[str, dict[str, str] | None],
    args: argparse.Namespace,
    workdir: Path,
) -> list[str]:
    """A row's cells from the sequential loop on, one row for each number of requests in
    flight (``--backfill-in-flight``), all measured in the same rounds, alternating: the
    sequential loop; the limit and the ceiling; then each tap's time, its speed-up over the
    sequential loop, its requests, how busy its slots were (the emulator's occupancy: the
    mean requests in flight over the most allowed, from the first request to the last), the
    ramp (before the most at once were first reached) and the tail (after they were last
    left: its seconds and mean requests in flight), and the events read twice after a kill."""
    events, levels = args.backfill_events, args.backfill_in_flight
    settings = json.loads(config.read_text())
    configs = {n: workdir / f"{config.stem}-{n}.json" for n in levels}
    for in_flight, path in configs.items():
        path.write_text(json.dumps({**settings, "max_concurrency": in_flight}))
    raw_times: list[float] = []
    imports_surplus: list[float] = []
    limit_times: dict[int, list[float]] = {n: [] for n in levels}
    tap_times: dict[tuple[int, str], list[float]] = {(n, name): [] for n in levels for name in taps}
    sent: dict[tuple[int, str], list[int]] = {key: [] for key in tap_times}
    occupancy: dict[tuple[int, str], list[dict[str, t.Any]]] = {key: [] for key in tap_times}
    for _ in range(args.rounds):
        raw_times.append(bench.run(bench.raw_loop(config))[0])
        for in_flight in levels:
            for name, env in taps.items():
                emulator.control("reset-stats", {})
                command = bench.tap_command(configs[in_flight], catalog)
                tap_times[in_flight, name].append(bench.run(command, env=env)[0])
                sent[in_flight, name].append(bench.requests_made(emulator, FEED))
                occupancy[in_flight, name].append(emulator.control("stats")["in_flight"])
            limit_command = bench.raw_loop(config, "--windows", str(dates), str(in_flight))
            limit_times[in_flight].append(bench.run(limit_command)[0])
        imports_surplus.append(
            bench.run([sys.executable, "-c", "import tap_accessgov.tap"])[0]
            - bench.run([sys.executable, "-c", "import requests"])[0]
        )
    raw_s = statistics.median(raw_times)
    rows = []
    for in_flight in levels:
        limit_s = statistics.median(limit_times[in_flight])
        ceiling_s = limit_s + statistics.median(imports_surplus)
        cells = (
            f"| {raw_s:.2f} s | {in_flight} | {limit_s:.2f} s {raw_s / limit_s:.1f}x "
            f"| {ceiling_s:.2f} s {raw_s / ceiling_s:.1f}x |"
        )
        for name, env in taps.items():
            tap_s = statistics.median(tap_times[in_flight, name])
            delivered, resumed = _killed_then_resumed(
                configs[in_flight], catalog, workdir, events * 7 // 10, env
            )
            twice = delivered + resumed - events
            runs = occupancy[in_flight, name]
            busy = statistics.median(o["mean"] / in_flight for o in runs)
            ramp = statistics.median(o["ramp"]["seconds"] for o in runs)
            # the median tail with its own mean (an upper median of an even count)
            tail = sorted((o["tail"] for o in runs), key=lambda o: o["seconds"])[len(runs) // 2]
            cells += (
                f" {tap_s:.2f} s | **{raw_s / tap_s:.1f}x** "
                f"| {statistics.median(sent[in_flight, name]):.0f} | {busy:.0%} "
                f"| {ramp:.2f} s | {tail['seconds']:.2f} s at {tail['mean']:.1f} "
                f"| {twice:,} ({twice / events:.1%}) |"
            )
        rows.append(cells)
    return rows


def backfill(args: argparse.Namespace, workdir: Path, report: t.Callable[[str], None]) -> None:
    events = args.backfill_events
    emulators: dict[str, EmulatorProcess] = {}

    def start(name: str, *options: str) -> EmulatorProcess:
        emulators[name] = bench.start_emulator(
            workdir, name, "--exclusion-entitlements", "1", "--events", str(events), *options
        )
        return emulators[name]

    # This checkout's tap, and --baseline's (its tap_accessgov package first on PYTHONPATH)
    taps: dict[str, dict[str, str] | None] = {"tap": None}
    if args.baseline:
        baseline = export_revision(args.baseline, workdir)
        taps[args.baseline] = {**os.environ, "PYTHONPATH": str(baseline)}
    try:
        report(
            f"backfill: {events:,} events, 70% in the last tenth of 60 days, 100 ms per "
            f"request, pages of 100, {args.rounds} round(s) alternating; killed after 70% of "
            "the records and resumed; at each number of requests in flight (the tap's "
            "max_concurrency, the limit's windows)"
        )
        header = (
            "| feed order | start_date | sequential | in flight | limit: known windows, raw "
            "| ceiling: the limit + the tap's imports |"
        )
        for name in taps:
            header += (
                f" {name} | speed-up | requests | slots busy | ramp | tail "
                "| read twice after a kill at 70% |"
            )
        report(header)
        report("|---|---|---|---|---|---|" + "---|---|---|---|---|---|---|" * len(taps))
        catalog: Path | None = None
        for order in args.backfill_orders:
            emulator = start(order, *RECENT, "--feed-order", order)
            catalog = catalog or bench.catalog_for(emulator.config_path, "grant_feed", workdir)
            for when in args.backfill_starts:
                config = start_config(emulator, workdir, when)
                dates = known_dates(emulator, config, workdir)
                for cells in _rows(emulator, config, catalog, dates, taps, args, workdir):
                    report(f"| {order} | {START_NAMES[when]} {cells}")
        about = [bench.run([str(TAP), "--about"])[0] for _ in range(args.rounds)]
        report(
            "  the tap's own start (tap-accessgov --about, part of each tap run above): "
            f"median {statistics.median(about):.2f} s"
        )

        near = emulators.get("near") or start("near", *RECENT)
        catalog = catalog or bench.catalog_for(near.config_path, "grant_feed", workdir)
        near.control("settings", {"max_in_flight": 2})
        near.control("reset-stats", {})
        started = time.perf_counter()
        out = subprocess.run(
            bench.tap_command(near.config_path, catalog), capture_output=True, check=True
        )
        limited_s = time.perf_counter() - started
        records = _records_and_state(out.stdout)[0]
        throttled = near.control("stats")["throttled"]
        near.control("settings", {"max_in_flight": 0})
        report(
            f"  service allowing 2 requests in flight: {limited_s:.2f} s, {records:,} records "
            f"({'exact' if records == events else 'NOT EXACT'}), {throttled} answers 429"
        )

        if args.backfill_e2e:
            install_plugins()
            report(
                f"backfill end to end: meltano run tap-accessgov target-postgres, {events:,} "
                f"events, 100 ms per request, {args.rounds} rounds alternating"
            )
            database = Warehouse()
            shipped_times: list[float] = []
            sequential_times: list[float] = []
            try:
                for n in range(args.rounds):
                    for name, times, extra in (
                        ("shipped", shipped_times, {}),
                        ("sequential", sequential_times, {"TAP_ACCESSGOV_MAX_CONCURRENCY": "1"}),
                    ):
                        schema = database.new_schema(f"bench_backfill_{name}_{n}")
                        env = {**bench.meltano_env(near, schema, workdir), **extra}
                        try:
                            times.append(bench.meltano_run(env, workdir / f"{name}.log")[0])
                        finally:
                            database.drop(schema)
            finally:
                database.close()
            shipped_s, seq_s = statistics.median(shipped_times), statistics.median(sequential_times)
            report(f"  sequential tap (max_concurrency 1)  median {seq_s:6.2f} s")
            report(f"  as shipped                          median {shipped_s:6.2f} s")
            report(f"  end-to-end speed-up = {seq_s / shipped_s:.1f}x")

        fast = bench.start_emulator(
            workdir, "nolatency", "--exclusion-entitlements", "1", "--events", str(args.mid_events)
        )
        emulators["nolatency"] = fast
        fast_catalog = bench.catalog_for(fast.config_path, "grant_feed", workdir)
        single = bench.with_settings(fast, workdir, "nolatency-seq", max_concurrency=1)
        report(
            f"grant_feed without latency: {args.mid_events:,} events, {args.rounds} rounds "
            "alternating"
        )
        default_times, single_times = [], []
        for _ in range(args.rounds):
            default_times.append(bench.run(bench.tap_command(fast.config_path, fast_catalog))[0])
            single_times.append(bench.run(bench.tap_command(single, fast_catalog))[0])
        default_s, single_s = statistics.median(default_times), statistics.median(single_times)
        report(f"  one query (max_concurrency 1)  median {single_s:6.2f} s")
        report(f"  windows (default settings)     median {default_s:6.2f} s")
        report(f"  ratio one query/windows = {single_s / default_s:.2f}   (no regression: >= 1)")
    finally:
        for emulator in emulators.values():
            emulator.stop()
