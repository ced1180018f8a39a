"""A first run of the tap, stream by stream: the records, requests and seconds of each
stream of one run of the real command line (``tap-accessgov --config``, every stream, no
state) against an emulator process answering each request after ``--latency`` seconds
(default 50 ms), ``max_concurrency`` at its default (8) unless ``--workers`` says otherwise.

Per stream: the records and seconds of the tap's own closing line for it ("<stream>: N records
in S s", the whole sync of the stream, its partitions included), and the requests its request
loop made (the SDK's ``http_request_count`` METRIC lines, by stream). A stream that reads
another's records through that stream's request loop (``app_entitlements`` and the per-app
streams list the apps, ``users`` the exclusions when ``automation_exclusions`` has not run
yet) spends the time, the other stream counts the requests. The total is the emulator's count.

Tenants as in grants_ways_benchmark.py: ``demo`` (the emulator's defaults: 8 apps with
grants in a catalog of 120, 2,000 users and as many more in the directory, 20,000 events) and
``large`` (200 apps, 2,000 app entitlements, about 20,000 accounts).

    .venv/bin/python -m benchmarks.first_run_benchmark [--tenants demo,large] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.grants_ways_benchmark import TENANTS
from harness.support import TAP, EmulatorProcess

CLOSING_LINE = re.compile(r"\| (\w+): ([\d,]+) records in ([\d.]+) s$")
METRIC = re.compile(r"METRIC: (\{.*\})$")


def first_run(name: str, args: argparse.Namespace, workdir: Path) -> list[str]:
    options = [*TENANTS[name], "--latency", str(args.latency)]
    with EmulatorProcess(workdir, name, *options) as emulator:
        config = {**emulator.config, "max_concurrency": args.workers}
        config_path = workdir / f"{name}-first-run.json"
        config_path.write_text(json.dumps(config))
        emulator.control("reset-stats", {})
        started = time.perf_counter()
        run = subprocess.run(
            [str(TAP), "--config", str(config_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - started
        if run.returncode != 0:
            raise SystemExit(f"{name}: the tap failed:\n{run.stderr[-3000:]}")
        stats = emulator.control("stats")
    streams: dict[str, tuple[int, float]] = {}
    requests: Counter[str] = Counter()
    for line in run.stderr.splitlines():
        if closing := CLOSING_LINE.search(line):
            streams[closing[1]] = (int(closing[2].replace(",", "")), float(closing[3]))
        elif metric := METRIC.search(line):
            point = json.loads(metric[1])
            if point["metric"] == "http_request_count":
                requests[point["tags"]["stream"]] += int(point["value"])
    lines = [
        f"{name}: first run, {args.latency * 1000:.0f} ms per request, max_concurrency "
        f"{args.workers}: {stats['api_requests']:,} requests, {elapsed:.1f} s (the command, "
        "start-up and token included)",
        f"  {'stream':<24}{'records':>10}{'requests':>10}{'seconds':>10}",
    ]
    for stream, (records, seconds) in streams.items():
        lines.append(f"  {stream:<24}{records:>10,}{requests[stream]:>10,}{seconds:>10.1f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", default="demo,large", help="demo, large or both")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per request")
    parser.add_argument("--workers", type=int, default=8, help="the tap's max_concurrency")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tenants.split(","):
            for line in first_run(name, args, Path(tmp)):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
