"""The streams read in time windows that an interrupted run resumes (the grant feed, the
system log, the tasks): the bookmark capped at the run's start (``RunCappedStream``,
past_grants' too), the run's record of completed windows kept in its STATE as they complete
(engine/time_ranges.py: the cut, the reader, ``Backfill``), and the read itself of a range
cut where its records are (``WindowedStream.read_range``), written once: a windowed stream
says its range, its filters and its keys through the hooks of ``read_range``, and nothing of
windows, workers or STATE.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import typing as t
from functools import cached_property

from typing_extensions import override

from tap_accessgov.engine.stream import AccessGovStream
from tap_accessgov.engine.time_ranges import (
    BACKFILL,
    Backfill,
    Key,
    WindowReader,
    initial_windows,
    pieces,
)
from tap_accessgov.timestamps import from_ns, normalize_timestamp, to_ns

if t.TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.time_ranges import Window

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

    _furthest: str | None = None  # the greatest replication key value the SDK was handed

    @override
    def get_records(self, context: Context | None) -> t.Iterable[Record]:
        self._furthest = None  # a new read: the SDK's progress marker starts anew
        return super().get_records(context)

    @override
    def _increment_stream_state(
        self, latest_record: Record, *, context: Context | None = None
    ) -> None:
        """The SDK's per-record bookmark step, for a record that can move it: the SDK keeps
        the greatest value seen as the progress marker of an unsorted stream (a value is
        taken when it is at least the marker), so a record whose value is not greater than
        the last one taken changes nothing, and is not handed on. The step costs the SDK a
        state lookup and two conversions for every record (a tenth of a grant feed run's
        CPU); the comparison is the SDK's own (text), so the STATEs are the same, byte for
        byte (tests/test_output.py). A record without a value (a system log event without
        ``time``, a task sent without ``updatedAt``) is not handed on either: the SDK would
        fail on a missing key and warn of each null one, and the run notes such a record's
        instant itself (``ResumableRun.delivered``, a task's creation). A private of the SDK:
        no public hook sees a record before the state does."""
        value = latest_record.get(self.replication_key or "")
        if value is None:
            return
        if context is None and value.__class__ is str:
            if self._furthest is not None and value <= self._furthest:
                return
            self._furthest = value
        super()._increment_stream_state(latest_record, context=context)


_DAY = 86_400 * 1_000_000_000  # ns
# How far back from the sync's start the probes for the earliest record look (days), at once.
PROBE_DAYS = (1, 4, 16, 64, 256, 1024, 4096, 16384)
PROBE_PAGE = 10  # records of a probe's page: is there any?
SINCE = "since"  # the interrupted run's start, in the backfill state (the cap it keeps)


def window_context(window: Window) -> dict[str, t.Any]:
    """The request context of one window: its bounds as sent (no personal data: the SDK
    writes contexts into its METRIC lines). Each stream's ``search_filters`` says them in
    its own request's words."""
    after, before = window.bounds()
    return {"after": after, "before": before}


class WindowedStream(RunCappedStream):
    """A stream whose runs read time windows and resume from their last STATE.

    Its requests take a context of ``after`` (inclusive) and ``before`` (exclusive) bounds,
    None where unbounded, and ``probe`` for a small page (``search_filters``)."""

    @cached_property
    @override
    def run_start(self) -> str:
        """The cap of this run's bookmark: when it started, or when the run it resumes did
        (the interrupted run's windows were cut up to it)."""
        saved = self.stream_state.get(BACKFILL)
        if isinstance(saved, dict) and saved.get(SINCE):
            return normalize_timestamp(saved[SINCE])
        return super().run_start

    def read_range(self) -> Iterator[Record]:
        """Every record of the run's range, window by window (``read_windows``), a STATE as
        each window completes, then the bookmark: the latest change delivered, capped at the
        run's start. The range goes from ``range_start`` (that instant is read again, so a
        record written late at it is not lost) to ``range_end``; what a stream reads besides
        its windows comes first (``before_windows``)."""
        start = self.range_start()
        lower = to_ns(start) if start else None
        upper = self.range_end()
        run = self.resumable_run(self.windows_of())
        run.extra = self.backfill_extra(run)
        yield from self.before_windows(run)
        if lower is None or upper is None or lower < upper:
            yield from self.read_windows(
                run,
                lower,
                upper,
                # after a bookmark the records go on from there: probes only for a first sync
                bookmarked=self.stream_state.get("replication_key_value") is not None,
            )
        run.finish()

    @override
    def records(self, context: Context | None) -> t.Iterable[Record]:
        return self.read_range()

    # ----- what a windowed stream says of itself (the hooks of ``read_range``) -----

    # The request's names of a window's bounds: ``after`` (inclusive), ``before`` (exclusive).
    bound_names: t.ClassVar[tuple[str, str]] = ("after", "before")

    def window_filters(self, context: Context | None) -> dict[str, t.Any]:
        """A window's or a probe's bounds in the request's words (``bound_names``; none where
        unbounded), and a probe's small page: what ``search_filters`` sends of a context."""
        context = context or {}
        filters: dict[str, t.Any] = {"pageSize": PROBE_PAGE} if context.get("probe") else {}
        for bound, name in zip(("after", "before"), self.bound_names, strict=True):
            if context.get(bound):
                filters[name] = context[bound]
        return filters

    def windows_of(self) -> str:
        """Which records a window holds (the query's filters, in short): an interrupted
        run's completed windows count only for the same (``Backfill.filters``)."""
        raise NotImplementedError

    def window_key(self, record: Record) -> Key:
        """A record's key for a window's split, its date (normalized, or None) last."""
        raise NotImplementedError

    def range_start(self) -> str | None:
        """Where the run's range begins: the SDK's starting value (the bookmark, or
        ``start_date`` when later or when there is none); None: where the records begin."""
        return self.get_starting_replication_key_value(None)

    def range_end(self) -> int | None:
        """Where the run's range ends (ns, exclusive): ``end_date``, else open (the last
        window reaches past the run's start, which still caps the bookmark)."""
        end = self.config.get("end_date")
        return to_ns(end) if end else None

    def where_records_begin(
        self, lower: int | None, upper: int | None, high: int, slots: int
    ) -> tuple[int, list[int] | None] | None:
        """Where a first sync's records begin, so its windows are cut where the data is,
        and a sample of their dates (None: no sample); None: the range holds no record.
        By default a round of probes (``probe_where_records_are``)."""
        return self.probe_where_records_are(lower, upper, high, slots)

    def changed_at(self, record: Record) -> str | None:
        """When a delivered record changed, in the bookmark's format (None: not known): the
        replication key's value."""
        return record.get(self.replication_key or "")

    def before_windows(self, run: ResumableRun) -> Iterator[Record]:
        """What the run reads before its windows (nothing by default), noted in ``run``."""
        return iter(())

    def backfill_extra(self, run: ResumableRun) -> dict[str, t.Any]:
        """What an interrupted run keeps beside its completed windows (none by default);
        ``run.saved``: what the interrupted run kept."""
        return {}

    def resumable_run(self, filters: str) -> ResumableRun:
        """This run's record of completed windows: the interrupted run's, when the stream's
        state holds one for the same ``filters``, else an empty one."""
        return ResumableRun(self, filters)

    def read_windows(
        self,
        run: ResumableRun,
        lower: int | None,
        upper: int | None,
        *,
        bookmarked: bool,
    ) -> Iterator[Record]:
        """Every record of ``[lower, upper)`` (ns; None: unbounded), up to the run's
        concurrency limit of windows at once (as many as the run waits for), each completed
        window saved in ``run``, the latest replication key value delivered noted page by
        page (``changed_at``). The range is cut where its records are (``where_records_begin``,
        unless ``bookmarked``: after a bookmark they go on from there) and a window found
        large is split at its records' dates (``window_key``, engine/time_ranges.py)."""
        key_of = self.window_key
        workers = self.concurrency.limit
        high = upper if upper is not None else to_ns(self.run_start)
        begin = (
            (lower, None)
            if bookmarked and lower is not None
            else self.where_records_begin(lower, upper, high, workers)
        )
        if begin is None:
            return
        low, sample = begin
        high = max(high, low + 1)
        pool = self.concurrency.workers(self, self.name.replace("_", "-"))
        windows = run.remaining(initial_windows(lower, upper, low, high, workers, sample))
        reader = WindowReader(
            read=lambda window: self.request_records(window_context(window)),
            split=lambda window, delivered, dates, typical: pieces(
                window, delivered, typical, low, high, key_of, dates
            ),
            page_size=self.page_size,
            workers=pool,
            count=workers,
            key_of=key_of,
            wall_clock=self.time_not_writing,
        )
        yield from reader.records(
            windows, run.complete, lambda page: run.saw(map(self.changed_at, page))
        )
        self.logger.info(
            "The %s was read %d time range(s) at once at most (max_concurrency %d): more "
            "only while the run was waiting for the service",
            self.name.replace("_", " "),
            reader.in_flight.allowed,
            workers,
        )

    def probe_where_records_are(
        self,
        after: int | None,
        upper: int | None,
        before: int,
        slots: int,
    ) -> tuple[int, list[int] | None]:
        """Where the records of the run's range begin (``after`` None: no bookmark and no
        start_date), so the windows are cut where the data is, not over years before it, and
        a sample of their dates. One round of requests at once:

        - probes (pages of 10): is there a record in ``[after, instant)`` for each instant
          ``PROBE_DAYS`` back from ``before`` (as many as there are requests in flight but
          one)? The first instant with none before it is where the windows are cut from (the
          earliest record lies within a quarter of the distance from there to ``before``).
          The windows still tile the whole range (the oldest one reaches down to ``after``,
          or has no ``after`` at all), so a record the service adds meanwhile is not lost;
        - the first page of the whole range ``[after, upper)`` (a full page, not delivered):
          served in no date order, a sample of the range's dates, which ``initial_windows``
          cuts at; in date order, one end of the range, which it ignores.

        Returns where to cut from, and the sample's dates (None unless the page was full)."""
        lowest = 0 if after is None else after
        instants = [before - days * _DAY for days in PROBE_DAYS if before - days * _DAY > lowest]
        instants = instants[: max(slots - 1, 1)]
        sample_context = {
            "after": None if after is None else from_ns(after),
            "before": None if upper is None else from_ns(upper),
        }
        calls: list[Callable[[], t.Any]] = [functools.partial(self._first_page, sample_context)]
        calls += [functools.partial(self._any_record_between, after, i) for i in instants]
        page, *found = self.concurrency.at_once(self, self.name.replace("_", "-"), calls)
        low = next(
            (
                instant
                for instant, any_before in zip(instants, found, strict=True)
                if not any_before
            ),
            lowest,
        )
        self.logger.info(
            "The earliest %s record after %s is on or after %s (%d requests); the windows "
            "are cut from there",
            self.name.replace("_", " "),
            "the start" if after is None else from_ns(after),
            from_ns(low),
            len(instants) + 1,
        )
        dates = [to_ns(date) for record in page if (date := self.window_key(record)[-1])]
        return low, dates if len(page) >= self.page_size else None

    def _first_page(self, context: dict[str, t.Any]) -> list[Record]:
        """The records of the first page of a query (at most ``page_size``)."""
        records = iter(self.request_records(context))
        try:
            return list(itertools.islice(records, self.page_size))
        finally:
            if isinstance(records, t.Generator):
                records.close()

    def _any_record_between(self, after: int | None, before: int) -> bool:
        context = {"after": None if after is None else from_ns(after), "before": from_ns(before)}
        records = iter(self.request_records({**context, "probe": True}))
        try:
            return next(records, None) is not None
        finally:
            if isinstance(records, t.Generator):
                records.close()


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

    def saw(self, changed: Iterable[str | None]) -> None:
        """Note the instants records delivered changed (in the bookmark's format; None: not
        known): a page's, once the page is delivered."""
        if latest := max(filter(None, changed), default=None):
            self.backfill.saw(latest)

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
