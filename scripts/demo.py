"""The main job, end to end on this machine: the emulator, two Meltano runs, and what arrived.

1. starts the emulator with a realistic dataset (``python -m emulator``);
2. ``meltano run tap-accessgov target-jsonl`` (or ``target-postgres`` when a PostgreSQL URL is
   given with ``--postgres-url`` or ``ACCESSGOV_DEMO_POSTGRES_URL``), from a clean slate;
3. answers two compliance questions with SQL over what was loaded (DuckDB over the JSONL
   files, or PostgreSQL);
4. adds events to the emulator and runs again: only the new events (and those at the
   bookmark instant) arrive;
5. stops the emulator, also when something fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import typing as t
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / ".demo"
OUTPUT = DEMO / "output"
BIN = Path(sys.executable).parent
PORT = 8765
SCHEMA = "accessgov"
EVENT_KEY = '"appId", "appEntitlementId", "appUserId", "eventType", "date"'

QUESTIONS = {
    "Grant events added and removed per app in the last 30 days (deduplicated on the key)": f"""
        SELECT "appId" AS app,
               count(*) FILTER (WHERE "eventType" = 'GRANT_EVENT_TYPE_ADDED') AS added,
               count(*) FILTER (WHERE "eventType" = 'GRANT_EVENT_TYPE_REMOVED') AS removed
        FROM (SELECT DISTINCT {EVENT_KEY} FROM {{grant_feed}}) AS events
        WHERE CAST("date" AS TIMESTAMPTZ) >= now() - INTERVAL '30 days'
        GROUP BY 1 ORDER BY 2 DESC, 1
    """,
    "Users excluded from automation on more than one entitlement (top 10)": """
        SELECT u."displayName" AS user_name, u."email" AS email,
               count(DISTINCT e."appId" || '/' || e."appEntitlementId") AS entitlements
        FROM {automation_exclusions} AS e JOIN {users} AS u ON u."id" = e."userId"
        GROUP BY 1, 2 HAVING count(DISTINCT e."appId" || '/' || e."appEntitlementId") > 1
        ORDER BY 3 DESC, 1 LIMIT 10
    """,
}
COUNTS = f"""
    SELECT 'grant_feed' AS stream, count(*) AS rows_loaded,
           (SELECT count(*) FROM (SELECT DISTINCT {EVENT_KEY} FROM {{grant_feed}}) AS k) AS distinct_keys
    FROM {{grant_feed}}
    UNION ALL SELECT 'automation_exclusions', count(*),
           (SELECT count(*) FROM (SELECT DISTINCT "appId", "appEntitlementId", "userId"
                                  FROM {{automation_exclusions}}) AS k)
    FROM {{automation_exclusions}}
    UNION ALL SELECT 'users', count(*), (SELECT count(DISTINCT "id") FROM {{users}}) FROM {{users}}
"""


class Warehouse(t.Protocol):
    def query(self, sql: str) -> tuple[list[str], list[tuple[t.Any, ...]]]: ...


class JsonlFiles:
    """DuckDB over the files target-jsonl appended to."""

    def __init__(self, directory: Path) -> None:
        import duckdb

        self._db = duckdb.connect()
        self._tables = {
            name: f"read_json_auto('{directory / (name + '.jsonl')}', format='newline_delimited')"
            for name in ("grant_feed", "automation_exclusions", "users")
        }

    def query(self, sql: str) -> tuple[list[str], list[tuple[t.Any, ...]]]:
        cursor = self._db.execute(sql.format(**self._tables))
        return [d[0] for d in cursor.description], cursor.fetchall()


class Postgres:
    """The tables target-postgres wrote."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._db = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
        self._db.autocommit = True
        self._tables = {
            name: f'{SCHEMA}."{name}"' for name in ("grant_feed", "automation_exclusions", "users")
        }

    def query(self, sql: str) -> tuple[list[str], list[tuple[t.Any, ...]]]:
        with self._db.cursor() as cursor:
            cursor.execute(sql.format(**self._tables).replace("%", "%%"))
            return [d.name for d in cursor.description or []], cursor.fetchall()

    def reset(self) -> None:
        self._db.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def print_table(title: str, columns: list[str], rows: list[tuple[t.Any, ...]]) -> None:
    print(f"\n{title}")
    cells = [columns, *[["" if v is None else str(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for n, row in enumerate(cells):
        print(
            "  " + "  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True))
        )
        if n == 0:
            print("  " + "  ".join("-" * width for width in widths))
    if not rows:
        print("  (none)")


def meltano(*args: str, env: dict[str, str], log: str) -> None:
    """Run meltano with its (long) log in .demo/<log>; on failure show the end of it."""
    path = DEMO / log
    print(f"\n$ meltano {' '.join(args)}    (log: {path.relative_to(ROOT)})", flush=True)
    started = time.monotonic()
    with path.open("w") as out:
        result = subprocess.run(
            [str(BIN / "meltano"), *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if result.returncode != 0:
        print("".join(path.read_text().splitlines(keepends=True)[-40:]), file=sys.stderr)
        raise SystemExit(
            f"meltano {args[0]} failed (exit {result.returncode}); the whole log is in {path}"
        )
    print(f"  done in {time.monotonic() - started:.1f} s", flush=True)


def emulator_call(path: str, body: dict[str, t.Any]) -> dict[str, t.Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{PORT}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return t.cast("dict[str, t.Any]", json.loads(response.read()))


def start_emulator(events: int) -> subprocess.Popen[bytes]:
    DEMO.mkdir(exist_ok=True)
    ready = DEMO / "emulator.ready"
    ready.unlink(missing_ok=True)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emulator",
            "--port",
            str(PORT),
            "--events",
            str(events),
            "--write-config",
            str(DEMO / "emulator-config.json"),
            "--ready-file",
            str(ready),
        ],
        cwd=ROOT,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            sys.exit(f"the emulator did not start (is port {PORT} free?)")
        time.sleep(0.1)
    return process


def summary(warehouse: Warehouse, label: str) -> dict[str, int]:
    columns, rows = warehouse.query(COUNTS)
    print_table(f"== {label}: rows per stream ==", columns, rows)
    for title, sql in QUESTIONS.items():
        print_table(title, *warehouse.query(sql))
    return {row[0]: row[1] for row in rows}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=30_000, help="grant events in the emulator")
    parser.add_argument("--new-events", type=int, default=750, help="events added before run 2")
    parser.add_argument("--postgres-url", default=os.environ.get("ACCESSGOV_DEMO_POSTGRES_URL"))
    args = parser.parse_args()

    target = "target-postgres" if args.postgres_url else "target-jsonl"
    env = {
        **os.environ,
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "MELTANO_ENVIRONMENT": "emulator",
    }
    DEMO.mkdir(exist_ok=True)
    meltano("install", env=env, log="meltano-install.log")
    emulator = start_emulator(args.events)
    try:
        config = json.loads((DEMO / "emulator-config.json").read_text())
        env |= {
            "TAP_ACCESSGOV_CLIENT_ID": config["client_id"],
            "TAP_ACCESSGOV_CLIENT_SECRET": config["client_secret"],
            "TAP_ACCESSGOV_API_URL": config["api_url"],
            "TAP_ACCESSGOV_EXCLUSION_ENTITLEMENTS": json.dumps(config["exclusion_entitlements"]),
        }
        warehouse: Warehouse
        if args.postgres_url:
            env["TARGET_POSTGRES_SQLALCHEMY_URL"] = args.postgres_url
            warehouse = Postgres(args.postgres_url)
            warehouse.reset()
        else:
            shutil.rmtree(OUTPUT, ignore_errors=True)
            warehouse = JsonlFiles(OUTPUT)

        meltano("run", "--full-refresh", "tap-accessgov", target, env=env, log="run-1.log")
        first = summary(warehouse, "After the first run")

        added = emulator_call("/_emulator/events", {"count": args.new_events})
        print(
            f"\nThe emulator now has {added.get('total', '?')} grant events ({args.new_events} new)."
        )
        meltano("run", "tap-accessgov", target, env=env, log="run-2.log")
        second = summary(warehouse, "After the second (incremental) run")

        new_rows = second["grant_feed"] - first["grant_feed"]
        key = EVENT_KEY.replace('"', "")
        if args.postgres_url:
            print(
                f"\nThe second run added {new_rows} grant feed rows for the {args.new_events} new "
                "events. Events at the bookmark instant were read again (the feed's 'after' is "
                f"inclusive) and target-postgres merged them on the primary key ({key})."
            )
        else:
            print(
                f"\nThe second run appended {new_rows} grant feed rows: the {args.new_events} new "
                f"events and {new_rows - args.new_events} re-read at the bookmark instant (the "
                f"feed's 'after' is inclusive). JSONL only appends: dedupe on ({key}), as the "
                "queries above do."
            )
        print(
            "Automation exclusions and users are full-table streams: every run extracts them "
            "in full."
        )
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)


if __name__ == "__main__":
    main()
