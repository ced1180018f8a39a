"""BATCH messages (``batch_config``): a stream whose records leave as the tap reads them sends
them in BATCH files, the same records RECORD messages would carry; a stream that a stream map,
flattening or a deselected property changes keeps RECORD messages, since the SDK writes the
files before those apply. That a STATE never counts records still waiting in an open file is
tests/test_backfill.py's (the grant feed's windows)."""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import typing as t
from collections import Counter
from pathlib import Path

import pytest

from emulator import Dataset, Emulator
from harness.support import libpq_env, tap_env
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    E2E_DATASET,
    STREAMS,
    SyncResult,
    batch_config,
    batch_records,
    catalog_selecting,
    meltano,
    shared_emulator,
    sync,
    tap_config,
    without_run,
)
from tests.removals import pick_removals


def by_stream(result: SyncResult) -> dict[str, list[dict[str, t.Any]]]:
    """Each stream's records, from its RECORD messages and its BATCH files alike."""
    records = {name: list(rows) for name, rows in result.records.items()}
    for message in result.messages:
        if message["type"] == "BATCH":
            records.setdefault(message["stream"], []).extend(batch_records(message))
    return records


def batched_streams(result: SyncResult) -> set[str]:
    return {m["stream"] for m in result.messages if m["type"] == "BATCH"}


NANOSECONDS = re.compile(r"\.\d{7,9}Z$")


def as_loaded(rows: list[dict[str, t.Any]], schema: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    """``rows`` as an SDK target loads them from RECORD messages: each top-level date-time
    value parsed into a Python datetime, which keeps microseconds (digits beyond dropped);
    nested values loaded as JSON, as sent."""
    instants = {name for name, p in schema["properties"].items() if p.get("format") == "date-time"}

    def loaded(name: str, value: t.Any) -> t.Any:
        if name in instants and isinstance(value, str) and (cut := NANOSECONDS.search(value)):
            return value[: cut.start() + 7] + "Z"
        return value

    return [{name: loaded(name, value) for name, value in row.items()} for row in rows]


def same_rows(rows: list[dict[str, t.Any]]) -> list[str]:
    """Rows comparable across two runs (without the run's snapshot stamp), in one order."""
    return sorted(repr(sorted(without_run(row).items())) for row in rows)


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_batch_files_hold_the_records_and_a_mapped_or_narrowed_stream_keeps_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, compression: str
) -> None:
    """Four streams, with and without ``batch_config``: the grant feed and apps (nothing
    changes their records) leave in BATCH files; app_entitlements (a stream map removes a
    field) and users (the catalog deselects every property but three) keep RECORD
    messages, said once each; every stream's rows are the same either way, the map and the
    selection applied. The files are gzipped as the setting says, and only then (the SDK
    gzips them all: the tap writes those without compression)."""
    config = {
        **tap_config(shared_emulator()),
        "stream_maps": {"app_entitlements": {"description": "__NULL__"}},
    }
    catalog = catalog_selecting(
        config,
        {
            "grant_feed": None,
            "apps": None,
            "app_entitlements": None,
            "users": ["displayName", "email", "department"],
        },
    )
    plain = sync(config, catalog=catalog)
    with caplog.at_level(logging.WARNING):
        batched = sync(
            {**config, "batch_config": batch_config(tmp_path, compression=compression)},
            catalog=catalog,
        )

    assert batched_streams(plain) == set()
    assert batched_streams(batched) == {"grant_feed", "apps"}
    named = {  # as the SDK names its files: the tap, the stream, the sync's UUID, the number
        m["stream"]: Path(url).name
        for m in batched.messages
        if m["type"] == "BATCH"
        for url in m["manifest"]
    }
    suffix = ".json.gz" if compression == "gzip" else ".jsonl"
    for stream, name in named.items():
        assert re.fullmatch(
            rf"tap-accessgov--{stream}-[0-9a-f-]{{36}}-\d+{re.escape(suffix)}", name
        )
    assert set(batched.records) == {"app_entitlements", "users"}
    rows, batched_rows = by_stream(plain), by_stream(batched)
    assert set(rows) == set(batched_rows) == {"grant_feed", "apps", "app_entitlements", "users"}
    for stream, expected in rows.items():
        assert expected, stream
        if stream in batched_streams(batched):  # what a target loads of RECORD messages
            expected = as_loaded(expected, plain.schemas[stream])
        assert same_rows(batched_rows[stream]) == same_rows(expected), stream
    # the service's nanoseconds: cut in the files' columns, kept where nested (loaded as JSON)
    assert [r for r in rows["grant_feed"] if NANOSECONDS.search(r["date"])]
    assert not [r for r in batched_rows["grant_feed"] if NANOSECONDS.search(r["date"])]
    assert [r for r in batched_rows["grant_feed"] if NANOSECONDS.search(r["feed"]["date"])]
    assert not [row for row in batched_rows["app_entitlements"] if "description" in row]
    assert {tuple(sorted(row)) for row in batched_rows["users"]} == {
        ("department", "displayName", "email", "id", "snapshotAt")
    }
    said = [r.getMessage() for r in caplog.records if "not BATCH" in r.getMessage()]
    assert sorted(said) == [
        "app_entitlements: RECORD messages, not BATCH files: a stream map applies to it",
        "users: RECORD messages, not BATCH files: the catalog deselects a property",
    ]
    assert plain.state["bookmarks"]["grant_feed"] == batched.state["bookmarks"]["grant_feed"]


@pytest.mark.parametrize(
    "setting",
    [
        {"flattening_enabled": True, "flattening_max_depth": 1},
        {"stream_maps": {"apps": {"__alias__": "applications"}}},
        {"stream_maps": {"apps": None}},
    ],
    ids=["flattening", "renamed", "removed"],
)
def test_flattening_or_a_map_that_renames_or_removes_a_stream_keeps_record_messages(
    tmp_path: Path, setting: dict[str, t.Any]
) -> None:
    """Flattening, a stream renamed by a map, or one a map removes: no BATCH file, and the
    run's messages are those of the same run without ``batch_config``."""
    config = {**tap_config(shared_emulator()), **setting}
    catalog = catalog_selecting(config, {"apps": None})
    plain = sync(config, catalog=catalog)
    batched = sync({**config, "batch_config": batch_config(tmp_path)}, catalog=catalog)
    assert batched_streams(batched) == set()
    assert list(tmp_path.iterdir()) == []
    assert {k: same_rows(v) for k, v in batched.records.items()} == {
        k: same_rows(v) for k, v in plain.records.items()
    }
    assert [m["type"] for m in batched.messages] == [m["type"] for m in plain.messages]


# ---- into PostgreSQL: BATCH files leave the rows RECORD messages leave ----


def loaded_rows(
    connection: t.Any, schema: str, logged_before: datetime.datetime
) -> dict[str, Counter[str]]:
    """Every table's rows in ``schema`` as JSON text, a full-table snapshot's stamp made its
    run's number (0, 1: the runs of two loads start at different instants) and the time a
    snapshot completed left out, and the system log's events filed before ``logged_before``
    (UTC): what two loads of the same runs must hold alike."""
    tables = {
        name: [
            row for (row,) in connection.execute(f'SELECT to_jsonb(t) FROM "{schema}"."{name}" t')
        ]
        for (name,) in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        )
    }
    tables["system_log"] = [
        row
        for row in tables["system_log"]
        if datetime.datetime.fromisoformat(row["time"]) < logged_before
    ]
    stamps = sorted({row["snapshotAt"] for row in tables["full_table_snapshots"]})
    rows: dict[str, Counter[str]] = {}
    for name, found in tables.items():
        for row in found:
            row.pop("completedAt", None)
            if "snapshotAt" in row:
                row["snapshotAt"] = stamps.index(row["snapshotAt"])
        rows[name] = Counter(json.dumps(row, sort_keys=True) for row in found)
    return rows


def differences(table: str, expected: Counter[str], found: Counter[str]) -> str | None:
    """What tells ``found`` from ``expected`` (None: nothing), shortly: how many rows each
    lacks, and the fields that differ between the first row only one holds and the first
    only the other holds."""
    if found == expected:
        return None
    missing, extra = list((expected - found).elements()), list((found - expected).elements())
    said = f"{table}: {len(missing)} row(s) missing, {len(extra)} not expected"
    if missing and extra:
        want, got = json.loads(missing[0]), json.loads(extra[0])
        fields = sorted(k for k in {*want, *got} if want.get(k) != got.get(k))
        said += "; e.g. " + ", ".join(f"{k}: {want.get(k)!r} != {got.get(k)!r}" for k in fields)
    return said


def test_batch_files_into_postgres_leave_the_rows_record_messages_leave(
    meltano_plugins: None,
    make_emulator: t.Callable[..., Emulator],
    postgres: tuple[t.Any, str],
    warehouse_url: str,
    tmp_path: Path,
) -> None:
    """Every stream of the end-to-end tenant loaded into PostgreSQL twice over by ``meltano
    run tap-accessgov target-postgres`` as meltano.yml ships the loader: with RECORD
    messages, and with ``batch_config`` (BATCH files: each file's records loaded at once);
    between the two runs, new grant events, and an exclusion and a user deleted on the
    service. Every table holds the same rows either way: each run's full-table snapshot, the
    deleted rows absent from the second, the feed's new events, the instants the service sends
    in nanoseconds (a file's are cut to microseconds, as the target parses a RECORD's)."""
    connection, schema = postgres
    # no call logged: both loads then read the same system log
    tenant = make_emulator(Dataset(**E2E_DATASET), log_calls=False)
    files = tmp_path / "batch-files"
    env = {
        **os.environ,
        **tap_env(tenant),
        **libpq_env(warehouse_url),
        "TARGET_POSTGRES_SQLALCHEMY_URL": warehouse_url,
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "MELTANO_DATABASE_URI": f"sqlite:///{tmp_path / 'meltano.db'}",
    }
    loads = {
        "records": {},
        "batch": {"TAP_ACCESSGOV_BATCH_CONFIG": json.dumps(batch_config(files))},
    }

    def load_both() -> None:
        for name, settings in loads.items():
            target = {"TARGET_POSTGRES_DEFAULT_TARGET_SCHEMA": f"{schema}_{name}"}
            suffix = ("--state-id-suffix", name)  # each load its own state
            meltano("run", *suffix, "tap-accessgov", "target-postgres", env=env | settings | target)

    load_both()
    written = len(list(files.iterdir()))
    assert written >= len(STREAMS) // 2  # a file or more per stream
    # the system log's events from here on: each load's second run reads those filed before
    # it started, less a margin for events filed late, and the two start apart
    changed = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    removals = pick_removals(tenant.dataset)
    tenant.add_events(count=40)
    tenant.remove(**removals["exclusion"])
    tenant.remove(**removals["user"])
    load_both()
    assert len(list(files.iterdir())) > written

    records, batched = (
        loaded_rows(connection, f"{schema}_{name}", logged_before=changed) for name in loads
    )
    assert set(records) == set(batched)
    assert set(records) >= {*STREAMS, "full_table_snapshots"}
    for table, rows in records.items():
        assert rows, table
        assert (problem := differences(table, rows, batched[table])) is None, problem
    exclusions = [json.loads(row) for row in records["automation_exclusions"]]
    removed = removals["exclusion"]
    gone = [
        row["snapshotAt"]
        for row in exclusions
        if (row["appId"], row["appEntitlementId"], row["userId"]) == tuple(removed.values())
    ]
    assert gone == [0]  # in the first run's snapshot only


def offline_stream_tap() -> TapAccessGov:
    """A tap of the test credential with every stream selected, for its streams' hooks."""
    return TapAccessGov(config=tap_config(shared_emulator()), parse_env_config=False)


def test_a_stream_with_a_parent_or_children_keeps_record_messages() -> None:
    """A parent's files would span its children's syncs (their STATEs written while its own
    are held), so a stream with a parent or children keeps RECORD messages; the tap's
    streams have neither, and every one of them can go in files as discovered."""
    streams = offline_stream_tap().streams
    assert {name: stream.batch_unsafe for name, stream in streams.items()} == dict.fromkeys(streams)
    apps = streams["apps"]
    apps.child_streams = [streams["app_entitlements"]]
    assert apps.batch_unsafe == "it has a parent or child streams"
    apps.child_streams = []
    apps.parent_stream_type = type(streams["app_entitlements"])
    assert apps.batch_unsafe == "it has a parent or child streams"
