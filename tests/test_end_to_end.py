"""End to end outside Meltano: the README's plain `tap-accessgov | target-jsonl` recipe,
checked row for row against the emulator's ground truth run after run (the later runs
incremental), and plain `tap-accessgov | target-postgres`, the target with its own defaults,
record validation on, as a user without meltano.yml gets it, from tenants of the newest and of
changed shapes. The path meltano.yml ships into PostgreSQL (`check_loaded_tables`) is run by
tests/test_first_hour.py, as a new user runs it."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import typing as t
from collections import Counter
from pathlib import Path

from emulator import Dataset, Emulator, unpopulated
from emulator.catalog import app_entitlement_object, app_object
from tap_accessgov import schemas
from tests.conftest import (
    BIN,
    E2E_DATASET,
    ON_EVERY_SERVER,
    ROOT,
    STREAMS,
    ns,
    sync,
    tap_config,
)
from tests.readme import readme_script


def truth_feed_keys(emulator: Emulator) -> Counter:
    return Counter(
        (
            e["feed"]["appId"],
            e["feed"]["appEntitlementId"],
            e["feed"]["appUserId"],
            e["feed"].get("eventType", "GRANT_EVENT_TYPE_UNSPECIFIED"),
            ns(e["feed"]["date"]) // 1000,  # PostgreSQL keeps microseconds
        )
        for e in emulator.dataset.feed_entries()
    )


def truth_exclusions(emulator: Emulator) -> Counter:
    return Counter(
        (app_id, entitlement_id, entry["user"]["id"])
        for app_id, entitlement_id in emulator.dataset.exclusion_entitlements
        for entry in emulator.dataset.exclusion_entries(app_id, entitlement_id)
    )


def truth_users(emulator: Emulator) -> set[str]:
    """The ids ``users`` holds: the directory and the users of the exclusion entries."""
    directory = {user.user_id for user in emulator.dataset.directory_users()}
    return directory | {u for _, _, u in truth_exclusions(emulator)}


def check_loaded_tables(connection: t.Any, schema: str, emulator: Emulator) -> None:
    """What target-postgres, as shipped, loaded into ``schema`` from a run of every stream
    (tests/test_first_hour.py: the README's job in a fresh clone) is the emulator's truth:
    the grant feed's keys and objects, and the latest snapshot's automation exclusions and
    directory users, their typed columns as the service sent them."""

    def table(sql: str) -> list[tuple]:
        return connection.execute(sql.format(schema=f'"{schema}"')).fetchall()

    directory = emulator.dataset.directory
    feed = table(
        'SELECT "appId", "appEntitlementId", "appUserId", "eventType", '
        "(extract(epoch FROM date) * 1000000)::bigint, feed->>'date' FROM {schema}.grant_feed"
    )
    assert Counter(row[:5] for row in feed) == truth_feed_keys(emulator)
    assert all(ns(row[5]) // 1000 == row[4] for row in feed)
    feeds = table("SELECT feed::text FROM {schema}.grant_feed")
    assert Counter(json.dumps(json.loads(row[0]), sort_keys=True) for row in feeds) == Counter(
        json.dumps(e["feed"], sort_keys=True) for e in emulator.dataset.feed_entries()
    )
    # the full-table streams' rows of the run's snapshot (each run keeps its own copy)
    latest = (
        ' WHERE "snapshotAt" = (SELECT max("snapshotAt") FROM {schema}.full_table_snapshots'
        " WHERE stream = '%s')"
    )
    exclusions = table(
        'SELECT "appId", "appEntitlementId", "userId" FROM {schema}.automation_exclusions'
        + latest % "automation_exclusions"
    )
    assert Counter(exclusions) == truth_exclusions(emulator)
    assert len(exclusions) > 100
    users = table(
        'SELECT id, "displayName", email, status, profile::text FROM {schema}.users'
        + latest % "users"
    )
    # the directory's users as it sends them (unset fields empty), the excluded among them
    expected_users = {
        user["id"]: unpopulated.filled(user, unpopulated.USER)
        for user in map(directory.record, directory.listed())
    }
    assert expected_users.keys() == truth_users(emulator)
    assert len(users) == len(expected_users)
    for user_id, name, email, status, profile in users:
        truth = expected_users[user_id]
        assert (name, email, status) == (
            truth.get("displayName"),
            truth.get("email"),
            truth.get("status"),
        )
        loaded_profile = json.loads(profile) if profile else None
        assert (loaded_profile or None) == (truth.get("profile") or None)


def test_every_record_matches_the_schema_the_tap_sends(e2e_emulator: Emulator) -> None:
    """The check target-postgres no longer makes (meltano.yml ships validate_records: false):
    every record of every stream, expanded objects included, against its SCHEMA message, with
    the same jsonschema validator. Like the target's, it does not check date-time formats
    (jsonschema needs rfc3339-validator, which neither environment has); the target still
    parses every date-time itself, validating or not."""
    from jsonschema import Draft7Validator, FormatChecker

    config = {**tap_config(e2e_emulator), "expand_mask": ["*"]}
    result = sync(config)
    assert set(result.records) == {*STREAMS, "full_table_snapshots"}
    assert any("app" in record for record in result.records["grant_feed"])
    for stream, records in result.records.items():
        validator = Draft7Validator(result.schemas[stream], format_checker=FormatChecker())
        invalid = [error.message for record in records for error in validator.iter_errors(record)]
        assert invalid == [], f"{stream}: {invalid[:3]}"


def test_the_readme_plain_pipeline_recipe_delivers_every_record_and_keeps_a_state(
    meltano_plugins: None, e2e_emulator: Emulator, tmp_path: Path
) -> None:
    """``tap-accessgov | target-jsonl`` as the README's recipe runs it: the first run delivers
    every feed event, exclusion and user; a second with nothing new still ends on a STATE
    (else target-jsonl echoes none); a third, after new events, appends them and reads again
    only the bookmark instant's; a fourth, the tap failing, keeps the state as it was."""
    emulator = e2e_emulator
    target_bin = ROOT / ".meltano" / "loaders" / "target-jsonl" / "venv" / "bin"
    (tmp_path / "config.json").write_text(json.dumps(tap_config(emulator)))
    (tmp_path / "target.json").write_text(
        json.dumps({"destination_path": str(tmp_path / "out"), "do_timestamp_file": False})
    )
    (tmp_path / "out").mkdir()
    recipe = tmp_path / "recipe.sh"
    recipe.write_text(readme_script(RECIPE))
    env = {**os.environ, "PATH": f"{BIN}:{target_bin}:{os.environ['PATH']}"}

    def run_recipe() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(recipe)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def bookmark() -> str:
        state = json.loads((tmp_path / "state.json").read_text())
        return state["bookmarks"]["grant_feed"]["replication_key_value"]

    def rows(stream: str) -> list[dict]:
        return [
            json.loads(line)
            for line in (tmp_path / "out" / f"{stream}.jsonl").read_text().splitlines()
        ]

    def feed(entry: dict[str, t.Any]) -> str:
        return json.dumps(entry["feed"], sort_keys=True)

    first = run_recipe()
    assert first.returncode == 0, first.stderr[-3000:]
    assert Counter(feed(r) for r in rows("grant_feed")) == Counter(
        feed(e) for e in emulator.dataset.feed_entries()
    )
    assert Counter(
        (r["appId"], r["appEntitlementId"], r["userId"]) for r in rows("automation_exclusions")
    ) == truth_exclusions(emulator)
    assert sorted(r["id"] for r in rows("users")) == sorted(truth_users(emulator))
    latest = max((e["feed"]["date"] for e in emulator.dataset.feed_entries()), key=ns)
    assert ns(bookmark()) == ns(latest)

    second = run_recipe()  # nothing new
    assert second.returncode == 0, second.stderr[-3000:]
    assert ns(bookmark()) == ns(latest)

    before = len(rows("grant_feed"))
    known = emulator.dataset.total
    emulator.add_events(count=60)
    third = run_recipe()
    assert third.returncode == 0, third.stderr[-3000:]
    new = {feed(e) for e in emulator.dataset.feed_entries()[known:]}
    appended = rows("grant_feed")[before:]
    assert new <= {feed(r) for r in appended}
    assert all(ns(r["date"]) == ns(latest) for r in appended if feed(r) not in new)

    kept = (tmp_path / "state.json").read_text()
    emulator.faults.add(kind="403", path="/api/v1/grants/feed", times=1)
    emulator.add_events(count=10)
    failed = run_recipe()
    assert failed.returncode != 0
    assert "pipeline failed: state.json left as it was" in failed.stderr
    assert (tmp_path / "state.json").read_text() == kept


RECIPE = "tests/test_end_to_end.py::test_the_readme_plain_pipeline_recipe_delivers_every_record_and_keeps_a_state"


def loaded_as(value: t.Any, schema: dict[str, t.Any]) -> t.Any:
    """What a column of target-postgres holds for a value the service sent: int64 strings as
    integers (the tap's one conversion), date-times as timestamps to the microsecond, JSON
    values as they were."""
    if value is None:
        return None
    if schema.get("format") == "date-time":
        return ns(value) // 1000
    if "integer" in schema["type"] and isinstance(value, str):
        return int(value)
    return value


def as_loaded(value: t.Any) -> t.Any:
    """A column's value in the terms of ``loaded_as``."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return round(value.timestamp() * 1_000_000)
    return value


def pipe_into_target_postgres(emulator: Emulator, url: str, schema: str, tmp_path: Path) -> None:
    """``tap-accessgov | target-postgres``, the target with its default settings (record
    validation on), into ``schema``; both must succeed and the target refuse no record."""
    target = ROOT / ".meltano" / "loaders" / "target-postgres" / "venv" / "bin" / "target-postgres"
    tap_json = tmp_path / "tap.json"
    tap_json.write_text(json.dumps({**tap_config(emulator), "expand_mask": ["*"]}))
    target_json = tmp_path / "target.json"
    target_json.write_text(json.dumps({"sqlalchemy_url": url, "default_target_schema": schema}))
    with (tmp_path / "tap.log").open("w") as tap_log:
        tap = subprocess.Popen(
            [str(BIN / "tap-accessgov"), "--config", str(tap_json)],
            stdout=subprocess.PIPE,
            stderr=tap_log,
        )
        loaded = subprocess.run(
            [str(target), "--config", str(target_json)],
            stdin=tap.stdout,
            capture_output=True,
            timeout=600,
            check=False,
        )
        assert tap.stdout is not None
        tap.stdout.close()
        assert tap.wait(timeout=60) == 0, (tmp_path / "tap.log").read_text()[-3000:]
    assert loaded.returncode == 0, loaded.stderr.decode()[-3000:]
    assert "Record Message Validation Error" not in loaded.stderr.decode()


@ON_EVERY_SERVER
def test_tap_piped_into_target_postgres_validating_loads_the_newest_shapes_exactly(
    meltano_plugins: None, e2e_emulator: Emulator, postgres, warehouse_url: str, tmp_path: Path
) -> None:
    """A plain pipe into target-postgres with its default settings, record validation on (as
    a user who does not take meltano.yml's settings gets it), from a tenant of the service's
    newest shapes, expanded objects included: the run succeeds and every table holds, column
    for column, what the service sent."""
    emulator = e2e_emulator
    connection, schema = postgres
    pipe_into_target_postgres(emulator, warehouse_url, schema, tmp_path)

    def rows(table: str) -> list[dict[str, t.Any]]:
        cursor = connection.execute(f'SELECT * FROM "{schema}"."{table}"')
        names = [column.name for column in cursor.description]
        return [
            {n: as_loaded(v) for n, v in zip(names, row, strict=True) if not n.startswith("_sdc")}
            for row in cursor.fetchall()
        ]

    def expected(objects: list[dict[str, t.Any]], stream_schema: dict) -> list[dict]:
        properties = stream_schema["properties"]
        return [
            {
                name: loaded_as(obj.get(name), sub)
                for name, sub in properties.items()
                if name != "snapshotAt"
            }
            for obj in objects
        ]

    def by_key(records: list[dict[str, t.Any]], *key: str) -> dict[tuple, dict]:
        return {
            tuple(r[k] for k in key): {k: v for k, v in r.items() if k != "snapshotAt"}
            for r in records
        }

    ds = emulator.dataset
    apps = [app_object(ds, p) for p in ds.current_apps()]
    assert any(app["annotations"] for app in apps)
    assert by_key(rows("apps"), "id") == by_key(expected(apps, schemas.APP), "id")
    entitlements = [
        app_entitlement_object(ds, p, k)
        for p in ds.current_apps()
        for k in ds.catalog.current_entitlements(p)
    ]
    assert by_key(rows("app_entitlements"), "appId", "id") == by_key(
        expected(entitlements, schemas.APP_ENTITLEMENT), "appId", "id"
    )
    # the directory's users, as it sends them (unset fields empty, as the catalog does)
    users = [
        unpopulated.filled(ds.directory.record(u), unpopulated.USER) for u in ds.directory.listed()
    ]
    assert {user["id"] for user in users} == truth_users(emulator)
    assert by_key(rows("users"), "id") == by_key(expected(users, schemas.USER), "id")
    assert Counter(
        (r["appId"], r["appEntitlementId"], r["userId"]) for r in rows("automation_exclusions")
    ) == truth_exclusions(emulator)
    feed = rows("grant_feed")
    assert Counter(json.dumps(r["feed"], sort_keys=True) for r in feed) == Counter(
        json.dumps(e["feed"], sort_keys=True) for e in ds.feed_entries()
    )
    assert all(
        r["app"]["id"] == r["appId"] and r["entitlement"]["id"] == r["appEntitlementId"]
        for r in feed
    )


def test_tap_piped_into_target_postgres_validating_loads_changed_shapes(
    meltano_plugins: None, make_emulator, postgres, warehouse_url: str, tmp_path: Path
) -> None:
    """The same pipe from a tenant whose release changed a field's type on every endpoint
    (emulator/shapes.py): no record is refused, every record is loaded, and the values the
    tap kept as JSON text are there."""
    emulator = make_emulator(Dataset(**E2E_DATASET), shapes="changed")
    connection, schema = postgres
    pipe_into_target_postgres(emulator, warehouse_url, schema, tmp_path)

    def count(table: str) -> int:
        return connection.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()[0]

    ds = emulator.dataset
    assert count("apps") == len(ds.current_apps())
    assert count("grant_feed") == len(ds.feed_entries())
    assert count("automation_exclusions") == sum(truth_exclusions(emulator).values())
    assert count("users") == len(truth_users(emulator))
    tickets = connection.execute(
        f'''SELECT feed->>'ticketId' FROM "{schema}".grant_feed WHERE feed ? 'ticketId' '''
    ).fetchall()
    assert tickets
    assert all(ticket.isdigit() for (ticket,) in tickets)
