"""Requests and time of the ``past_grants`` stream on a tenant with ``--ended`` (default
200,000) ended grants, against an emulator process answering each request after ``--latency``
seconds (default 100 ms), pages of 100. Side by side in one run:

1. the first sync: the tap's command line (``max_concurrency`` 8, its catalog selecting
   ``past_grants``: one search series per app of the catalog) versus the plainest client, one
   search of every ended grant read page after page (each as a JSON line to /dev/null): the
   speed-up, the requests of each, and that both read as many periods;
2. the nightly run after a day of activity (``--nightly`` grant events, some of them
   removals): its requests, against the first sync's (the search has no time filter, so
   reading the whole history again would cost the first sync's requests every night).

    .venv/bin/python -m benchmarks.past_grants_benchmark [--ended 200000] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from harness import bench_runs as bench
from harness.support import EmulatorProcess

SEARCH = "/api/v1/search/past-grants"
FEED = "/api/v1/grants/feed"


def raw_run(emulator: EmulatorProcess, config: Path) -> bench.TapRun:
    """The sequential reader: one search of every ended grant, page after page."""
    return bench.sequential_read(emulator, config, SEARCH, {"pageSize": 100})


def periods_computed(emulator: EmulatorProcess, config: Path, latency: float) -> None:
    """Have the emulator compute its ended periods now, untimed: it does so on the first
    search after its feed changed (a cost of the emulator, not of any client), here a
    one-item search answered without latency."""
    emulator.control("settings", {"latency": 0})
    bench.sequential_read(emulator, config, SEARCH, {"pageSize": 1, "appIds": ["-"]})
    emulator.control("settings", {"latency": latency})


def ended_grants(workdir: Path, events: int, before_feed: int) -> int:
    """How many ended grants a tenant of ``events`` and ``before_feed`` drawn periods holds."""
    options = ["--events", str(events), "--ended-before-feed", str(before_feed)]
    probe = EmulatorProcess(workdir, "probe", *options)
    try:
        return raw_run(probe, bench.with_settings(probe, workdir, "probe", page_size=100)).records
    finally:
        probe.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ended", type=int, default=200_000, help="ended grants, at least")
    parser.add_argument("--events", type=int, default=20_000, help="the grant feed's events")
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--nightly", type=int, default=2_000, help="grant events in the day")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        # The feed's own ended periods come on top of those over before it began, and a drawn
        # period that would overlap a later one of the same grant is no period: probe until
        # the tenant holds at least --ended.
        from_feed = ended_grants(workdir, args.events, 0)
        before_feed = max(args.ended - from_feed, 0)
        total = ended_grants(workdir, args.events, before_feed)
        while total < args.ended:
            before_feed = before_feed * (args.ended - from_feed) // (total - from_feed) + 1
            total = ended_grants(workdir, args.events, before_feed)
        options = ["--events", str(args.events), "--ended-before-feed", str(before_feed)]
        options += ["--token-lifetime", "7200"]
        emulator = EmulatorProcess(
            workdir, "past", *options, "--latency", str(args.latency), timeout=600
        )
        try:
            config = bench.with_settings(
                emulator, workdir, "tap", max_concurrency=args.workers, page_size=100
            )
            catalog = bench.catalog_for(config, "past_grants", workdir)
            periods_computed(emulator, config, args.latency)
            first = bench.timed_tap_run(emulator, config, catalog, workdir, SEARCH)
            raw = raw_run(emulator, config)
            if raw.records != first.records:
                sys.exit(f"the tap read {first.records:,} periods, the reader {raw.records:,}")
            emulator.control("events", {"count": args.nightly})
            periods_computed(emulator, config, args.latency)  # the feed grew
            nightly = bench.timed_tap_run(emulator, config, catalog, workdir, SEARCH, first.state)
            feed_requests = bench.requests_made(emulator, FEED)
        finally:
            emulator.stop()
    print(
        f"past_grants stream, {args.latency * 1000:.0f} ms per request, pages of 100, "
        f"{args.workers} in flight; {first.records:,} ended grants "
        f"({from_feed:,} of the feed's history, {first.records - from_feed:,} over before it "
        "began)"
    )
    rows = (
        ("first sync, the tap", first),
        ("first sync, one sequential reader", raw),
        (f"nightly ({args.nightly:,} grant events since)", nightly),
    )
    bench.print_runs(rows)
    requests = nightly.requests + feed_requests
    print(
        f"nightly: {nightly.requests} searches ({nightly.requests / first.requests:.1%} of the "
        f"first sync's) and {feed_requests} reads of the grant feed since the bookmark: "
        f"{requests} requests ({requests / first.requests:.1%}) for {nightly.records:,} newly "
        "ended grants"
    )


if __name__ == "__main__":
    main()
