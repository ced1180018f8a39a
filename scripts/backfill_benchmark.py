"""The ``backfill`` section of scripts/benchmark.py: a real tenant's first sync.

A tenant answers each page in about 100-300 ms, so a backfill is bound by latency. Against an
emulator with skewed event dates (``--distribution skewed``) and 100 ms per request, side by
side in one run, alternating, medians:

1. the tap with default settings versus a sequential raw loop (requests, pages of 100): the
   speed-up (goal >= 6x at 8 in flight; the limit is 8x);
2. ``meltano run tap-accessgov target-postgres`` as shipped versus the same with the
   sequential tap (``max_concurrency`` 1): the end-to-end gain and where the time goes now;
3. the tap without latency, default settings versus ``max_concurrency`` 1 (today's single
   query), on a uniform feed: no regression when the service answers at once;

and two figures: the share of events read twice when a backfill is killed with SIGKILL and
resumed from its last STATE, and the run time and exactness against a service that allows
only 2 requests in flight (429 + Retry-After beyond them).
"""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import time
import typing as t

import bench_runs as bench
from support import EmulatorProcess, Warehouse, install_plugins

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
    config: Path, catalog: Path, workdir: Path, kill_after: int
) -> tuple[int, int]:
    """Records delivered by a run killed with SIGKILL after ``kill_after`` records, and by
    the run resumed from the last STATE the killed one wrote."""
    command = bench.tap_command(config, catalog)
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
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
    second = subprocess.run([*command, "--state", str(state_path)], capture_output=True, check=True)
    return delivered, _records_and_state(second.stdout)[0]


def backfill(args: argparse.Namespace, workdir: Path, report: t.Callable[[str], None]) -> None:
    events = args.backfill_events
    emulators: list[EmulatorProcess] = []

    def start(name: str, *options: str) -> EmulatorProcess:
        emulators.append(
            bench.start_emulator(workdir, name, "--exclusion-entitlements", "1", *options)
        )
        return emulators[-1]

    try:
        slow = start(
            "backfill", "--events", str(events), "--distribution", "skewed", "--latency", "0.1"
        )
        catalog = bench.catalog_for(slow.config_path, "grant_feed", workdir)
        report(
            f"backfill: {events:,} skewed events, 100 ms per request, pages of 100, "
            f"{args.rounds} rounds alternating"
        )
        tap_times, raw_times = [], []
        for _ in range(args.rounds):
            tap_times.append(bench.run(bench.tap_command(slow.config_path, catalog))[0])
            raw_times.append(bench.run(bench.raw_loop(slow.config_path))[0])
        tap_s, raw_s = statistics.median(tap_times), statistics.median(raw_times)
        report(f"  raw sequential loop      median {raw_s:6.2f} s")
        report(f"  tap, default settings    median {tap_s:6.2f} s")
        report(f"  speed-up = {raw_s / tap_s:.1f}x   (goal >= 6x at 8 in flight)")

        delivered, resumed = _killed_then_resumed(slow.config_path, catalog, workdir, events // 2)
        twice = delivered + resumed - events
        report(
            f"  killed (SIGKILL) after half the records, resumed from its last STATE: {delivered:,} + "
            f"{resumed:,} records, {twice:,} read twice ({twice / events:.1%} of the feed)"
        )

        limited = start(
            "limited",
            "--events",
            str(events),
            "--distribution",
            "skewed",
            "--latency",
            "0.1",
            "--max-in-flight",
            "2",
        )
        started = time.perf_counter()
        out = subprocess.run(
            bench.tap_command(limited.config_path, catalog), capture_output=True, check=True
        )
        limited_s = time.perf_counter() - started
        records = _records_and_state(out.stdout)[0]
        throttled = limited.control("stats")["throttled"]
        report(
            f"  service allowing 2 requests in flight: {limited_s:.2f} s, {records:,} records "
            f"({'exact' if records == events else 'NOT EXACT'}), {throttled} answers 429"
        )

        if args.backfill_e2e:
            install_plugins()
            report(
                f"backfill end to end: meltano run tap-accessgov target-postgres, {events:,} "
                f"skewed events, 100 ms per request, {args.rounds} rounds alternating"
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
                        env = {**bench.meltano_env(slow, schema, workdir), **extra}
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

        fast = start("nolatency", "--events", str(args.mid_events))
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
        for emulator in emulators:
            emulator.stop()
