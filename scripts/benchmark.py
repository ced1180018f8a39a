"""Side-by-side benchmark of the tap against the emulator (ratios, not absolute times).

    python3 tasks.py benchmark            # or: .venv/bin/python scripts/benchmark.py

In one run, alternating the two sides of each comparison and reporting medians:

1. grant_feed throughput: the tap (catalog selecting grant_feed, stdout to /dev/null) versus a
   plain loop over the same pages (requests.Session, pageSize 100, json parse, one json dump
   per record): the ratio tap/raw of records per second;
2. the tap's peak RSS on a 10k-event and on a 200k-event feed;
3. automation_exclusions over 200 entitlements with 50 ms added to every response: the tap
   (max_concurrency 8) versus the same tap one request after another (max_concurrency 1);
4. token requests per tap run, from the emulator's counters.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import typing as t
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

RAW_LOOP = """
import json, sys, requests
config = json.load(open(sys.argv[1]))
session = requests.Session()
token = session.post(config["api_url"] + "/auth/v1/token", data={
    "grant_type": "client_credentials", "client_id": config["client_id"],
    "client_secret": config["client_secret"]}).json()["access_token"]
session.headers["Authorization"] = "Bearer " + token
body = {"pageSize": 100, "after": config["start_date"]}
records = 0
with open("/dev/null", "w") as out:
    while True:
        page = session.post(config["api_url"] + "/api/v1/grants/feed", json=body).json()
        for entry in page.get("list") or []:
            out.write(json.dumps(entry) + "\\n")
            records += 1
        if not page.get("nextPageToken"):
            break
        body["pageToken"] = page["nextPageToken"]
print(records)
"""


class EmulatorProcess:
    """``python -m emulator`` on a free port, with its tap config."""

    def __init__(self, workdir: Path, name: str, *args: str) -> None:
        self.config_path = workdir / f"{name}.json"
        ready = workdir / f"{name}.ready"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "emulator",
                "--port",
                "0",
                "--write-config",
                str(self.config_path),
                "--ready-file",
                str(ready),
                *args,
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"emulator {name} did not start")
            time.sleep(0.05)
        self.config: dict[str, t.Any] = json.loads(self.config_path.read_text())

    def control(self, path: str, body: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        request = urllib.request.Request(
            f"{self.config['api_url']}/_emulator/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "POST",
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return t.cast("dict[str, t.Any]", json.loads(response.read()))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def catalog_for(config_path: Path, stream: str, workdir: Path) -> Path:
    """The tap's own discovered catalog with only ``stream`` selected."""
    catalog = json.loads(
        subprocess.run(
            [str(BIN / "tap-accessgov"), "--config", str(config_path), "--discover"],
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    )
    for entry in catalog["streams"]:
        for item in entry["metadata"]:
            if not item["breadcrumb"]:
                item["metadata"]["selected"] = entry["tap_stream_id"] == stream
    path = workdir / f"catalog-{stream}.json"
    path.write_text(json.dumps(catalog))
    return path


def run(command: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (MB) of one child process, output to /dev/null."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}")
    return elapsed, usage.ru_maxrss // 1024


def tap_command(config_path: Path, catalog: Path) -> list[str]:
    return [str(BIN / "tap-accessgov"), "--config", str(config_path), "--catalog", str(catalog)]


def with_settings(emulator: EmulatorProcess, workdir: Path, name: str, **settings: t.Any) -> Path:
    path = workdir / f"{name}-config.json"
    path.write_text(json.dumps({**emulator.config, **settings}))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000, help="grant events (large feed)")
    parser.add_argument(
        "--small-events", type=int, default=10_000, help="grant events (small feed)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternations of each comparison")
    parser.add_argument("--entitlements", type=int, default=200)
    args = parser.parse_args()

    lines: list[str] = []

    def report(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        big = EmulatorProcess(
            workdir, "big", "--events", str(args.events), "--exclusion-entitlements", "1"
        )
        small = EmulatorProcess(
            workdir, "small", "--events", str(args.small_events), "--exclusion-entitlements", "1"
        )
        slow = EmulatorProcess(
            workdir,
            "slow",
            "--events",
            "100",
            "--exclusion-entitlements",
            str(args.entitlements),
            "--apps",
            "40",
            "--max-exclusions",
            "60",
            "--latency",
            "0.05",
        )
        try:
            feed_catalog = catalog_for(big.config_path, "grant_feed", workdir)
            exclusions_catalog = catalog_for(slow.config_path, "automation_exclusions", workdir)
            tokens: list[int] = []

            def tap_run(
                emulator: EmulatorProcess, config: Path, catalog: Path
            ) -> tuple[float, int]:
                emulator.control("reset-stats", {})
                result = run(tap_command(config, catalog))
                tokens.append(emulator.control("stats")["token_requests"])
                return result

            report(
                f"grant_feed: {args.events} events, pages of 100, {args.rounds} rounds alternating"
            )
            tap_times, raw_times = [], []
            for _ in range(args.rounds):
                tap_times.append(tap_run(big, big.config_path, feed_catalog)[0])
                raw_times.append(run([sys.executable, "-c", RAW_LOOP, str(big.config_path)])[0])
            tap_s, raw_s = statistics.median(tap_times), statistics.median(raw_times)
            report(f"  tap  {args.events / tap_s:>9,.0f} records/s (median {tap_s:.2f} s)")
            report(f"  raw  {args.events / raw_s:>9,.0f} records/s (median {raw_s:.2f} s)")
            report(f"  throughput ratio tap/raw = {raw_s / tap_s:.2f}   (target >= 0.60)")

            report(f"peak RSS of the tap, grant_feed, {args.rounds} rounds alternating")
            small_catalog = catalog_for(small.config_path, "grant_feed", workdir)
            small_rss, big_rss = [], []
            for _ in range(args.rounds):
                small_rss.append(tap_run(small, small.config_path, small_catalog)[1])
                big_rss.append(tap_run(big, big.config_path, feed_catalog)[1])
            small_mb, big_mb = statistics.median(small_rss), statistics.median(big_rss)
            report(f"  {args.small_events:>7,} events: {small_mb:.0f} MB")
            report(f"  {args.events:>7,} events: {big_mb:.0f} MB")
            report(f"  growth = {big_mb - small_mb:+.0f} MB   (target <= +25 MB)")

            report(
                f"automation_exclusions: {args.entitlements} entitlements, 50 ms per response, {args.rounds} rounds alternating"
            )
            concurrent = with_settings(slow, workdir, "concurrent", max_concurrency=8)
            sequential = with_settings(slow, workdir, "sequential", max_concurrency=1)
            seq_times, par_times = [], []
            for _ in range(args.rounds):
                seq_times.append(tap_run(slow, sequential, exclusions_catalog)[0])
                par_times.append(tap_run(slow, concurrent, exclusions_catalog)[0])
            requests_per_run = sum(
                n
                for path, n in slow.control("stats")["api_requests_by_path"].items()
                if path.endswith("/exclusions")
            )
            seq_s, par_s = statistics.median(seq_times), statistics.median(par_times)
            report(f"  {requests_per_run} requests a run")
            report(f"  one after another (max_concurrency 1): median {seq_s:.2f} s")
            report(f"  concurrent        (max_concurrency 8): median {par_s:.2f} s")
            report(f"  speed-up = {seq_s / par_s:.1f}x   (target >= 4x)")

            report(
                f"token requests per tap run: min {min(tokens)}, max {max(tokens)} over {len(tokens)} runs"
            )
        finally:
            for emulator in (big, small, slow):
                emulator.stop()

    print("\nSummary (paste into the README):\n```\n" + "\n".join(lines) + "\n```")


if __name__ == "__main__":
    main()
