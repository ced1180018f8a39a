"""The streams read in time windows that an interrupted run resumes (the grant feed, the
tasks): the bookmark capped at the run's start (``RunCappedStream``, past_grants' too), and
the run's record of completed windows kept in its STATE as they complete
(grant_feed_windows.py: the cut, the reader, ``Backfill``).
"""

from __future__ import annotations

import datetime
import typing as t
from functools import cached_property

from typing_extensions import override

from tap_accessgov.streams.base import AccessGovStream
from tap_accessgov.streams.grant_feed_windows import BACKFILL, Backfill
from tap_accessgov.timestamps import normalize_timestamp

if t.TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from singer_sdk.helpers.types import Context

    from tap_accessgov.streams.grant_feed_windows import Window

Record = dict[str, t.Any]


class RunCappedStream(AccessGovStream):
    """An unsorted incremental stream whose bookmark never passes the instant its run
    started: what changes while a run reads is read by the next run (the windowed streams,
    and ``past_grants``)."""

    @cached_property
    def run_start(self) -> str:
        """When this run started, in the bookmark's own format (bookmarks compare as strings):
        the bookmark's cap. Taken when first asked: the SDK asks for the signpost as the
        stream's sync starts, before its first request."""
        return normalize_timestamp(datetime.datetime.now(datetime.UTC).isoformat())

    @override
    def get_replication_key_signpost(self, context: Context | None = None) -> str:
        return self.run_start


class WindowedStream(RunCappedStream):
    """A stream whose runs read time windows and resume from their last STATE."""

    def resumable_run(self, filters: str) -> ResumableRun:
        """This run's record of completed windows: the interrupted run's, when the stream's
        state holds one for the same ``filters``, else an empty one."""
        return ResumableRun(self, filters)


class ResumableRun:
    """The completed windows of one run (``backfill``), saved in the stream's state beside the
    bookmark each time one completes, and removed when the run completes, the latest change
    it delivered (the interrupted run's too) then counted into the bookmark.

    ``saved``: the interrupted run's backfill as its state holds it ({} for a new run);
    ``extra``: what the stream keeps beside the windows (written with each STATE)."""

    def __init__(self, stream: WindowedStream, filters: str) -> None:
        self._stream = stream
        state = stream.stream_state
        resumed = Backfill.from_state(state, filters)  # None unless a valid backfill
        self.backfill = resumed or Backfill(filters)
        self.saved: dict[str, t.Any] = dict(state[BACKFILL]) if resumed else {}
        self.extra: dict[str, t.Any] = {}
        if self.backfill.completed:
            stream.logger.info(
                "Resuming an interrupted %s sync: %d completed time range(s) from its state "
                "are not read again",
                stream.name.replace("_", " "),
                len(self.backfill.completed),
            )

    def remaining(self, windows: Iterable[Window]) -> list[Window]:
        """``windows`` without what the interrupted run completed."""
        return self.backfill.remaining(windows)

    def save(self) -> None:
        """Write a STATE with the completed windows (and ``extra``)."""
        stream = self._stream
        stream.stream_state[BACKFILL] = {**self.backfill.to_state(), **self.extra}
        stream.connection.state_writer.write_state(stream.tap_state)

    def complete(self, window: Window) -> None:
        """``window``'s every record handed on: it is not read again if the run is resumed."""
        self.backfill.complete(window)
        self.save()

    def delivered(
        self, records: Iterable[Record], changed: Callable[[Record], str | None]
    ) -> Iterator[Record]:
        """``records``, the instant each changed (``changed``, in the bookmark's format; None:
        not known) noted as delivered."""
        for record in records:
            if (when := changed(record)) is not None:
                self.backfill.saw(when)
            yield record

    def finish(self) -> None:
        """The run completed: the latest change delivered (the interrupted run's too) counts
        into the bookmark, and the record of windows goes."""
        stream = self._stream
        key = stream.replication_key
        if self.backfill.latest is not None and key is not None:
            stream.state_manager.increment_state(
                {key: self.backfill.latest}, context=None, replication_key=key
            )
        stream.stream_state.pop(BACKFILL, None)
