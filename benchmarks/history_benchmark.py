"""Rows stored after N nightly runs, with and without ``prune_raw_snapshots``.

A simulated tenant: each night a full copy of every full-table stream the models keep history
for (apps, app_entitlements, users, app_users, grants, access_reviews, automation_exclusions),
written as target-jsonl writes it (one JSON line per record, ``snapshotAt`` the night's run, a
``full_table_snapshots`` line per stream), with ``--change`` of each stream's rows changed
since the night before (a third removed, a third added, a third with a field changed; an
exclusion has no field to change, so half removed, half added). An app user is an account of
an app, owned by a user or by nobody; a grant is one per (app, entitlement, account of that
app). Two copies of the same nights, side by side:

- without the prune: the load, then ``dbt build`` of the history models (models/history)
  and ``automation_exclusion_history`` on DuckDB, as every night before the prune existed;
- with the prune: the same, then ``dbt run-operation prune_raw_snapshots``.

Printed: the rows stored after the last night (loaded lines + history rows) per stream, side
by side; and checked: both ``automation_exclusion_history`` equal the history the simulation
made (first seen, last seen, removed), so the prune lost nothing. The tap, the emulator and
Meltano are not involved: the loaded files are what they write, and the question is storage.

    .venv/bin/python -m benchmarks.history_benchmark --nights 30 --change 0.01
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import shutil
import subprocess
import typing as t
from pathlib import Path

import duckdb

from harness.support import ROOT

DBT = ROOT / ".meltano/utilities/dbt-duckdb/venv/bin/dbt"
SELECTED = [
    "fqn:accessgov.history",
    "stg_automation_exclusions",
    "stg_system_log",  # who added and removed each (empty where the log is not loaded)
    "automation_exclusion_history",
]
Row = dict[str, t.Any]


class Tenant:
    """The service's full tables, changed a little each night."""

    def __init__(self, sizes: dict[str, int]) -> None:
        """``sizes``: the rows of each stream on the first night, in the order they are made
        (a stream's rows refer to those of the streams before it)."""
        self.random = random.Random(28)
        self.serial = 0
        self.tables: dict[str, dict[tuple[str, ...], Row]] = {stream: {} for stream in sizes}
        self.accounts: dict[str, list[str]] = {}  # per app, the ids of its app users
        for stream, size in sizes.items():
            for _ in range(size):
                self.add(stream)

    def new_id(self) -> str:
        self.serial += 1
        return f"{self.serial:027d}"

    def pick(self, stream: str) -> tuple[str, ...]:
        return self.random.choice(list(self.tables[stream]))

    def add(self, stream: str) -> None:
        row: Row
        if stream == "apps":
            row = {"id": self.new_id(), "displayName": f"App {self.serial}", "userCount": 10}
        elif stream == "app_entitlements":
            row = {
                "appId": self.pick("apps")[0],
                "id": self.new_id(),
                "displayName": f"Entitlement {self.serial}",
                "isAutomationEnabled": True,
                "grantCount": 5,
            }
        elif stream == "users":
            row = {
                "id": self.new_id(),
                "displayName": f"User {self.serial}",
                "email": f"user{self.serial}@example.com",
                "status": "ENABLED",
                "directoryStatus": "ENABLED",
            }
        elif stream == "app_users":
            app = self.pick("apps")[0]
            owned = self.random.random() < 0.8  # the rest: service and system accounts
            row = {
                "appId": app,
                "id": self.new_id(),
                "identityUserId": self.pick("users")[0] if owned else "",
                "displayName": f"Account {self.serial}",
                "email": f"account{self.serial}@example.com" if owned else None,
                "appUserType": "APP_USER_TYPE_USER" if owned else "APP_USER_TYPE_SERVICE_ACCOUNT",
                "status": {"status": "STATUS_ENABLED", "details": ""},
            }
            self.accounts.setdefault(app, []).append(row["id"])
        elif stream == "grants":
            row = self.new_grant()
        elif stream == "access_reviews":
            row = {
                "id": self.new_id(),
                "displayName": f"Review {self.serial}",
                "state": "ACCESS_REVIEW_STATE_OPEN",
                "createdById": self.pick("users")[0],
                "startedAt": "2026-01-01T00:00:00Z",
                "closedAt": None,
                "completionDate": "2026-06-30T00:00:00Z",
            }
        else:
            app, entitlement = self.pick("app_entitlements")
            user = self.pick("users")[0]
            row = {
                "appId": app,
                "appEntitlementId": entitlement,
                "appUserId": f"account-{user}",
                "userId": user,
            }
        if stream not in ("automation_exclusions", "grants"):
            row["updatedAt"] = "2026-01-01T00:00:00Z"
        self.tables[stream][key(stream, row)] = row

    def new_grant(self) -> Row:
        """A grant not held yet: an entitlement of an app, to one of that app's accounts."""
        while True:
            app, entitlement = self.pick("app_entitlements")
            if not self.accounts.get(app):
                continue
            account = self.random.choice(self.accounts[app])
            if (app, entitlement, account) not in self.tables["grants"]:
                return {
                    "appId": app,
                    "appEntitlementId": entitlement,
                    "appUserId": account,
                    "appEntitlementUserBindingCreatedAt": "2026-01-01T00:00:00Z",
                    "appEntitlementUserBindingDeprovisionAt": None,
                    "originatingTicketId": f"ticket-{self.new_id()}",
                }

    def change(self, share: float, night: int) -> None:
        """``share`` of each table's rows changed."""
        for stream, table in self.tables.items():
            changes = max(1, round(len(table) * share))
            kinds = (
                ("remove", "add")
                if stream == "automation_exclusions"
                else ("remove", "add", "edit")
            )
            for n in range(changes):
                kind = kinds[(night + n) % len(kinds)]
                if kind == "add":
                    self.add(stream)
                    continue
                picked = self.pick(stream)
                if kind == "remove":
                    del table[picked]
                    if stream == "app_users":
                        self.accounts[picked[0]].remove(picked[1])
                else:
                    edit(stream, table[picked], f"2026-02-{night % 28 + 1:02d}T00:00:00Z")


def edit(stream: str, row: Row, when: str) -> None:
    """A field of ``row`` changed on the service at ``when``."""
    if stream in ("apps", "app_entitlements"):
        row["userCount" if stream == "apps" else "grantCount"] += 1
    elif stream == "users":
        row["status"] = "DISABLED"
    elif stream == "app_users":
        row["status"] = {"status": "STATUS_DISABLED", "details": "disabled in the app"}
    elif stream == "grants":
        row["appEntitlementUserBindingDeprovisionAt"] = when  # an end scheduled
    else:
        row["state"] = "ACCESS_REVIEW_STATE_CLOSED"
        row["closedAt"] = when
    if stream != "grants":
        row["updatedAt"] = when


def key(stream: str, row: Row) -> tuple[str, ...]:
    if stream == "automation_exclusions":
        return (row["appId"], row["appEntitlementId"], row["userId"])
    if stream == "grants":
        return (row["appId"], row["appEntitlementId"], row["appUserId"])
    return (
        (row["appId"], row["id"]) if stream in ("app_entitlements", "app_users") else (row["id"],)
    )


def load(tenant: Tenant, directory: Path, snapshot_at: str) -> None:
    """What one run writes: a copy of each stream, then its full_table_snapshots lines."""
    for stream, table in tenant.tables.items():
        with (directory / f"{stream}.jsonl").open("a") as out:
            for row in table.values():
                out.write(json.dumps({**row, "snapshotAt": snapshot_at}) + "\n")
    with (directory / "full_table_snapshots.jsonl").open("a") as out:
        for stream in tenant.tables:
            record = {"stream": stream, "snapshotAt": snapshot_at, "completedAt": snapshot_at}
            out.write(json.dumps(record) + "\n")


def dbt(directory: Path, database: Path, *args: str) -> None:
    env = {
        **os.environ,
        "DBT_TARGET": "duckdb",
        "DBT_PROFILES_DIR": str(ROOT / "transform/profiles"),
        "DBT_PROJECT_DIR": str(ROOT / "dbt_accessgov"),
        "DBT_PROFILE": "accessgov",
        "DBT_TARGET_PATH": str(database.parent / f"target-{database.stem}"),
        "DBT_LOG_PATH": str(database.parent / f"logs-{database.stem}"),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "ACCESSGOV_JSONL_DIR": str(directory),
        "ACCESSGOV_DUCKDB_PATH": str(database),
        "ACCESSGOV_DBT_SCHEMA": "analytics",
    }
    result = subprocess.run([str(DBT), *args], env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        msg = f"dbt {' '.join(args)} failed:\n{result.stdout[-3000:]}"
        raise RuntimeError(msg)


def lines(path: Path) -> int:
    with path.open("rb") as stream:
        return sum(1 for _ in stream)


def stored(directory: Path, database: Path, streams: t.Iterable[str]) -> dict[str, tuple[int, int]]:
    """Per stream: lines loaded, rows of its history model."""
    with duckdb.connect(str(database), read_only=True) as db:
        return {
            stream: (
                lines(directory / f"{stream}.jsonl"),
                int(db.execute(f"select count(*) from analytics.history_{stream}").fetchone()[0]),  # type: ignore[index]
            )
            for stream in streams
        }


def exclusion_history(database: Path) -> set[tuple[t.Any, ...]]:
    with duckdb.connect(str(database), read_only=True) as db:
        rows = db.execute(
            "select app_id, app_entitlement_id, user_id, strftime(first_seen_at at time zone 'UTC', '%Y-%m-%d'),"
            " strftime(last_seen_at at time zone 'UTC', '%Y-%m-%d'),"
            " strftime(removed_at at time zone 'UTC', '%Y-%m-%d')"
            " from analytics.automation_exclusion_history"
        ).fetchall()
    return set(rows)


def expected_history(nights: list[tuple[str, set[tuple[str, ...]]]]) -> set[tuple[t.Any, ...]]:
    """automation_exclusion_history as the simulation made it: per exclusion ever present,
    the first and last night that held it, and the night after that, if any."""
    days = [night[:10] for night, _ in nights]
    found = set()
    for exclusion in set().union(*(held for _, held in nights)):
        seen = [n for n, (_, held) in enumerate(nights) if exclusion in held]
        removed = days[seen[-1] + 1] if seen[-1] + 1 < len(days) else None
        found.add((*exclusion, days[seen[0]], days[seen[-1]], removed))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--change", type=float, default=0.01, help="share of rows changed a night")
    parser.add_argument("--apps", type=int, default=200)
    parser.add_argument("--entitlements", type=int, default=2000)
    parser.add_argument("--exclusions", type=int, default=6000)
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--app-users", type=int, default=20000)
    parser.add_argument("--grants", type=int, default=50000)
    parser.add_argument("--reviews", type=int, default=50)
    parser.add_argument("--workdir", type=Path, default=ROOT / ".demo/history-benchmark")
    args = parser.parse_args()

    tenant = Tenant(
        {
            "apps": args.apps,
            "app_entitlements": args.entitlements,
            "users": args.users,
            "app_users": args.app_users,
            "grants": args.grants,
            "access_reviews": args.reviews,
            "automation_exclusions": args.exclusions,
        }
    )
    runs = {"without prune": args.workdir / "kept", "with prune": args.workdir / "pruned"}
    for directory in runs.values():
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    start = datetime.datetime(2026, 3, 1, 2, tzinfo=datetime.UTC)
    nights: list[tuple[str, set[tuple[str, ...]]]] = []
    for night in range(args.nights):
        if night:
            tenant.change(args.change, night)
        snapshot_at = f"{start + datetime.timedelta(days=night):%Y-%m-%dT%H:%M:%S}.000Z"
        nights.append((snapshot_at, set(tenant.tables["automation_exclusions"])))
        for name, directory in runs.items():
            load(tenant, directory, snapshot_at)
            database = directory / "models.duckdb"
            dbt(
                directory,
                database,
                "build",
                "--indirect-selection",
                "cautious",
                "--select",
                *SELECTED,
            )
            if name == "with prune":
                dbt(directory, database, "run-operation", "prune_raw_snapshots")

    expected = expected_history(nights)
    for name, directory in runs.items():
        found = exclusion_history(directory / "models.duckdb")
        if found != expected:
            msg = f"{name}: automation_exclusion_history differs from the simulation's ({len(found ^ expected)} rows)"
            raise SystemExit(msg)

    streams = list(tenant.tables)
    counts = {name: stored(d, d / "models.duckdb", streams) for name, d in runs.items()}
    sizes = ", ".join(f"{s} {len(tenant.tables[s]):,}" for s in streams)
    print(
        f"history: {args.nights} nightly runs, {args.change:.0%} of rows changed a night; "
        f"the tenant after the last night: {sizes}"
    )
    print(
        f"  {'stream':<24}{'without prune: loaded + history = stored':>44}{'with prune: loaded + history = stored':>42}"
    )
    totals = {name: [0, 0] for name in runs}
    for stream in streams:
        cells = []
        for name in runs:
            loaded, history = counts[name][stream]
            totals[name][0] += loaded
            totals[name][1] += history
            cells.append(f"{loaded:>12,} + {history:>8,} = {loaded + history:>10,}")
        print(f"  {stream:<24}{cells[0]:>44}{cells[1]:>42}")
    for name, directory in runs.items():
        totals[name][0] += lines(directory / "full_table_snapshots.jsonl")
    cells = [f"{lo:>12,} + {hi:>8,} = {lo + hi:>10,}" for lo, hi in totals.values()]
    print(f"  {'all (+ full_table_snapshots)':<24}{cells[0]:>44}{cells[1]:>42}")
    without, with_prune = (sum(v) for v in totals.values())
    print(
        f"  stored with the prune: {with_prune / without:.3f}x of without "
        f"({without / with_prune:.1f}x fewer rows); automation_exclusion_history equals the "
        "simulation's in both"
    )


if __name__ == "__main__":
    main()
