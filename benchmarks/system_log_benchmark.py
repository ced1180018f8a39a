"""Requests and time of the ``system_log`` stream on a large log: a first sync against one
sequential reader, a run killed at 70% and resumed, then a nightly run, against an emulator
process answering each request after ``--latency`` seconds (default 100 ms), pages of 100.

The log holds ``--background`` (default 500,000) sign-ins and integrations' reads, denser
towards the end and with bursts at one instant, besides what the feed's ``--events`` did. Side
by side in one run:

1. the first sync: the tap's command line (``max_concurrency`` 8, its catalog selecting
   ``system_log``) versus the plainest client, one sequential loop of ListEvents (oldest
   first, one page after another, each event as a JSON line to /dev/null): the speed-up
   (goal: at least 5x), the requests of each, and that both read as many events;
2. the tap killed with SIGKILL after 70% of its records and resumed from its last STATE: the
   events read twice (goal: no more than the windows in flight);
3. the nightly run after a day of activity (``--nightly`` grant events, each logged, and the
   calls of the runs before): its requests against the new events (goal: in proportion).

    .venv/bin/python -m benchmarks.system_log_benchmark [--background 500000] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.backfill_benchmark import _killed_then_resumed
from harness import bench_runs as bench
from harness.support import EmulatorProcess

LOG = "/api/v1/systemlog/events"


def raw_run(emulator: EmulatorProcess, config: Path, until: str) -> bench.TapRun:
    """The sequential reader: ListEvents oldest first, up to ``until``."""
    body = {"pageSize": 100, "sortDirection": "SORT_DIRECTION_ASC", "until": until}
    return bench.sequential_read(emulator, config, LOG, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--background", type=int, default=500_000)
    parser.add_argument("--events", type=int, default=2_000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--nightly", type=int, default=2_000, help="grant events in the day")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        # Tokens that outlive the sequential reader's ten minutes (it takes one, as the
        # plainest client does; the tap renews its own).
        options = ["--events", str(args.events), "--log-background", str(args.background)]
        options += ["--token-lifetime", "7200"]
        emulator = EmulatorProcess(
            workdir, "log", *options, "--latency", str(args.latency), timeout=600
        )
        try:
            config = bench.with_settings(
                emulator, workdir, "tap", max_concurrency=args.workers, page_size=100
            )
            settings = json.loads(config.read_text())
            settings.pop("start_date", None)  # the whole log: the tap finds where it begins
            config.write_text(json.dumps(settings))
            catalog = bench.catalog_for(config, "system_log", workdir)
            # The emulator builds its log on the first read (a cost of the emulator): once,
            # before anything is timed.
            emulator.control("settings", {"latency": 0})
            recent = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
            bookmark = {"replication_key": "time", "replication_key_value": recent}
            bench.timed_tap_run(
                emulator, config, catalog, workdir, LOG, {"bookmarks": {"system_log": bookmark}}
            )
            emulator.control("settings", {"latency": args.latency})
            first = bench.timed_tap_run(emulator, config, catalog, workdir, LOG)
            until = first.state["bookmarks"]["system_log"]["replication_key_value"]
            raw = raw_run(emulator, config, until)
            if raw.records != first.records:
                sys.exit(
                    f"the tap read {first.records:,} events, the sequential reader {raw.records:,}"
                )
            delivered, resumed = _killed_then_resumed(
                config, catalog, workdir, int(first.records * 0.7), None
            )
            read_twice = delivered + resumed - first.records
            emulator.control("events", {"count": args.nightly})
            nightly = bench.timed_tap_run(emulator, config, catalog, workdir, LOG, first.state)
        finally:
            emulator.stop()
    print(
        f"system_log stream, {args.latency * 1000:.0f} ms per request, pages of 100, "
        f"{args.workers} in flight; log: {first.records:,} events"
    )
    rows = (
        ("first sync, the tap", first),
        ("first sync, one sequential reader", raw),
        (f"nightly ({args.nightly:,} grant events, runs' calls)", nightly),
    )
    bench.print_runs(rows)
    print(
        f"killed after 70% ({delivered:,} records) and resumed ({resumed:,}): "
        f"{read_twice:,} events read twice ({read_twice / first.records:.1%} of the log)"
    )
    print(
        f"nightly: {nightly.requests} requests for {nightly.records:,} new events "
        f"({nightly.records / max(nightly.requests, 1):.0f} per request; first sync "
        f"{first.records / first.requests:.0f})"
    )


if __name__ == "__main__":
    main()
