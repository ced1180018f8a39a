"""How a benchmark side is run and timed, shared by benchmarks/benchmark.py and its sections
(backfill_benchmark.py, benchmark_snapshots.py) and by the streams' own benchmarks
(system_log_benchmark.py, past_grants_benchmark.py, tasks_benchmark.py): an emulator with the
listed exclusion entitlements every section measured with, the tap with a catalog of one stream
(timed with its requests, records and last STATE), the baseline clients (raw_loop.py; the
sequential reader of a paged search), a command timed as a whole process, and Meltano runs
with the peak RSS of its children.

Peak RSS under Meltano: Meltano starts the tap and the target as its own children, so
``os.wait4`` on Meltano would report only the largest process of the tree. A thread polls
``/proc/<pid>/status`` of Meltano's children every 20 ms and keeps each one's ``VmHWM`` (the
kernel's peak resident set, the figure ``ru_maxrss`` reports); it can only miss growth in a
process's last 20 ms.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import typing as t
from pathlib import Path

from harness.support import BIN, ROOT, TAP, EmulatorProcess, emulator_environment_env

# the baseline client, started by its path: it imports nothing of the project
RAW_LOOP = ROOT / "benchmarks" / "raw_loop.py"


def start_emulator(workdir: Path, name: str, *options: str) -> EmulatorProcess:
    """An emulator process whose tap config lists the tenant's exclusion entitlements, as every
    section measured it: a run that reads the exclusions needs no catalog read first (the
    discovery section drops the list to measure that read)."""
    return EmulatorProcess(workdir, name, *options, list_exclusion_entitlements=True)


def raw_loop(config_path: Path, *options: str) -> list[str]:
    """The command of the baseline client (benchmarks/raw_loop.py) for a tap config."""
    return [sys.executable, str(RAW_LOOP), str(config_path), *options]


def catalog_for(config_path: Path, stream: str, workdir: Path) -> Path:
    """The tap's own discovered catalog with only ``stream`` selected."""
    catalog = json.loads(
        subprocess.run(
            [str(TAP), "--config", str(config_path), "--discover"],
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


def run(
    command: list[str], env: dict[str, str] | None = None, log: Path | None = None
) -> tuple[float, int]:
    """Wall seconds and peak RSS (MB) of one child process, output to /dev/null (its stderr
    to ``log`` when given)."""
    started = time.perf_counter()
    with open(log or os.devnull, "wb") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT, env=env
        )
        _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}")
    return elapsed, usage.ru_maxrss // 1024


def tap_command(config_path: Path, catalog: Path) -> list[str]:
    return [str(TAP), "--config", str(config_path), "--catalog", str(catalog)]


class TapRun(t.NamedTuple):
    """One run of the tap's command line: the requests it sent to one endpoint, the records it
    delivered, its wall seconds and its last STATE."""

    requests: int
    records: int
    seconds: float
    state: dict[str, t.Any]


def requests_made(emulator: EmulatorProcess, path: str) -> int:
    """The emulator's count of requests to ``path`` since its stats were last reset."""
    return int(emulator.control("stats")["api_requests_by_path"].get(path, 0))


def timed_tap_run(
    emulator: EmulatorProcess,
    config: Path,
    catalog: Path,
    workdir: Path,
    path: str,
    state: dict[str, t.Any] | None = None,
) -> TapRun:
    """The tap's command line from ``state`` (none: a first sync), timed whole, its output
    kept to count the records and read the last STATE; exits with its stderr if it fails."""
    command = tap_command(config, catalog)
    if state is not None:
        state_file = workdir / "state.json"
        state_file.write_text(json.dumps(state))
        command += ["--state", str(state_file)]
    emulator.control("reset-stats", {})
    started = time.monotonic()
    out = subprocess.run(command, capture_output=True, check=False)
    seconds = time.monotonic() - started
    if out.returncode != 0:
        sys.exit(f"the tap failed:\n{out.stderr.decode()[-3000:]}")
    messages = [json.loads(line) for line in out.stdout.splitlines() if line]
    records = sum(1 for m in messages if m["type"] == "RECORD")
    final = [m["value"] for m in messages if m["type"] == "STATE"][-1]
    return TapRun(requests_made(emulator, path), records, seconds, final)


def print_runs(rows: tuple[tuple[str, TapRun], ...]) -> None:
    """A table of named runs (requests, records, seconds), then how much faster the first
    (the tap's first sync) was than the second (the sequential reader)."""
    width = max(len(name) for name, _ in rows) + 4
    print(f"{'run':<{width}}{'requests':>10}{'records':>10}{'seconds':>10}")
    for name, run in rows:
        print(f"{name:<{width}}{run.requests:>10,}{run.records:>10,}{run.seconds:>10.1f}")
    (_, tap), (_, reader) = rows[:2]
    print(
        f"first sync: the tap {reader.seconds / tap.seconds:.1f}x as fast as one sequential reader"
    )


# The plainest client of a search the service pages (``POST``): one token, one request after
# another, each item a JSON line to /dev/null; prints how many it read. Arguments: the tap's
# config file, the path, the first request's body (JSON).
SEQUENTIAL_READER = """
import json, sys, requests
config = json.load(open(sys.argv[1]))
path, body = sys.argv[2], json.loads(sys.argv[3])
token = requests.post(config["api_url"] + "/auth/v1/token", data={
    "grant_type": "client_credentials", "client_id": config["client_id"],
    "client_secret": config["client_secret"]}, timeout=60).json()["access_token"]
session = requests.Session()
session.headers["Authorization"] = "Bearer " + token
read = 0
with open("/dev/null", "w") as out:
    while True:
        answer = session.post(config["api_url"] + path, json=body)
        answer.raise_for_status()  # an error answer is not the end of the list
        page = answer.json()
        for item in page.get("list") or []:
            out.write(json.dumps(item) + "\\n")
            read += 1
        if not page.get("nextPageToken"):
            break
        body["pageToken"] = page["nextPageToken"]
print(read)
"""


def sequential_read(
    emulator: EmulatorProcess, config: Path, path: str, body: dict[str, t.Any]
) -> TapRun:
    """``SEQUENTIAL_READER`` of ``path`` from ``body``, timed whole: the baseline a tap's
    first sync is measured against (its requests, the items it read, its seconds)."""
    emulator.control("reset-stats", {})
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", SEQUENTIAL_READER, str(config), path, json.dumps(body)],
        capture_output=True,
        check=True,
    )
    seconds = time.monotonic() - started
    return TapRun(requests_made(emulator, path), int(out.stdout), seconds, {})


def with_settings(emulator: EmulatorProcess, workdir: Path, name: str, **settings: t.Any) -> Path:
    path = workdir / f"{name}-config.json"
    path.write_text(json.dumps({**emulator.config, **settings}))
    return path


def meltano_env(emulator: EmulatorProcess, schema: str, workdir: Path) -> dict[str, str]:
    """What a user exports (the secret) plus what differs in a benchmark run: the emulator's
    free port, grant_feed only (the raw loop reads only the feed), a schema of our own."""
    return {
        **os.environ,
        **emulator_environment_env(emulator),
        "TAP_ACCESSGOV__SELECT": '["grant_feed.*"]',
        "TARGET_POSTGRES_DEFAULT_TARGET_SCHEMA": schema,
        "MELTANO_DATABASE_URI": f"sqlite:///{workdir / 'meltano.db'}",
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
    }


def meltano_run(env: dict[str, str], log: Path) -> tuple[float, dict[str, int]]:
    """Wall seconds of ``meltano run tap-accessgov target-postgres`` and the peak RSS (MB)
    of its tap and target."""
    command = [
        str(BIN / "meltano"),
        "--environment",
        "emulator",
        "run",
        "--full-refresh",
        "tap-accessgov",
        "target-postgres",
    ]
    started = time.perf_counter()
    with log.open("w") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=output)
        rss = PeakRss(process.pid)
        status = process.wait()
    elapsed = time.perf_counter() - started
    peak = rss.stop()
    print(f"    (meltano run {elapsed:.1f} s, peak RSS {peak})", file=sys.stderr, flush=True)
    if status != 0:
        sys.exit(f"meltano run failed ({status}); its log: {log}\n{log.read_text()[-3000:]}")
    return elapsed, peak


class PeakRss:
    """Peak RSS (MB) of the tap and the target that a Meltano process starts, from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak: dict[str, int] = {"tap": 0, "target": 0}
        self._names: dict[int, str] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _children(self, pid: int) -> list[int]:
        try:
            text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        except OSError:
            return []
        return [int(child) for child in text.split()]

    def _role(self, pid: int) -> str | None:
        """tap, target or None, from the command line. Only a tap or target is remembered:
        a child is Meltano's fork (Meltano's command line) until it has exec'd the plugin."""
        if pid in self._names:
            return self._names[pid]
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        program = " ".join(part.decode(errors="replace") for part in argv[:2])
        if "tap-accessgov" in program:
            self._names[pid] = "tap"
        elif "target-postgres" in program:
            self._names[pid] = "target"
        return self._names.get(pid)

    def _poll(self) -> None:
        while not self._done.wait(0.02):
            pending = self._children(self.pid)
            while pending:
                pid = pending.pop()
                pending.extend(self._children(pid))
                if (role := self._role(pid)) is None:
                    continue
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        kb = int(line.split()[1])
                        self.peak[role] = max(self.peak[role], kb // 1024)

    def stop(self) -> dict[str, int]:
        self._done.set()
        self._thread.join()
        return self.peak
