"""The change logs and the prune on hand-written loads (DuckDB over JSONL files, no tap run):
what the emulator cannot easily stage.

- several runs loaded before one build (a failed build, or the upgrade: every copy loaded
  already), an exclusion removed and added again, and a run that failed half-way in between:
  the log reads every complete snapshot in order, and the partial rows count for nothing;
- a stream not loaded yet (no file): its log builds empty, the prune skips it, and once it is
  loaded its log starts;
- the prune keeps the latest snapshot the log has read and deletes the others' lines, each
  remaining line byte for byte; a dry run deletes nothing; ``--full-refresh`` leaves the logs.

The end-to-end runs through Meltano, on DuckDB and PostgreSQL, are in removals.py (run by
test_evidence_models.py's scenario on each engine).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from tests.conftest import FULL_TABLE, meltano
from tests.test_models import dbt_duckdb_env

S1, S2, PARTIAL, S3, S4 = (
    "2026-01-01T02:00:00.000Z",
    "2026-01-02T02:00:00.000Z",
    "2026-01-02T14:00:00.000Z",  # a run that failed half-way: no full_table_snapshots line
    "2026-01-03T02:00:00.000Z",
    "2026-01-04T02:00:00.000Z",
)
BUILD = ("build", "--indirect-selection", "cautious", "--select", "fqn:accessgov.history")
SELECTED = (*BUILD, "stg_system_log", "automation_exclusion_history")


def exclusion(user: str, at: str) -> str:
    row = {"appId": "a1", "appEntitlementId": "e1", "appUserId": f"au-{user}", "userId": user}
    return json.dumps({**row, "snapshotAt": at})


def complete(stream: str, at: str) -> str:
    return json.dumps({"stream": stream, "snapshotAt": at, "completedAt": at})


def append(path: Path, *lines: str) -> None:
    with path.open("a") as out:
        out.writelines(line + "\n" for line in lines)


def query(database: Path, sql: str) -> list[tuple]:
    import duckdb

    with duckdb.connect(str(database), read_only=True) as db:
        return db.execute(sql).fetchall()


def day(at: str | None) -> str | None:
    return None if at is None else at[:10]


USER_C = json.dumps(
    {
        "id": "C",
        "displayName": "Cy",
        "email": "cy@example.com",
        "status": "ENABLED",
        "directoryStatus": "ENABLED",
        "updatedAt": S4,
        "snapshotAt": S4,
    }
)


def history(database: Path) -> set[tuple]:
    rows = query(
        database,
        "SELECT user_id, first_seen_at, last_seen_at, removed_at, is_current "
        "FROM access.automation_exclusion_history",
    )
    return {
        (u, day(f.isoformat()), day(la.isoformat()), day(r and r.isoformat()), c)
        for u, f, la, r, c in rows
    }


def test_the_log_reads_every_run_in_order_and_the_prune_keeps_what_it_has_not_read(
    meltano_plugins: None, tmp_path: Path
) -> None:
    jsonl, database = tmp_path / "jsonl", tmp_path / "history.duckdb"
    jsonl.mkdir()
    exclusions, snapshots = (
        jsonl / "automation_exclusions.jsonl",
        jsonl / "full_table_snapshots.jsonl",
    )
    env = dbt_duckdb_env(tmp_path, jsonl, database)

    # Three complete runs and a partial one, loaded before the first build; no users yet.
    append(exclusions, exclusion("A", S1), exclusion("B", S1))
    append(exclusions, exclusion("B", S2), exclusion("C", S2))
    append(exclusions, exclusion("Z", PARTIAL))
    append(exclusions, exclusion("A", S3), exclusion("B", S3), exclusion("C", S3))
    append(snapshots, *(complete("automation_exclusions", at) for at in (S1, S2, S3)))
    meltano("invoke", "dbt-duckdb", *SELECTED, env=env)

    logged = query(
        database,
        "SELECT user_id, change_type, snapshot_at FROM access.history_automation_exclusions",
    )
    assert Counter((u, c, day(s.isoformat())) for u, c, s in logged) == Counter(
        [
            ("A", "added", "2026-01-01"),
            ("A", "removed", "2026-01-02"),
            ("A", "added", "2026-01-03"),
            ("B", "added", "2026-01-01"),
            ("C", "added", "2026-01-02"),
            (None, "snapshot", "2026-01-01"),
            (None, "snapshot", "2026-01-02"),
            (None, "snapshot", "2026-01-03"),
        ]
    )
    assert history(database) == {
        ("A", "2026-01-01", "2026-01-03", None, True),
        ("B", "2026-01-01", "2026-01-03", None, True),
        ("C", "2026-01-02", "2026-01-03", None, True),
    }
    assert query(database, "SELECT count(*) FROM access.history_users") == [(0,)]

    meltano("invoke", "dbt-duckdb:prune", env=env)
    # Only the latest snapshot read stays, line for line; the partial run's rows went too.
    assert exclusions.read_text() == "".join(
        line + "\n" for line in (exclusion("A", S3), exclusion("B", S3), exclusion("C", S3))
    )
    assert snapshots.read_text() == complete("automation_exclusions", S3) + "\n"
    assert not (jsonl / "users.jsonl").exists()

    # The fourth run: A and B removed, and users loaded for the first time.
    append(exclusions, exclusion("C", S4))
    users = jsonl / "users.jsonl"
    append(users, USER_C)
    append(snapshots, complete("automation_exclusions", S4), complete("users", S4))
    meltano("invoke", "dbt-duckdb", *SELECTED, env=env)
    expected = {
        ("A", "2026-01-01", "2026-01-03", "2026-01-04", False),
        ("B", "2026-01-01", "2026-01-03", "2026-01-04", False),
        ("C", "2026-01-02", "2026-01-04", None, True),
    }
    assert history(database) == expected
    assert Counter(
        query(database, "SELECT id, display_name, change_type FROM access.history_users")
    ) == Counter([("C", "Cy", "added"), (None, None, "snapshot")])

    before = exclusions.read_text()
    meltano(
        "invoke",
        "dbt-duckdb",
        "run-operation",
        "prune_raw_snapshots",
        "--args",
        "{dry_run: true}",
        env=env,
    )
    assert exclusions.read_text() == before
    meltano("invoke", "dbt-duckdb:prune", env=env)
    assert exclusions.read_text() == exclusion("C", S4) + "\n"
    assert users.read_text() == USER_C + "\n"

    # A log begun before one of its columns was declared (a release that reads one more
    # field): the next build adds the column, null in the rows logged before.
    import duckdb

    with duckdb.connect(str(database)) as db:
        db.execute("ALTER TABLE access.history_users DROP COLUMN display_name")

    # A full refresh rebuilds the marts but never the logs: the history stays whole.
    meltano("invoke", "dbt-duckdb", *SELECTED, "--full-refresh", env=env)
    assert history(database) == expected
    assert Counter(
        query(database, "SELECT id, display_name, change_type FROM access.history_users")
    ) == Counter([("C", None, "added"), (None, None, "snapshot")])


def test_every_full_table_stream_has_a_change_log() -> None:
    """A full-table stream without its log keeps no history once the prune runs, and the
    prune leaves its loaded copies growing: the registration line is not to be forgotten."""
    history = Path(__file__).resolve().parents[1] / "dbt_accessgov" / "models" / "history"
    logged = {
        found.group(1)
        for model in history.glob("history_*.sql")
        if (found := re.search(r"full_table_history\('(\w+)'\)", model.read_text()))
    }
    assert logged == set(FULL_TABLE)
