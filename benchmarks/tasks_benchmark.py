"""Requests and time of the ``tasks`` stream on a large tenant: a first sync, then the nightly
run after a day of activity, against an emulator process answering each request after
``--latency`` seconds (default 100 ms), pages of 100.

The tenant has about 200,000 tasks (``--events 330000``: a task behind each ticketed grant
event, plus requests the feed never saw, offboardings and access review decisions). The first
sync runs with each ``--workers`` count (the tap's ``max_concurrency``), side by side; then a
day passes on the service (``--closed`` open tasks are decided, the events of one day of the
feed bring their tasks) and the nightly run reads from the first sync's final STATE. The
figures are the emulator's request counters, the records the tap wrote and the wall time of
the tap's command line (its start-up, about 3 s here, included). Every worker count must deliver the same tasks, and a nightly run at
least the decided ones.

    .venv/bin/python -m benchmarks.tasks_benchmark [--events 330000] [--latency 0.1] [--workers 8,1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import typing as t
from pathlib import Path

from harness import bench_runs as bench
from harness.support import EmulatorProcess

SEARCH = "/api/v1/search/tasks"


def sync(
    emulator: EmulatorProcess,
    catalog: Path,
    workdir: Path,
    workers: int,
    state: dict[str, t.Any] | None = None,
) -> bench.TapRun:
    """One run of the tap's command line for ``tasks``: the search requests it sent, the
    records it wrote, its wall time and its final STATE."""
    config = bench.with_settings(
        emulator, workdir, f"workers-{workers}", max_concurrency=workers, page_size=100
    )
    return bench.timed_tap_run(emulator, config, catalog, workdir, SEARCH, state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=330_000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--workers", default="8,1", help="max_concurrency values, comma-separated")
    parser.add_argument("--closed", type=int, default=1000, help="tasks decided in the day")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        options = ["--events", str(args.events), "--latency", str(args.latency)]
        emulator = EmulatorProcess(workdir, "tasks", *options, timeout=300)
        try:
            catalog = bench.catalog_for(emulator.config_path, "tasks", workdir)
            warm_up(emulator, catalog, workdir)
            firsts = {w: sync(emulator, catalog, workdir, w) for w in workers}
            counts = {run.records for run in firsts.values()}
            if len(counts) != 1:
                sys.exit(f"the first syncs delivered different numbers of tasks: {counts}")
            day = args.events // 180
            closed = emulator.control("close-tasks", {"count": args.closed})["closed"]
            emulator.control("events", {"count": day})
            warm_up(emulator, catalog, workdir)
            state = firsts[workers[0]].state
            nightly = {w: sync(emulator, catalog, workdir, w, state) for w in workers}
            if any(run.records < len(closed) for run in nightly.values()):
                sys.exit("a nightly run missed tasks decided since the first sync")
        finally:
            emulator.stop()
    print(
        f"tasks stream, {args.latency * 1000:.0f} ms per request, pages of 100; "
        f"tenant: {counts.pop():,} tasks"
    )
    print(f"{'run':<34}{'workers':>8}{'requests':>10}{'records':>10}{'seconds':>10}")
    nightly_name = f"nightly ({len(closed)} decided, {day} events)"
    for name, runs in (("first sync", firsts), (nightly_name, nightly)):
        for w, run in runs.items():
            print(f"{name:<34}{w:>8}{run.requests:>10,}{run.records:>10,}{run.seconds:>10.1f}")
    first, night = firsts[workers[0]], nightly[workers[0]]
    print(
        f"nightly / first sync ({workers[0]} workers): {night.requests / first.requests:.4f} of "
        f"the requests, {night.seconds / first.seconds:.3f} of the time"
    )
    if len(workers) > 1:
        slow, fast = firsts[workers[-1]], firsts[workers[0]]
        print(
            f"first sync, {workers[0]} workers vs {workers[-1]}: "
            f"{slow.seconds / fast.seconds:.1f}x faster"
        )


def warm_up(emulator: EmulatorProcess, catalog: Path, workdir: Path) -> None:
    """The emulator builds its tasks on the first search, and again after events are added (a
    cost of the emulator, not of the tap): a run from a bookmark after every task (two small
    searches) has it done before a measured run."""
    bookmark = {"replication_key": "updatedAt", "replication_key_value": "2100-01-01T00:00:00Z"}
    sync(emulator, catalog, workdir, 1, {"bookmarks": {"tasks": bookmark}})


if __name__ == "__main__":
    main()
