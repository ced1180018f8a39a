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

Every build is followed by the prune (``prune_raw_snapshots``, as the shipped job runs it):
after each step the loaded tables hold only the copies kept (the latest complete snapshot of
each stream, and the killed run's partial one, newer), yet automation_exclusion_history equals
the history the emulator's states make, instant for instant (issue 28, history without a
copy per run).

The scenario runs inside each engine's models scenario (tests/test_evidence_models.py), which
adds its own checks and changes at the points ``Alongside`` names: one tenant, one set of
loads and builds per engine for every model's comparison.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import tempfile
import time
import typing as t
from collections import Counter
from pathlib import Path

from emulator import Dataset, Emulator
from tests.conftest import BIN, CREDENTIAL, FULL_TABLE, ROOT
from tests.test_models import (
    as_of_instant,
    compare,
    exclusion_changes,
    logged_change,
    truth,
)

Query = t.Callable[[str], list[tuple]]
Step = t.Callable[[], None]
# Per full-table stream: the distinct snapshotAt of its loaded rows, and their number.
RawCopies = t.Callable[[], dict[str, tuple[int, int]]]


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


def check_history_is_the_truth(
    query: Query, states: list[set[tuple[str, str, str]]], ds: Dataset
) -> set[tuple[t.Any, ...]]:
    """automation_exclusion_history, row for row, as the service's states at the complete
    runs make it: per exclusion ever held, the first and the last run's snapshot that held it
    and the next run's snapshot after that (its removal), current when the last run held it;
    who added it and who removed it, as the emulator's system log says (``logged_change``).
    Returns the rows."""
    instants = [
        row[0]
        for row in query(
            "SELECT snapshot_at FROM {schema}.history_automation_exclusions "
            "WHERE change_type = 'snapshot' ORDER BY snapshot_at"
        )
    ]
    assert len(instants) == len(states), "one snapshot read per complete run"
    expected = set()
    changes = exclusion_changes(ds)
    for key in set().union(*states):
        held = [n for n, state in enumerate(states) if key in state]
        after = held[-1] + 1
        removed = instants[after] if after < len(states) else None
        last_added = instants[max(n for n in held if n == 0 or n - 1 not in held)]
        added_by, removed_by = logged_change(changes, key, last_added, removed)
        first_seen, last_seen = instants[held[0]], instants[held[-1]]
        row = (*key, first_seen, last_seen, removed, removed is None, added_by, removed_by)
        expected.add(row)
    found = set(
        query(
            "SELECT app_id, app_entitlement_id, user_id, first_seen_at, last_seen_at, "
            "removed_at, is_current, added_by_user_id, removed_by_user_id "
            "FROM {schema}.automation_exclusion_history"
        )
    )
    assert found == expected, (sorted(found - expected)[:3], sorted(expected - found)[:3])
    assert any(row[7] for row in found), "the log names who added the exclusions"
    return found


def check_raw_copies(raw_copies: RawCopies, expected: dict[str, tuple[int, int]]) -> None:
    """The loaded full-table rows are the copies kept, and full_table_snapshots one row per
    stream: the prune deleted every older copy."""
    found = raw_copies()
    assert {s: found[s] for s in expected} == expected
    assert found["full_table_snapshots"] == (1, len(FULL_TABLE))


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


def one_copy(ds: Dataset, expected: dict[str, t.Any]) -> dict[str, tuple[int, int]]:
    """The loaded rows after a complete run and the prune: one copy of each stream."""
    return {
        "automation_exclusions": (1, len(expected["exclusions"])),
        "users": (1, len(expected["users"])),
        "app_entitlements": (1, len(expected["entitlements"])),
        "apps": (1, len(ds.current_apps())),
    }


def nothing() -> None:
    pass


@dataclasses.dataclass(frozen=True)
class Alongside:
    """What a scenario that carries other checks does at the removals' steps: after the first
    complete run's checks; before the second run (after the removals, before the truth of the
    second run is taken, so that changes made here are in it); after the second run's
    checks."""

    after_first: Step = nothing
    before_second: Step = nothing
    after_second: Step = nothing


def scenario(
    emulator: Emulator,
    query: Query,
    raw_copies: RawCopies,
    load_and_build: Step,
    load_killed: Step,
    build: Step,
    alongside: Alongside = Alongside(),
) -> None:
    """Each of ``load_and_build`` and ``build`` ends with the prune."""
    ds = emulator.dataset
    as_of = as_of_instant(ds)
    removals = pick_removals(ds)
    ever = exclusion_keys(ds)

    load_and_build()
    first = service_now(ds, as_of)
    check(query, first, ever, snapshots=1)
    check_history_is_the_truth(query, [first["exclusions"]], ds)
    check_raw_copies(raw_copies, one_copy(ds, first))
    alongside.after_first()

    for kind in ("exclusion", "entitlement", "user"):
        emulator.remove(**removals[kind])
    alongside.before_second()
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
    history = check_history_is_the_truth(query, [first["exclusions"], second["exclusions"]], ds)
    removed_by = {row[:3]: row[8] for row in history if row[5] is not None}
    assert removed_by[tuple(exclusion.values())], "the exclusion removed alone: its remover"
    with_the_entitlement = [key for key in gone if key[:2] == removed_entitlement]
    assert with_the_entitlement
    assert not any(removed_by[key] for key in with_the_entitlement), "no exclusion removal logged"
    check_raw_copies(raw_copies, one_copy(ds, second))
    alongside.after_second()

    emulator.remove(**removals["later"])
    load_killed()
    copies, rows = raw_copies()["automation_exclusions"]
    assert copies == 2, "the killed run loaded rows of its own snapshot"
    assert rows > len(second["exclusions"])
    build()
    check(query, second, ever, snapshots=2)
    check_history_is_the_truth(query, [first["exclusions"], second["exclusions"]], ds)
    # the partial copy is newer than the snapshot the history read: kept, never read
    assert raw_copies()["automation_exclusions"] == (copies, rows)

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
    states = [first["exclusions"], second["exclusions"], fourth["exclusions"]]
    check_history_is_the_truth(query, states, ds)
    check_raw_copies(raw_copies, one_copy(ds, fourth))


def jsonl_copies(jsonl: Path) -> RawCopies:
    """``RawCopies`` of target-jsonl's files in ``jsonl``."""
    import duckdb

    def raw_copies() -> dict[str, tuple[int, int]]:
        found = {}
        with duckdb.connect() as db:
            for stream in (*FULL_TABLE, "full_table_snapshots"):
                counted = db.execute(
                    "SELECT count(DISTINCT snapshotAt), count(*) "
                    "FROM read_json(?, format='newline_delimited')",
                    [str(jsonl / f"{stream}.jsonl")],
                ).fetchone()
                assert counted is not None
                found[stream] = (int(counted[0]), int(counted[1]))
        return found

    return raw_copies


def postgres_copies(connection: t.Any, schema: str) -> RawCopies:
    """``RawCopies`` of target-postgres's tables in ``schema``."""

    def raw_copies() -> dict[str, tuple[int, int]]:
        return {
            stream: tuple(
                connection.execute(
                    f'SELECT count(DISTINCT "snapshotAt"), count(*) FROM "{schema}".{stream}'
                ).fetchone()
            )
            for stream in (*FULL_TABLE, "full_table_snapshots")
        }

    return raw_copies
