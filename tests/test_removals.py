"""Full-table streams tell today's truth, on both engines, through Meltano and dbt as shipped:

1. a first run; the models equal the emulator's truth;
2. an exclusion, an app entitlement (with its exclusions) and a user are removed on the
   service; a second run; the models lose exactly those (the app entitlement leaves
   stg_app_entitlements, and the marts show no name for it), and automation_exclusion_history
   says when they disappeared;
3. another exclusion is removed and a third run is killed half-way (the tap is SIGKILLed
   while the exclusions endpoint hangs): partial rows of its snapshot are loaded, yet the
   rebuilt models equal the second run's;
4. the app entitlement is added again and a fourth run completes: the models show the third
   removal, and the entitlement's exclusions are back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import typing as t
from collections import Counter
from pathlib import Path

from emulator import Dataset, Emulator
from tests.conftest import BIN, CREDENTIAL, ROOT, meltano
from tests.test_models import as_of_instant, compare, duckdb_models, postgres_models, truth

Query = t.Callable[[str], list[tuple]]


def exclusions_by_entitlement(ds: Dataset) -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for row in ds.excluded_users():
        found.setdefault((row["app_id"], row["app_entitlement_id"]), []).append(row["user_id"])
    return found


def pick_removals(ds: Dataset) -> dict[str, t.Any]:
    """An exclusion of a user excluded more than once (the user stays), a whole app
    entitlement, a user excluded on several entitlements, and one more exclusion for the
    killed run: all distinct, so each removal shows on its own."""
    by_entitlement = exclusions_by_entitlement(ds)
    times_excluded = Counter(u for users in by_entitlement.values() for u in users)
    entitlements = sorted(by_entitlement, key=lambda key: -len(by_entitlement[key]))
    busiest, gone_entitlement, later = entitlements[0], entitlements[1], entitlements[2]
    user = next(u for u in by_entitlement[busiest] if times_excluded[u] > 1)
    removed_user = max(
        (
            u
            for u in by_entitlement[later]
            if u != user and u not in by_entitlement[gone_entitlement]
        ),
        key=lambda u: times_excluded[u],
    )
    last = next(u for u in by_entitlement[busiest] if u not in (user, removed_user))
    return {
        "exclusion": {"app_id": busiest[0], "app_entitlement_id": busiest[1], "user_id": user},
        "entitlement": {"app_id": gone_entitlement[0], "app_entitlement_id": gone_entitlement[1]},
        "user": {"user_id": removed_user},
        "later": {"app_id": busiest[0], "app_entitlement_id": busiest[1], "user_id": last},
    }


def exclusion_keys(ds: Dataset) -> set[tuple[str, str, str]]:
    return {(r["app_id"], r["app_entitlement_id"], r["user_id"]) for r in ds.excluded_users()}


def check_staging_and_history(
    query: Query, expected: dict[str, t.Any], ever: set[tuple[str, str, str]], snapshots: int
) -> None:
    """stg_users holds the current users, stg_app_entitlements the catalog's current app
    entitlements; the history holds every exclusion ever seen, the current ones current, the
    others with the instant they were first found missing."""
    users = Counter(r[0] for r in query("SELECT user_id FROM {schema}.stg_users"))
    assert users == expected["users"]
    entitlements = Counter(
        query("SELECT app_id, app_entitlement_id FROM {schema}.stg_app_entitlements")
    )
    assert entitlements == expected["entitlements"]
    history = query(
        "SELECT app_id, app_entitlement_id, user_id, is_current, first_seen_at, last_seen_at, "
        "removed_at FROM {schema}.automation_exclusion_history"
    )
    assert {row[:3] for row in history} == ever
    assert {row[:3] for row in history if row[3]} == expected["exclusions"]
    for *key, is_current, first, last, removed in history:
        assert (removed is None) == is_current, key
        assert first <= last, key
        assert removed is None or removed > last, key
    instants = {row[4] for row in history} | {row[5] for row in history}
    assert len(instants) == snapshots, "one instant per complete snapshot"


def service_now(ds: Dataset, as_of: int) -> dict[str, t.Any]:
    """What the models must show for the service as it is now."""
    return {
        "models": truth(ds, as_of),
        "users": Counter(
            {row["user_id"] for row in ds.excluded_users()}
            | {user.user_id for user in ds.directory_users()}
        ),
        "entitlements": Counter(
            (app.id, entitlement_id)
            for position, app in enumerate(ds.catalog_apps)
            for k, entitlement_id in enumerate(app.entitlement_ids)
            if position in ds.current_apps() and ds.entitlement_exists(position, k)
        ),
        "exclusions": exclusion_keys(ds),
    }


def check(query: Query, expected: dict[str, t.Any], ever: set, snapshots: int) -> None:
    compare(query, expected["models"])
    check_staging_and_history(query, expected, ever, snapshots)


def descendants(pid: int) -> list[int]:
    """The process ids below ``pid`` (Linux /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def killed_run(emulator: Emulator, env: dict[str, str], *task: str) -> None:
    """``meltano run *task``, with the tap SIGKILLed while it waits on a hanging exclusions
    request, after the entitlements before it were delivered. The run must fail."""
    ds = emulator.dataset
    present = [key for key in ds.exclusion_entitlements if ds.has_entitlement(*key)]
    app_id, entitlement_id = present[6]
    path = f"/api/v1/apps/{app_id}/entitlements/{entitlement_id}/automation/exclusions"
    emulator.faults.add(kind="slow", path=path, delay=30)
    emulator.reset_stats()
    # Meltano's log goes to a file, not a pipe read only at the end: a run that logs more than
    # a pipe holds (64 KiB) before the hanging request would block on its own log.
    with tempfile.TemporaryFile(mode="w+") as log:
        run = subprocess.Popen(
            [str(BIN / "meltano"), "run", *task],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )

        def output() -> str:
            log.seek(0)
            return log.read()

        try:
            deadline = time.monotonic() + 300
            while not emulator.stats["faults_by_kind"].get("slow"):
                assert run.poll() is None, output()[-3000:]
                assert time.monotonic() < deadline, "the run never reached the hanging request"
                time.sleep(0.1)
            time.sleep(5)  # the tap writes the entitlements before it (fetched ahead already)
            taps = [p for p in descendants(run.pid) if "--catalog" in cmdline(p)]
            taps = [p for p in taps if "tap-accessgov" in cmdline(p)]
            assert taps, "the tap is running"
            for pid in taps:
                os.kill(pid, signal.SIGKILL)
            run.wait(timeout=300)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        logged = output()
    assert run.returncode != 0, logged[-3000:]
    assert CREDENTIAL.client_secret not in logged


def scenario(
    emulator: Emulator,
    query: Query,
    loaded_snapshots: t.Callable[[], int],
    load_and_build: t.Callable[[], None],
    load_killed: t.Callable[[], None],
    build: t.Callable[[], None],
) -> None:
    ds = emulator.dataset
    as_of = as_of_instant(ds)
    removals = pick_removals(ds)
    ever = exclusion_keys(ds)

    load_and_build()
    check(query, service_now(ds, as_of), ever, snapshots=1)

    for kind in ("exclusion", "entitlement", "user"):
        emulator.remove(**removals[kind])
    second = service_now(ds, as_of)
    gone = ever - second["exclusions"]
    exclusion = removals["exclusion"]
    assert (exclusion["app_id"], exclusion["app_entitlement_id"], exclusion["user_id"]) in gone
    assert len(gone) > 3, "the entitlement and the user took several exclusions with them"
    assert removals["user"]["user_id"] not in second["users"]
    removed_entitlement = tuple(removals["entitlement"].values())
    assert removed_entitlement not in second["entitlements"]
    load_and_build()
    check(query, second, ever, snapshots=2)

    emulator.remove(**removals["later"])
    load_killed()
    assert loaded_snapshots() == 3, "the killed run loaded rows of its own snapshot"
    build()
    check(query, second, ever, snapshots=2)

    emulator.restore(**removals["entitlement"])  # added again: back in the models
    load_and_build()
    fourth = service_now(ds, as_of)
    later = removals["later"]
    back = {key for key in ever if key[:2] == removed_entitlement}
    assert back
    assert removed_entitlement in fourth["entitlements"]
    assert (
        fourth["exclusions"]
        == (
            second["exclusions"]
            - {(later["app_id"], later["app_entitlement_id"], later["user_id"])}
        )
        | back
    )
    check(query, fourth, ever, snapshots=3)


def test_removals_reach_the_duckdb_models_and_a_killed_run_changes_nothing(
    meltano_plugins: None, e2e_emulator: Emulator, tmp_path: Path
) -> None:
    import duckdb

    env, query = duckdb_models(e2e_emulator, tmp_path, as_of_instant(e2e_emulator.dataset))

    def loaded_snapshots() -> int:
        with duckdb.connect() as db:
            found = db.execute(
                "SELECT count(DISTINCT snapshotAt) FROM read_json(?, format='newline_delimited')",
                [str(tmp_path / "jsonl" / "automation_exclusions.jsonl")],
            ).fetchone()
        assert found is not None
        return int(found[0])

    scenario(
        e2e_emulator,
        query,
        loaded_snapshots,
        lambda: meltano("run", "tap-accessgov", "target-jsonl", "dbt-duckdb:build", env=env),
        lambda: killed_run(e2e_emulator, env, "tap-accessgov", "target-jsonl"),
        lambda: meltano("run", "dbt-duckdb:build", env=env),
    )


def test_removals_reach_the_postgres_models_and_a_killed_run_changes_nothing(
    meltano_plugins: None, e2e_emulator: Emulator, postgres, warehouse_url: str, tmp_path: Path
) -> None:
    connection, schema = postgres
    as_of = as_of_instant(e2e_emulator.dataset)
    env, query = postgres_models(e2e_emulator, tmp_path, as_of, connection, schema, warehouse_url)

    def loaded_snapshots() -> int:
        return int(
            connection.execute(
                f'SELECT count(DISTINCT "snapshotAt") FROM "{schema}".automation_exclusions'
            ).fetchone()[0]
        )

    scenario(
        e2e_emulator,
        query,
        loaded_snapshots,
        lambda: meltano("run", "accessgov", env=env),  # the shipped job: load, then build
        lambda: killed_run(e2e_emulator, env, "tap-accessgov", "target-postgres"),
        lambda: meltano("run", "dbt-postgres:build", env=env),
    )
