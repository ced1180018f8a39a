"""How the tap's messages leave it (output.py): records in chunks whatever stdout's buffering,
in the order they were made, and none left behind when a stream's sync fails."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import re
import time
import typing as t
from pathlib import Path

import pytest
from singer_sdk.contrib.msgspec import MsgSpecWriter
from singer_sdk.helpers._batch import BatchConfig
from singer_sdk.helpers._state import StateWriter as SdkStateWriter
from singer_sdk.singerlib import RecordMessage, SchemaMessage
from singer_sdk.streams import Stream

from tap_accessgov.engine.stream import TapStream
from tap_accessgov.engine.windowed import RunCappedStream
from tap_accessgov.output import (
    CHUNK_BYTES,
    OutputClosedError,
    OutputWriter,
    PlainJSONLinesBatcher,
    StateWriter,
    microsecond_timestamps,
)
from tap_accessgov.streams import STREAM_TYPES
from tap_accessgov.streams.grant_feed import GrantFeedStream
from tap_accessgov.tap import TapAccessGov
from tap_accessgov.timestamps import normalize_timestamp
from tests.conftest import (
    ClosingOutput,
    batch_config,
    catalog_selecting,
    listed_exclusion_entitlements,
    ns,
    parse_singer,
    shared_emulator,
    sync,
    sync_output,
    tap_config,
)


class RawStdout(io.RawIOBase):
    """The file under an unbuffered stdout (``python -u``, PYTHONUNBUFFERED): every write
    is a system call, recorded here; ``limit`` bytes at most per call, as a pipe may take;
    each call ``delay`` s long, as a pipe whose reader (the loader) is slower than the tap."""

    def __init__(self, limit: int | None = None, delay: float = 0.0) -> None:
        self.data = bytearray()
        self.writes = 0
        self.limit = limit
        self.delay = delay

    def writable(self) -> bool:
        return True

    def write(self, data: t.Any) -> int:
        if self.delay:
            time.sleep(self.delay)
        taken = bytes(data)[: self.limit]
        self.writes += 1
        self.data += taken
        return len(taken)


def without_run_times(message: dict[str, t.Any]) -> dict[str, t.Any]:
    """A message without what the clock of its run puts in: a record's extraction time, and
    a STATE's signpost (the instant the run started, the bookmark's cap)."""
    if message["type"] == "STATE":
        text = json.dumps(message)
        return json.loads(re.sub(r'"replication_key_signpost": "[^"]*", ', "", text))
    return {key: value for key, value in message.items() if key != "time_extracted"}


def feed_config() -> dict[str, t.Any]:
    """The feed read one page after another: the same output, in the same order, each run
    (its windows cut over a range that ends at a fixed instant, not at the run's start)."""
    emulator = shared_emulator()
    return {
        **tap_config(emulator),
        "exclusion_entitlements": listed_exclusion_entitlements(emulator),
        "max_concurrency": 1,
        "end_date": "2100-01-01T00:00:00Z",
    }


def test_the_writers_clock_stands_still_while_a_slow_loader_reads() -> None:
    """``time_not_writing`` is the run's time without the waits for the loader: what the
    grant feed's windows read, so that a slow loader is not taken for the service's latency
    (a ``meltano run`` into PostgreSQL grew them to 4-8 on a server that answers at once)."""
    writer = OutputWriter()
    out = io.TextIOWrapper(io.BufferedWriter(RawStdout(delay=0.2), buffer_size=1))
    started_wall, started_own = time.monotonic(), writer.time_not_writing()
    with contextlib.redirect_stdout(out):
        for _ in range(2):
            writer.write_message(
                SchemaMessage(stream="s", schema={"type": "object"}, key_properties=[])
            )
    # own's interval lies within wall's (read after it started, before it ended), less the
    # writing, which slept 0.2 s a message: whatever else the machine did meanwhile,
    # 0 <= own <= wall - 0.4 (the writes' times add up; the clock never runs backwards)
    own = writer.time_not_writing() - started_own
    wall = time.monotonic() - started_wall
    assert wall >= 0.4, wall
    assert 0 <= own <= wall - 0.4, f"{own:.3f} s of the run's own time in {wall:.3f} s"


@pytest.mark.parametrize("limit", [None, 1000], ids=["whole-writes", "partial-writes"])
def test_records_leave_in_chunks_even_when_stdout_is_unbuffered(limit: int | None) -> None:
    """Under PYTHONUNBUFFERED, ``sys.stdout.buffer`` is the raw file: the output is still
    written a chunk at a time (not once per record), and is the same messages in the same
    order as through a buffered stdout."""
    config = feed_config()
    catalog = catalog_selecting(config, {"grant_feed": None})
    expected = sync(config, catalog=catalog)
    raw = RawStdout(limit)
    # What `python -u` makes of stdout: a text layer writing straight through to the file.
    unbuffered = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)  # type: ignore[arg-type]
    with contextlib.redirect_stdout(unbuffered):
        TapAccessGov(config=config, catalog=catalog, parse_env_config=False).sync_all()
    got = parse_singer(raw.data.decode())
    assert [without_run_times(m) for m in got.messages] == [
        without_run_times(m) for m in expected.messages
    ]
    records = len(got.records["grant_feed"])
    assert records > 1000
    if limit is None:
        others = len(got.messages) - records
        assert raw.writes <= others + len(raw.data) // CHUNK_BYTES + 1
        assert raw.writes < records / 20


def test_the_records_of_a_failed_sync_are_written_before_it_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sync that fails after some records still writes them (as a buffered stdout would
    at exit): none stays in the writer's chunk."""
    config = feed_config()
    catalog = catalog_selecting(config, {"grant_feed": None})
    seen = 0
    post_process = GrantFeedStream.post_process

    def failing_after_some(
        self: GrantFeedStream, row: dict[str, t.Any], context: t.Any = None
    ) -> dict[str, t.Any] | None:
        nonlocal seen
        seen += 1
        if seen > 150:
            msg = "the service changed its mind"
            raise RuntimeError(msg)
        return post_process(self, row, context)

    monkeypatch.setattr(GrantFeedStream, "post_process", failing_after_some)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out), pytest.raises(RuntimeError, match="changed its mind"):
        TapAccessGov(config=config, catalog=catalog, parse_env_config=False).sync_all()
    out.flush()
    got = parse_singer(out.buffer.getvalue().decode())  # type: ignore[attr-defined]
    assert len(got.records["grant_feed"]) == 150


def test_a_loader_gone_at_a_streams_end_is_an_error_unless_its_sync_failed_already() -> None:
    """``flush_output``, which ``TapStream.sync`` calls as a stream's sync ends: the records
    left in the writer's chunk are written then, and a loader that stopped reading is an
    error (its records did not arrive), unless the sync failed already (the closed output
    is then most often that failure itself)."""
    stream = TapAccessGov(config=feed_config(), parse_env_config=False).streams["apps"]
    stream.output = OutputWriter()
    stream.output.write_message(  # a RECORD waits in the writer's chunk
        RecordMessage(stream="apps", record={"id": "app-1"})
    )
    closed = io.TextIOWrapper(ClosingOutput(0), write_through=True)  # type: ignore[arg-type]
    with contextlib.redirect_stdout(closed):
        with pytest.raises(OutputClosedError):
            stream.flush_output(failed=False)
        stream.output.write_message(RecordMessage(stream="apps", record={"id": "app-2"}))
        stream.flush_output(failed=True)


def synced_lines(
    config: dict[str, t.Any], catalog: dict[str, t.Any] | None = None, *, since: int = 0
) -> list[bytes]:
    """The tap's output lines, each instant at or after ``since`` (ns: the run's own clock:
    extraction times, snapshot stamps, the system log's bounds of the run) written as "now"."""

    def of_the_run(instant: re.Match[bytes]) -> bytes:
        return b'"now"' if ns(instant[1].decode()) >= since else instant[0]

    instant = re.compile(rb'"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)"')
    lines = sync_output(config, catalog=catalog).splitlines()
    return [instant.sub(of_the_run, line) for line in lines]


def test_the_output_is_the_sdks_byte_for_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stream selected whole (what --discover gives and Meltano passes): the tap skips
    the SDK's selection pass of each record, writes each STATE from its value as it is,
    keeps the last STATE as its JSON, not as a deep copy (output.py), and hands the SDK's
    bookmark step only the records that can move it (windowed.py). Its output is the same
    bytes as the SDK's own path's, every stream, every STATE, in the same order; and where a
    property is deselected, the SDK's pass still removes it."""
    config = feed_config()  # the tenant's data is older than what follows
    # one instant for both runs' caps, and what the system log's windows derive from it
    now = datetime.datetime.now(datetime.UTC).isoformat()
    monkeypatch.setattr(RunCappedStream, "run_start", normalize_timestamp(now))
    # the runs' own instants, from the second before both (stamps are cut to ms or seconds)
    since = time.time_ns() // 10**9 * 10**9
    fast = synced_lines(config, since=since)
    streams = {json.loads(line)["stream"] for line in fast if b'"RECORD"' in line[:20]}
    assert streams == {s.name for s in STREAM_TYPES} | {"full_table_snapshots"}
    assert sum(b'"type":"STATE"' in line for line in fast) > 10

    with monkeypatch.context() as sdk:
        sdk.setattr(TapStream, "selects_every_property", False)
        sdk.setattr(OutputWriter, "serialize_message", MsgSpecWriter.serialize_message)
        sdk.setattr(StateWriter, "write_state", SdkStateWriter.write_state)
        sdk.setattr(RunCappedStream, "_increment_stream_state", Stream._increment_stream_state)
        assert synced_lines(config, since=since) == fast

    catalog = catalog_selecting(config, {"users": ["email"], "grant_feed": None})
    pruned = [json.loads(line) for line in synced_lines(config, catalog)]
    records = [m for m in pruned if m["type"] == "RECORD"]
    users = [m["record"] for m in records if m["stream"] == "users"]
    assert users
    assert all("displayName" not in user and "email" in user for user in users)
    assert all("feed" in m["record"] for m in records if m["stream"] == "grant_feed")


class WrittenStates:
    """A message writer that keeps the STATE values written (copies: the tap's state is one
    dict, changed in place)."""

    def __init__(self) -> None:
        self.states: list[dict[str, t.Any]] = []

    def write_message(self, message: t.Any) -> None:
        self.states.append(json.loads(json.dumps(message.value)))


def test_held_states_leave_on_release_as_they_are_then_and_an_error_drops_them() -> None:
    """While ``held``: nothing leaves; ``release`` writes the state last asked for as it is
    at the release (one STATE, not one per request), and nothing if none was asked for; the
    block's end writes what is left; a block that ends on an error writes nothing, and
    ``drop_held`` ends a hold whose block never ended (a suspended generator)."""
    out = WrittenStates()
    writer = StateWriter(out)  # type: ignore[arg-type]
    state: dict[str, t.Any] = {"bookmarks": {"s": {"n": 1}}}
    with writer.held():
        writer.write_state(state)
        state["bookmarks"]["s"]["n"] = 2
        writer.write_state(state)
        assert out.states == []
        state["bookmarks"]["s"]["n"] = 3
        writer.release()
        assert out.states == [{"bookmarks": {"s": {"n": 3}}}]
        writer.release()  # nothing asked for since
        state["bookmarks"]["s"]["n"] = 4
        writer.write_state(state)
    assert [s["bookmarks"]["s"]["n"] for s in out.states] == [3, 4]

    def fails_while_held() -> None:
        with writer.held():
            state["bookmarks"]["s"]["n"] = 5
            writer.write_state(state)
            raise RuntimeError

    with pytest.raises(RuntimeError):
        fails_while_held()
    writer.release()
    assert [s["bookmarks"]["s"]["n"] for s in out.states] == [3, 4]
    writer.write_state(state)  # no longer held
    assert [s["bookmarks"]["s"]["n"] for s in out.states] == [3, 4, 5]

    suspended = writer.held()
    suspended.__enter__()
    state["bookmarks"]["s"]["n"] = 6
    writer.write_state(state)
    writer.drop_held()
    writer.release()
    assert len(out.states) == 3
    writer.write_state(state)
    assert [s["bookmarks"]["s"]["n"] for s in out.states] == [3, 4, 5, 6]


@pytest.mark.parametrize(
    ("sent", "loaded"),
    [
        ("2026-01-02T03:04:05.123456789Z", "2026-01-02T03:04:05.123456Z"),
        ("2026-01-02T03:04:05.1234567z", "2026-01-02T03:04:05.123456z"),
        ("2026-01-02T03:04:05.1234569+05:30", "2026-01-02T03:04:05.123456+05:30"),
        ("2026-01-02T03:04:05.999999999-00:00", "2026-01-02T03:04:05.999999-00:00"),
        ("2026-01-02T03:04:05.123456Z", "2026-01-02T03:04:05.123456Z"),
        ("2026-01-02T03:04:05.1Z", "2026-01-02T03:04:05.1Z"),
        ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05Z"),
    ],
)
def test_a_batch_files_instants_keep_microseconds_as_a_target_parses_them(
    sent: str, loaded: str
) -> None:
    """Top-level date-time values cut after the microseconds (digits beyond dropped, not
    rounded: what target-postgres keeps of a RECORD message's); the record handed in is
    never changed (the run's state may still read it), a copy is made only when something is
    cut; other properties, nested values and nulls as they are."""
    schema = {
        "properties": {
            "at": {"type": ["string", "null"], "format": "date-time"},
            "none": {"type": ["string", "null"], "format": "date-time"},
            "text": {"type": "string"},
            "nested": {"type": "object", "properties": {"at": {"format": "date-time"}}},
        }
    }
    record = {"at": sent, "none": None, "text": sent, "nested": {"at": sent}}
    original = json.loads(json.dumps(record))
    cut = microsecond_timestamps(schema)(record)
    assert cut == {**original, "at": loaded}
    assert record == original
    assert (cut is record) == (sent == loaded)


def test_a_sync_that_fails_at_a_batch_message_holds_no_state_back_after_it(
    tmp_path: Path,
) -> None:
    """The loader gone at the first BATCH message (the write after the SCHEMA): the sync fails
    while its files' generator waits, suspended, in the STATE hold; the hold ends with the
    sync, so a STATE asked for afterwards is written (here: fails on the closed output),
    not kept back unseen."""
    config = {**feed_config(), "batch_config": batch_config(tmp_path)}
    tap = TapAccessGov(
        config=config, catalog=catalog_selecting(config, {"apps": None}), parse_env_config=False
    )
    closed = io.TextIOWrapper(ClosingOutput(1), write_through=True)  # type: ignore[arg-type]
    with contextlib.redirect_stdout(closed):
        with pytest.raises(OutputClosedError):
            tap.sync_all()
        assert [path.suffix for path in tmp_path.iterdir()] == [".gz"]  # the file was written
        with pytest.raises(OutputClosedError):
            tap.state_writer.write_state({"bookmarks": {}})


def test_files_without_compression_hold_batch_size_records_each_named_as_the_sdk_names_them(
    tmp_path: Path,
) -> None:
    """``PlainJSONLinesBatcher``: the records in order, ``batch_size`` to a file (the last
    with the rest), one JSON line each, not gzipped; each file named as the SDK names its
    own, the storage's prefix first, numbered from 1 within the sync."""
    config = BatchConfig.from_dict(
        {
            **batch_config(tmp_path, batch_size=2, compression="none"),
            "storage": {"root": tmp_path.as_uri(), "prefix": "run-7/"},
        }
    )
    (tmp_path / "run-7").mkdir()
    records = [{"n": n, "at": "2026-01-02T03:04:05.123456789Z"} for n in range(5)]
    manifests = list(PlainJSONLinesBatcher("tap-accessgov", "apps", config).get_batches(records))
    assert [len(manifest) for manifest in manifests] == [1, 1, 1]
    paths = [Path(manifest[0].removeprefix("file://")) for manifest in manifests]
    sync_id = re.fullmatch(r"(tap-accessgov--apps-[0-9a-f-]{36})-1\.jsonl", paths[0].name)
    assert sync_id, paths[0].name
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        f"run-7/{sync_id[1]}-{number}.jsonl" for number in (1, 2, 3)
    ]
    assert [[json.loads(line) for line in p.read_bytes().splitlines()] for p in paths] == [
        records[0:2],
        records[2:4],
        records[4:],
    ]
    unprefixed = BatchConfig.from_dict(batch_config(tmp_path, compression="none"))
    (manifest,) = PlainJSONLinesBatcher("tap-accessgov", "apps", unprefixed).get_batches(records)
    assert Path(manifest[0]).name.startswith("tap-accessgov--apps-"), manifest
