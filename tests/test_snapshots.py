"""Full-table snapshots (tap_accessgov/engine/snapshots.py): every full-table record names the run's
snapshot, and a snapshot is declared complete, after all its rows, only by a run that read it
in full; the grant feed is untouched."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import time
import typing as t
from pathlib import Path

import pytest

from emulator import Emulator
from tap_accessgov.engine.snapshots import SnapshotStream
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    FULL_TABLE,
    STREAMS,
    SyncResult,
    catalog_selecting,
    config_file,
    local_time_zone,
    ns,
    parse_singer,
    run_cli,
    shared_emulator,
    sync,
    tap_config,
)


def test_full_table_records_name_their_snapshot_and_complete_it_last(emulator: Emulator) -> None:
    started = time.time_ns() // 1_000_000 * 1_000_000  # completedAt keeps milliseconds
    result = sync(tap_config(emulator))
    ended = time.time_ns()
    markers = result.records["full_table_snapshots"]
    assert sorted(m["stream"] for m in markers) == sorted(FULL_TABLE)
    (snapshot,) = {m["snapshotAt"] for m in markers}
    # completed once, after the snapshot began, in UTC to the millisecond
    (completed,) = {m["completedAt"] for m in markers}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", completed), completed
    assert max(started, ns(snapshot) // 1_000_000 * 1_000_000) <= ns(completed) <= ended
    for stream in FULL_TABLE:
        assert result.records[stream]
        assert {r["snapshotAt"] for r in result.records[stream]} == {snapshot}
        schema = next(m for m in result.messages if m["type"] == "SCHEMA" and m["stream"] == stream)
        assert schema["key_properties"][-1] == "snapshotAt"
        assert schema["schema"]["properties"]["snapshotAt"]["format"] == "date-time"
    records = [m for m in result.messages if m["type"] == "RECORD"]
    first_marker = next(n for n, m in enumerate(records) if m["stream"] == "full_table_snapshots")
    assert all(m["stream"] == "full_table_snapshots" for m in records[first_marker:])
    # the grant feed is incremental: no snapshot, its key unchanged
    assert not any("snapshotAt" in r for r in result.records["grant_feed"])
    feed_schema = next(
        m for m in result.messages if m["type"] == "SCHEMA" and m["stream"] == "grant_feed"
    )
    assert "snapshotAt" not in feed_schema["key_properties"]


def test_each_run_is_a_new_snapshot(emulator: Emulator) -> None:
    config = tap_config(emulator)
    first = sync(config)
    second = sync(config)
    one = {m["snapshotAt"] for m in first.records["full_table_snapshots"]}
    two = {m["snapshotAt"] for m in second.records["full_table_snapshots"]}
    assert len(one) == len(two) == 1
    assert max(one) < min(two)


def test_only_synced_streams_are_declared_complete(emulator: Emulator) -> None:
    config = tap_config(emulator)
    result = sync(
        config, catalog=catalog_selecting(config, {"users": None, "full_table_snapshots": None})
    )
    assert "automation_exclusions" not in result.records
    assert [m["stream"] for m in result.records["full_table_snapshots"]] == ["users"]


@pytest.mark.parametrize(
    ("read_directory", "scope"),
    [(True, "directory"), (False, "automation_exclusion_users")],
    ids=["directory", "exclusions-only"],
)
def test_the_users_snapshot_says_whether_it_is_the_directory(
    emulator: Emulator, read_directory: bool, scope: str
) -> None:
    """The users rows of both reads are the same User objects: only the marker tells the
    models (int_users_snapshot) whether an owner not listed has left. The other streams'
    markers have no scope: their settings do not narrow them."""
    config = tap_config(emulator) | {"read_directory": read_directory}
    result = sync(config)
    scopes = {m["stream"]: m["scope"] for m in result.records["full_table_snapshots"]}
    assert scopes.pop("users") == scope
    assert scopes
    assert set(scopes.values()) == {None}
    # also when users is read without automation_exclusions (the stream it draws on)
    alone = sync(
        config, catalog=catalog_selecting(config, {"users": None, "full_table_snapshots": None})
    )
    assert [(m["stream"], m["scope"]) for m in alone.records["full_table_snapshots"]] == [
        ("users", scope)
    ]


@pytest.mark.cli
@pytest.mark.parametrize("workers", [1, 8])
def test_a_run_that_fails_half_way_declares_no_snapshot_complete(
    emulator: Emulator, workers: int, tmp_path: Path
) -> None:
    app_id, entitlement_id = emulator.dataset.exclusion_entitlements[5]
    path = f"/api/v1/apps/{app_id}/entitlements/{entitlement_id}/automation/exclusions"
    emulator.faults.add(kind="403", path=path, times=1)
    config = {**tap_config(emulator), "max_concurrency": workers}
    failed = run_cli("--config", config_file(config, tmp_path))
    assert failed.returncode == 1
    partial = parse_singer(failed.stdout)
    assert partial.records["automation_exclusions"], "the run failed half-way, not at once"
    assert "full_table_snapshots" not in partial.records


def dry_run(emulator: Emulator, limit: int, **settings: t.Any) -> SyncResult:
    """A run with the SDK's record limit, as ``--test`` and the SDK's test suite make it."""
    from tap_accessgov.tap import TapAccessGov

    config = {**tap_config(emulator), **settings}
    tap = TapAccessGov(config=config, parse_env_config=False)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out):
        tap.run_sync_dry_run(dry_run_record_limit=limit)
    out.flush()
    return parse_singer(out.buffer.getvalue().decode())  # type: ignore[attr-defined]


def test_with_a_record_limit_only_streams_read_before_it_are_declared_complete(
    emulator: Emulator,
) -> None:
    """A record limit (``--test``'s, the SDK test suite's) ends streams early: a stream that
    reached it is not complete, one that ended before it is."""
    ds = emulator.dataset
    apps = len(ds.catalog_apps)
    # the short lists of the tenant, which end before the limit: its 3 access reviews, and
    # (what an audit is scoped by) its attribute values, roles and connectors
    short = {
        "attribute_values": len(ds.attribute_values()),
        "iam_roles": len(ds.iam_roles()),
        "connectors": len(ds.connectors()),
    }
    result = dry_run(emulator, apps)  # every app, not every entitlement
    assert len(result.records["apps"]) == len(result.records["app_entitlements"]) == apps
    # "apps" may have had one more
    assert [m["stream"] for m in result.records["full_table_snapshots"]] == [
        "access_reviews",
        *(name for name, count in short.items() if count < apps),
    ]

    result = dry_run(emulator, apps + 1)
    assert len(result.records["apps"]) == apps
    assert len(result.records["app_entitlements"]) == apps + 1
    assert [m["stream"] for m in result.records["full_table_snapshots"]] == [
        "apps",
        "access_reviews",
        *(name for name, count in short.items() if count < apps + 1),
    ]


@pytest.mark.parametrize("max_concurrency", [1, 4])
def test_a_record_limit_ends_every_stream_by_itself(
    emulator: Emulator, max_concurrency: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Every stream stops at the limit on its own (the base stream applies it around each
    stream's records, concurrent or not): none reaches the SDK's abort, which logs "An
    unhandled error occurred" at ERROR although the test passed."""
    with caplog.at_level(logging.ERROR):
        result = dry_run(emulator, 1, max_concurrency=max_concurrency)
    assert {name: len(records) for name, records in result.records.items()} == dict.fromkeys(
        STREAMS, 1
    )
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_every_full_table_stream_requires_the_runs_start_in_utc_to_the_millisecond() -> None:
    """``snapshotAt`` is the tap's start (the SDK's ``initialized_at``) in UTC to the
    millisecond, whatever the machine's time zone; each full-table stream's schema requires it
    once and its key ends with it, however many taps a process makes (a schema shared between
    them would be required twice in the second)."""
    config = tap_config(shared_emulator())
    with local_time_zone("Pacific/Chatham"):  # +12:45 or +13:45: never UTC
        assert time.localtime().tm_gmtoff != 0, "the machine has no zone data"
        taps = [TapAccessGov(config=config, parse_env_config=False) for _ in range(2)]
        streams = [list(tap.streams.values()) for tap in taps]  # built in this zone
    for tap, built in zip(taps, streams, strict=True):
        seconds, millis = divmod(tap.initialized_at, 1000)
        expected = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"
        full_table = [s for s in built if s.name in FULL_TABLE]
        assert {s.name for s in full_table} == set(FULL_TABLE)
        for stream in full_table:
            assert stream.snapshot_at == expected, stream.name
            required = type(stream).schema.get("required", [])
            assert stream.schema["required"] == [*required, "snapshotAt"], stream.name
            assert "snapshotAt" in stream.schema["properties"], stream.name
            declared = list(type(stream).primary_keys or [])
            assert list(stream.primary_keys) == [*declared, "snapshotAt"], stream.name


class _Listing(SnapshotStream):
    """A full-table stream whose schema requires nothing (a new stream's may not)."""

    name = "listing"
    schema: t.ClassVar[dict[str, t.Any]] = {"properties": {"id": {"type": "string"}}}
    primary_keys = ("id",)

    def get_records(self, context: t.Any) -> t.Iterable[dict[str, t.Any]]:
        return iter(())


def test_a_full_table_schema_that_requires_nothing_comes_to_require_the_snapshot() -> None:
    tap = TapAccessGov(config=tap_config(shared_emulator()), parse_env_config=False)
    stream = _Listing(tap)
    assert stream.schema["required"] == ["snapshotAt"]
    assert list(stream.schema["properties"]) == ["id", "snapshotAt"]
    assert _Listing.schema == {"properties": {"id": {"type": "string"}}}  # the class's untouched
