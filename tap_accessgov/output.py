"""How Singer messages leave the tap: the SDK's msgspec writer (several times faster than
simplejson), records written in chunks instead of one write per record, and a closed output
reported as such."""

from __future__ import annotations

import contextlib
import datetime
import re
import sys
import time
import typing as t
import uuid

import msgspec
from singer_sdk.batch import BaseBatcher, lazy_chunked_generator
from singer_sdk.contrib.msgspec import MsgSpecWriter, serialize_jsonl
from singer_sdk.helpers._state import StateWriter as SdkStateWriter  # the fifth bend: tap.py
from singer_sdk.singerlib import RecordMessage, StateMessage
from singer_sdk.singerlib.encoding.base import SingerMessageType
from typing_extensions import override

if t.TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from singer_sdk.helpers.types import Record, TapState
    from singer_sdk.singerlib import Message
    from singer_sdk.streams import Stream

# Records collected before they are written: the size of a Linux pipe's buffer, so a loader
# (Meltano, the target) wakes up once per chunk of about a hundred records, not per record.
CHUNK_BYTES = 64 * 1024


def record_messages(stream: Stream, record: Record) -> t.Generator[RecordMessage, None, None]:
    """The SDK's RECORD messages of ``stream``'s ``record`` without its selection pass, for a
    catalog that selects every property (``TapStream._generate_record_messages``; the
    benchmarks' floor, benchmarks/plain_sdk_tap.py): the rest is the SDK's (0.54, 0.55), step
    for step: stream maps, the stream's version (a private: no public hook between
    ``post_process`` and the message), the extraction time."""
    extracted = datetime.datetime.now(datetime.UTC)
    for stream_map in stream.stream_maps:
        mapped = stream_map.transform(record)
        if mapped is not None:
            yield RecordMessage(
                stream=stream_map.stream_alias,
                record=mapped,
                version=stream._stream_version,
                time_extracted=extracted,
            )


class OutputClosedError(BaseException):
    """The process reading the tap's output (the loader) stopped reading.

    A BaseException, like KeyboardInterrupt, so that it goes through the SDK's ``except
    Exception`` handlers, which would log it as an "unhandled error" of whichever stream was
    writing, straight to the one line the command line prints.
    """


class OutputWriter(MsgSpecWriter):
    """The SDK's msgspec writer, with RECORD messages written in chunks.

    The SDK (0.54) writes and flushes stdout after each message: one write system call per
    record and, in a pipeline, one wake-up of the reader (Meltano, the target) per record.
    Leaving the chunking to ``sys.stdout``'s buffer is not enough: where PYTHONUNBUFFERED is
    set (common in container images, and in Meltano's own environment when its user sets it)
    ``sys.stdout.buffer`` is the unbuffered file itself, and every record was still one
    system call, which with the grant feed's worker threads also handed the GIL over
    (measured on 50k events into /dev/null: 1.36 s of CPU and 12,800 context switches,
    against 1.16 s and 5,100 in chunks; 1.09 s for one request after another). So the
    writer keeps its own chunk: records wait in it until it holds ``CHUNK_BYTES``; every
    other message (SCHEMA, STATE, BATCH, ACTIVATE_VERSION) writes the chunk before itself
    and flushes, so a STATE never precedes the records it covers nor waits behind them.
    ``flush`` writes what is left (TapStream.sync calls it when a stream's sync ends, failed
    or not). A loader that stopped reading is reported as OutputClosedError.

    The time spent writing is kept (``time_not_writing``): in a pipeline it is the time the
    loader took to read, which the grant feed's windows must not take for the service's
    latency (time_ranges.InFlight).
    """

    def __init__(self) -> None:
        super().__init__()
        self._chunk = bytearray()
        self._writing = 0.0  # s spent in stdout's write and flush calls

    def time_not_writing(self) -> float:
        """A monotonic clock (s) that stands still while the tap writes its output: the run's
        own time, less the time a loader that reads more slowly than the tap writes kept the
        tap waiting (a full pipe blocks the write)."""
        return time.monotonic() - self._writing

    @override
    def serialize_message(self, message: Message) -> bytearray:
        """A STATE message encoded from its value as it is: the SDK's ``to_dict``
        (``dataclasses.asdict``) copies the whole state, item by item, for every STATE, and
        the tap's state holds every partition of every stream (measured: about a tenth of an
        in-process sync's CPU). The same line, byte for byte (tests/test_output.py)."""
        if isinstance(message, StateMessage):
            return serialize_jsonl({"type": message.type, "value": message.value})
        return super().serialize_message(message)

    @override
    def write_message(self, message: Message) -> None:
        # format_message answers the SDK's one reused buffer: copied into the chunk here.
        self._chunk += self.format_message(message)
        if message.type != SingerMessageType.RECORD or len(self._chunk) >= CHUNK_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write the waiting messages to stdout (looked up now: tests redirect it) and flush."""
        chunk = bytes(self._chunk)
        self._chunk.clear()
        started = time.monotonic()
        try:
            while chunk:  # an unbuffered stdout (the raw file) may take part of it per call
                chunk = chunk[sys.stdout.buffer.write(chunk) :]
            sys.stdout.flush()
        except BrokenPipeError:
            raise OutputClosedError from None
        finally:
            self._writing += time.monotonic() - started


class StateWriter(SdkStateWriter):
    """The tap's ``state_writer``: a STATE written when the state differs from the last one
    written, as the SDK's own writer does, with the last one kept as its JSON (keys sorted)
    instead of a deep copy of the whole state. The SDK (0.54, 0.55) deep-copies the state
    after every STATE, and the tap's holds every partition of every stream: a run of many
    partitions copied it hundreds of times (in a profile, a tenth of an in-process sync's
    main thread). Two states are the same here when their JSON is, which for a state (text,
    integers, nulls, lists and objects) is when they are equal; the same STATEs leave, byte
    for byte (tests/test_output.py). Installed by ``TapAccessGov.__init__``."""

    _last: bytes | None = None
    _holding = False
    _waiting: TapState | None = None  # the state last asked for while holding

    @override
    def write_state(self, state: TapState) -> None:
        """Write a STATE of ``state`` unless it is the one written last; while ``held``,
        keep it back instead."""
        if self._holding:
            self._waiting = state
        else:
            self._write(state)

    def _write(self, state: TapState) -> None:
        written = _SORTED.encode(state)
        if written != self._last:
            self._message_writer.write_message(StateMessage(value=state))
            self._last = written

    @contextlib.contextmanager
    def held(self) -> t.Iterator[None]:
        """STATEs kept back until ``release`` (or the block's end) writes the last one asked
        for: a STATE must not leave before the records it counts, and a BATCH file's records
        leave only with its BATCH message, when the file is full
        (BatchFilesStream.get_batches). A block that ends on an error (a failed or stopped
        sync) drops what it kept: it may count records that never left. Not nested: one
        stream's files at a time (a stream with a parent or children keeps RECORD messages,
        BatchFilesStream.batch_unsafe)."""
        self._holding = True
        try:
            yield
        except BaseException:
            self.drop_held()
            raise
        self._holding = False
        self.release()

    def drop_held(self) -> None:
        """End ``held`` without writing what it kept. A sync that fails while the block waits
        in its suspended generator (BatchFilesStream.get_batches: the SDK failed writing a
        BATCH message) ends it too: the failure closes the generator as it leaves the SDK's
        loop."""
        self._holding = False
        self._waiting = None

    def release(self) -> None:
        """Write the state kept back (``held``) as it is now, if a STATE was asked for."""
        if self._waiting is not None:
            waiting, self._waiting = self._waiting, None
            self._write(waiting)


_SORTED = msgspec.json.Encoder(order="sorted")


class PlainJSONLinesBatcher(BaseBatcher):
    """BATCH files of JSON lines without compression, for ``batch_config``'s ``compression:
    none``, which the SDK's own batcher (0.54, and 0.55's pre-releases) does not honour: it
    gzips every file, while its BATCH message names the setting's compression, so a target
    reads the gzip as text and fails. Named as the SDK names its files (the tap, the stream,
    a UUID per sync, the file's number), with ``.jsonl`` for ``.json.gz``."""

    @override
    def get_batches(self, records: Iterable[Record]) -> Iterator[list[str]]:
        storage = self.batch_config.storage
        sync_id = f"{storage.prefix or ''}{self.tap_name}--{self.stream_name}-{uuid.uuid4()}"
        chunks = lazy_chunked_generator(records, self.batch_config.batch_size)
        for number, chunk in enumerate(chunks, start=1):
            filename = f"{sync_id}-{number}.jsonl"
            with storage.open(filename, "wb") as file:
                file.write(_ENCODER.encode_lines(chunk))
            yield [storage.get_url(filename)]


_ENCODER = msgspec.json.Encoder(decimal_format="number")  # as the SDK's files (simplejson)


def microsecond_timestamps(schema: Mapping[str, t.Any]) -> Callable[[Record], Record]:
    """A record with its top-level date-time values cut to microseconds, for BATCH files. An
    SDK target (target-postgres) parses those of a RECORD message into Python datetimes,
    which drop the digits after the microseconds the service sends, while a BATCH file's
    text goes to PostgreSQL as it is, which rounds them (``…12.8640295Z`` loads as
    ``.864029`` from a RECORD message and ``.864030`` from a file). Cut here, the warehouse
    holds the same instants either way (tests/test_batch.py); nested values are loaded as
    JSON, unparsed, either way."""
    names = [
        name
        for name, declared in schema["properties"].items()
        if declared.get("format") == "date-time"
    ]

    def cut(record: Record) -> Record:
        """``record``, or a copy with its values cut: the record itself is the run's, whose
        state may still read it (a page's latest change is noted once it is handed on)."""
        copied = record
        for name in names:
            value = record.get(name)
            if isinstance(value, str) and (beyond := _BEYOND_MICROSECONDS.search(value)):
                if copied is record:
                    copied = dict(record)
                copied[name] = value[: beyond.end(1)] + value[beyond.end() :]
        return copied

    return cut


_BEYOND_MICROSECONDS = re.compile(r"(\.\d{6})\d+(?=[Zz+-]|$)", re.ASCII)
