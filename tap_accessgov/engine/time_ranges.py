"""A time range read as half-open windows, several at once, resumable as they complete: the
grant feed's, the system log's and the tasks' (engine/windowed.py, ``read_range``), told here
in the grant feed's words.

The feed's ``after`` (inclusive) and ``before`` (exclusive) tile time exactly, so a range cut
into windows ``[t0, t1), [t1, t2) ...`` is read whole, each event once, whatever order the
windows finish in. Pages of one window still follow each other (the page token belongs to its
query), so the run needs more windows than workers at all times:

- **Cut**: the range (lower: bookmark or ``start_date``, or where the earliest event is, found
  by one round of small probes at once; upper: ``end_date``, or the sync's start with the
  last window left open) is cut into ``3 x max_concurrency`` windows of equal width (fewer
  for a short range: none narrower than twelve hours). The same round reads the first page
  of the whole range: served in no date order, it is a sample of the range's dates, and
  the range is cut at its quantiles instead, into ``max_concurrency`` windows (six at
  least) of about equal counts, each cut again as its own first page arrives, at that
  page's dates, into six pieces from 6/21 to 1/21 of it (``coarse``: a hundred dates say
  little of 48 windows, much of 8). Windows newest first: the dense recent ones are found
  early, the sparse past fills the end; the pieces of the coarse windows are read largest
  first (``reading_order``), so the smallest fill the end of the run.
- **Split**: real data is skewed (one busy week can hold half the year) and the service does
  not say in which order it returns a window, so a window is measured on its first full
  pages, from the first on, and their own order says how (``pieces``): pages in date
  order (ascending, descending or nearly) cover a run of the window's dates, and the
  density of the last one, over what is left ahead of the reading, estimates the rest;
  pages in no date order are a sample of the window's dates, and their quantiles say where
  to cut it into pieces of equal counts. A large window is cut into pieces read in its
  place, while more than one window is read at once (pieces read one after another would
  cost requests for nothing: each ends on a part page of its own); the pages read are
  delivered as read, and the pieces skip exactly those events when they meet them again (a
  multiset of the primary keys of at most ``SPLIT_WITHIN_PAGES`` pages). Whatever the
  estimate says, the pieces tile the window, so it only decides speed.
- **Resume**: a STATE is written as each window completes, with the completed windows beside
  the bookmark (``backfill``, see ``Backfill``); a rerun from it reads only what was not
  complete. The final STATE of a completed sync is the plain bookmark.

- **In flight**: ``max_concurrency`` windows at most, and only as many as the run waits for
  (``InFlight``): the first in the main thread, no worker, more once the run is found waiting
  for the service. A server that answers at once is read one window after another, as fast
  as one query; one with a real latency, at ``max_concurrency`` from its first pages.

Only HTTP runs in the worker threads (concurrency.Workers); records go back to the main thread,
which hands them to the SDK (maps, selection, state increments, one writer), a bounded queue
of pages between them so memory stays flat.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import queue
import time
import typing as t

from tap_accessgov.timestamps import from_ns, to_ns

if t.TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterable, Iterator, Mapping

    from tap_accessgov.engine.concurrency import Workers

Record = dict[str, t.Any]
Key = tuple[t.Any, ...]

WINDOWS_PER_WORKER = 3  # windows of equal width per request in flight
# The first cut at the range's sample, in no date order (``coarse``): one window per request
# in flight, no fewer than MIN_COARSE_WINDOWS (read one at a time they are never cut, and each
# completes a part a killed run does not read again); each cut at its first page's dates into
# COARSE_PIECES pieces of shares 6/21, 5/21 ... 1/21 (``pieces``): the largest read first, the
# smallest fill the end of the run (``reading_order``).
MIN_COARSE_WINDOWS = 6
COARSE_PIECES = 6
# Narrowest window of the initial cut: a nightly incremental run (a day or less) is one or two
# windows, not sixteen mostly empty ones; a dense one is split like any other.
CUT_WIDTH = 12 * 3600 * 1_000_000_000  # ns
TARGET_PAGES = 3  # pages of the pieces of a window read in date order (see ``pieces``)
MIN_WIDTH = 1_000_000  # ns (1 ms): no window is cut narrower
MAX_PIECES = 32
SAMPLE_PIECES = 16  # pieces of a window whose pages are a sample of its dates
SAMPLE_CUTS = 1  # sample cuts of a window and its pieces, at most
BY_DATE = 0.5  # |rank correlation| from which a window's pages are taken as ordered by date
SPLIT_WITHIN_PAGES = 8  # a window is split only in its first pages (the skip list stays short)
BACKFILL = "backfill"  # the key of the window state inside the stream's state


@dataclasses.dataclass(frozen=True)
class Window:
    """``[start, end)`` in ns; None: unbounded (no ``after`` / no ``before``)."""

    start: int | None
    end: int | None
    skip: collections.Counter[Key] | None = dataclasses.field(default=None, compare=False)
    # How many sample cuts (see ``pieces``) made this window: 0 for a window of the first cut.
    sampled: int = dataclasses.field(default=0, compare=False)
    # A window of the first cut at the range's sample (a hundred dates for the whole range):
    # cut again at its own first page's dates as soon as that page is read (``pieces``).
    coarse: bool = dataclasses.field(default=False, compare=False)
    # A coarse window: the share of the range's sample it holds; a piece of one: that share
    # times the share of the window's first page it holds (0: neither). The reader takes the
    # largest pieces first (``reading_order``).
    weight: float = dataclasses.field(default=0.0, compare=False)

    def bounds(self) -> tuple[str | None, str | None]:
        """``after`` and ``before`` as the request sends them."""
        return (
            None if self.start is None else from_ns(self.start),
            None if self.end is None else from_ns(self.end),
        )

    def contains(self, ns: int) -> bool:
        return (self.start is None or ns >= self.start) and (self.end is None or ns < self.end)


def cut(start: int | None, end: int | None, low: int, high: int, count: int) -> list[Window]:
    """``[start, end)`` in ``count`` windows of equal width, measured on ``[low, high)`` (the
    known span of an unbounded side); the outer windows keep unbounded sides unbounded."""
    first, last = start if start is not None else low, end if end is not None else high
    count = max(1, min(count, (last - first) // MIN_WIDTH))
    edges = [first + (last - first) * n // count for n in range(1, count)]
    bounds = zip([start, *edges], [*edges, end], strict=True)
    return [Window(a, b) for a, b in bounds if a is None or b is None or a < b]


def initial_windows(
    start: int | None,
    end: int | None,
    low: int,
    high: int,
    workers: int,
    sample: list[int] | None = None,
) -> list[Window]:
    """The run's range ``[start, end)`` cut for ``workers`` requests in flight over ``[low,
    high)``, where its events are (the oldest window reaches down to ``start``), newest first
    (most events are recent: the dense windows are found early, the sparse past fills the end
    of the run).

    ``sample``: the dates of a full first page of the whole range. Served in no date order,
    it is a sample of the range's dates, and the range is cut at its quantiles into
    ``workers`` windows of about equal counts (each dense stretch is cut from the start
    instead of after pages that its pieces read again), each ``coarse``: the first page of
    each, a hundred dates of an eighth of the range, cuts it into ``COARSE_PIECES`` pieces
    (``pieces``) while several windows are read at once. Cut at once into the 48 windows
    of 8 requests in flight, two dates of the sample apiece, the windows held from 19 to
    2,213 events, and the last large ones ran alone for seconds (docs/backfills.md). No
    fewer than ``MIN_COARSE_WINDOWS`` windows, though: read one at a time they are never
    cut, and each completes a part a killed run does not read again. In date order the
    sample covers one end of the range only, and the windows are of equal width."""
    count = min(WINDOWS_PER_WORKER * workers, max(1, (high - low) // CUT_WIDTH))
    if sample is not None and len(sample) >= 3 and abs(date_order(sample)) < BY_DATE:
        first_cut = max(workers, MIN_COARSE_WINDOWS)
        windows = _quantile_cut(start, end, sorted(sample), first_cut, coarse=True)
    else:
        windows = cut(None if start is None or start < low else start, end, low, high, count)
    if start is not None and windows[0].start is None:  # the oldest reaches down to start
        windows[0] = dataclasses.replace(windows[0], start=start)
    return list(reversed(windows))


def _quantile_cut(
    start: int | None, end: int | None, dates: list[int], count: int, *, coarse: bool = False
) -> list[Window]:
    """``[start, end)`` cut at the ``count``-quantiles of the sorted ``dates`` (the outer
    windows keep unbounded sides unbounded): windows of about equal counts, each a piece of
    a sample cut (``pieces`` does not cut them again at twice the typical pages: the few
    pages of each would be read again by sixteen pieces; ``coarse`` ones it cuts at their
    first page)."""
    edges = sorted({dates[len(dates) * n // count] for n in range(1, count)})
    edges = [
        edge
        for edge in edges
        if (start is None or edge - start >= MIN_WIDTH) and (end is None or end - edge >= MIN_WIDTH)
    ]
    bounds = zip([start, *edges], [*edges, end], strict=True)
    return [
        Window(a, b, sampled=1, coarse=coarse, weight=_share(dates, a, b) if coarse else 0.0)
        for a, b in bounds
    ]


def reading_order(window: Window) -> tuple[int, float]:
    """Where ``window`` goes among the windows waiting after a split (a stable sort): the
    coarse windows first, in their order (newest first); then the pieces of coarse windows,
    largest first (the smallest fill the end of the run, where a large one would run
    alone); then the rest in their order (a split's pieces before the windows that were
    waiting: one dense stretch is read through first)."""
    return (0, 0.0) if window.coarse else (1, -window.weight)  # the rest: a weight of 0


def _at_least_min_width(start: int, end: int, edges: list[int]) -> list[int]:
    """The sorted ``edges`` inside ``(start, end)`` that leave every piece at least
    ``MIN_WIDTH`` wide (the service keeps instants to the millisecond: a narrower piece
    holds at most the events of one, and costs a request)."""
    kept: list[int] = []
    for edge in sorted(set(edges)):
        if edge - (kept[-1] if kept else start) >= MIN_WIDTH and end - edge >= MIN_WIDTH:
            kept.append(edge)
    return kept


def _share(dates: list[int], start: int | None, end: int | None) -> float:
    """The share of ``dates`` in ``[start, end)``."""
    inside = sum(1 for d in dates if (start is None or d >= start) and (end is None or d < end))
    return inside / len(dates)


def pieces(
    window: Window,
    delivered: list[list[Record]],
    typical: float | None,
    low: int,
    high: int,
    key_of: Callable[[Record], Key],
    page_dates: list[list[int]] | None = None,
) -> list[Window]:
    """How to read the rest of ``window`` after its full pages ``delivered`` (in the order the
    service sent them): ``[]`` to go on paging, else the windows to read instead (each
    skipping the events of ``delivered`` that it holds). ``key_of``: a record's key (the
    stream's), its date last (None: not known; such a record is in no sample).
    ``page_dates``: the known dates (ns, ``dates_of``) of the first pages of ``delivered``,
    completed here for the rest: the reader keeps the list from one call to the next, so a
    page's dates are read once, not again after every page that follows it.

    The pages say which order the service uses (``date_order``):

    - **By date** (ascending, descending or nearly): the pages cover a run of the window's
      dates from one end, and the rest lies ahead of the reading. The density of the last
      page (where the reading is now: an ascending feed may grow denser as it goes; the
      pages' average, or the window's part read from the end it is read from, where that
      is sparser: a burst at one instant is no density) over the width ahead estimates the
      pages left; when they are more than twice
      ``TARGET_PAGES``, the part ahead is cut into pieces of about ``TARGET_PAGES``, and the
      part read, with the sliver behind it (the stragglers of a nearly sorted feed, none
      when sorted), becomes one piece (its events skipped). Splitting costs requests (each
      piece ends on a part page, the pages read are read again), which pay only when the
      window would otherwise run long after the others; a piece that proves dense is split
      in turn.
    - **In no date order**: the pages are a sample of the window's dates, which says where
      its events are but not how many there are (a consistent order such as by id returns
      the same events first in every piece, so they cannot be counted either). A window
      that goes on for twice the pages of the windows completed so far is cut at the
      sample's quantiles into ``SAMPLE_PIECES`` pieces of about equal counts; a piece of
      such a cut is not cut again. A ``coarse`` window (the first cut's, at the range's
      sample) is cut from its first full page on, at the dates read, into
      ``COARSE_PIECES`` pieces holding 6/21, 5/21 ... 1/21 of them, oldest to newest, each
      weighted by the window's weight times that share (``weight``: the reader takes the
      largest first, ``reading_order``): its events are a share of the range's that the
      run's windows in flight divide among them, whatever its count.
    """
    start = window.start if window.start is not None else low
    end = window.end if window.end is not None else max(high, start + 1)
    pages = len(delivered)
    page_dates = [] if page_dates is None else page_dates
    page_dates.extend(dates_of(page, key_of) for page in delivered[len(page_dates) :])
    dates = [date for dates_of_page in page_dates for date in dates_of_page]
    if not dates:
        return []  # no date to cut at (no page yet, or records of no known date)
    if abs(order := date_order(dates)) >= BY_DATE:
        # The unread side ahead of the reading holds the rest; the side behind it holds at
        # most the stragglers of a nearly sorted feed (none when sorted) and joins the part
        # read, as does a side ahead narrower than a page. The part read stops short of the
        # last instant read (its events join the piece ahead, skipped there), so it holds
        # fewer events than the pages read: read again, it ends on a part page of its own,
        # not on an empty page after its last full one.
        read_edge = max(dates) if order > 0 else min(dates) + 1
        # ns per page: the density where the reading is now (an ascending feed may grow
        # denser as it goes), but never denser than the pages read on average. A burst under
        # the last page (the system log files dozens of events at one instant) would
        # otherwise predict a window full of pages ahead and cut it into MAX_PIECES pieces,
        # a request each, where a few pages remain; a piece that proves dense is split in
        # turn, so reading density low costs less than reading it high.
        # Nor denser than the window's part read, from the end it is read from (no event
        # lies between that end and the first one sent): pages read within a burst right
        # after a quiet stretch (a nightly run of the system log: its sign-ins filed at one
        # instant, then nothing up to the run's start) are no density either, and the
        # pieces of a piece cut wrongly would each cost a request. That part counts each
        # instant read once: a burst read a little after the window's start (a piece cut
        # just before the sign-ins) is one instant of the stretch, not pages of density to
        # cut the quiet rest of the window by (a nightly run took 93 requests for 17 pages).
        last = page_dates[-1] or dates
        covered = read_edge - start if order > 0 else end - read_edge
        per_instant_page = covered * len(dates) // (pages * len(set(dates)))
        per_page = max(
            max(last) - min(last), (max(dates) - min(dates)) // pages, per_instant_page, 1
        )
        ahead = end - read_edge if order > 0 else read_edge - start
        if ahead // per_page <= 2 * TARGET_PAGES:
            return []
        count = min(math.ceil(ahead / per_page / TARGET_PAGES), MAX_PIECES)
        if order > 0:
            edges = [read_edge + ahead * n // count for n in range(count)]
        else:
            edges = [start + ahead * n // count for n in range(1, count + 1)]
        edges = _at_least_min_width(start, end, edges)
        bounds = zip([window.start, *edges], [*edges, window.end], strict=True)
        children = [Window(a, b) for a, b in bounds]
        sampled = 0
    else:
        # Before a window completed, nothing says whether this one is large; after, one that
        # goes on for twice the typical pages is. A coarse one is: a share of the range.
        if window.coarse:
            # shares of n, n - 1 ... 1 in n (n + 1) / 2, oldest to newest (measured against
            # 1 ... n: 6.8x against 6.3x at 8 requests in flight, 12.1x against 11.4x at 16)
            n = COARSE_PIECES
            quantiles = [(c, n * (n + 1) // 2) for c in itertools.accumulate(range(n, 1, -1))]
        elif window.sampled >= SAMPLE_CUTS or typical is None or pages < max(2, 2 * typical):
            return []
        else:
            quantiles = [(c, SAMPLE_PIECES) for c in range(1, SAMPLE_PIECES)]
        dates.sort()
        edges = _at_least_min_width(start, end, [dates[len(dates) * c // n] for c, n in quantiles])
        if not edges:
            return []  # the dates read lie within a millisecond or so: nothing to cut
        bounds = zip([window.start, *edges], [*edges, window.end], strict=True)
        children = [Window(a, b, weight=window.weight * _share(dates, a, b)) for a, b in bounds]
        sampled = window.sampled + 1
    skip = collections.Counter(key_of(record) for page in delivered for record in page)
    skip += window.skip or collections.Counter()
    # Each key's instant (None: not known), read once for every piece.
    instants = [(k, n, None if k[-1] is None else to_ns(k[-1])) for k, n in skip.items()]
    return [
        dataclasses.replace(
            child,
            sampled=sampled,
            # A record of no known date may be in any piece: each skips it once.
            skip=collections.Counter(
                {k: n for k, n, at in instants if at is None or child.contains(at)}
            ),
        )
        for child in children
    ]


def dates_of(page: list[Record], key_of: Callable[[Record], Key]) -> list[int]:
    """The dates (ns) of a page's records whose key has one, in the page's order."""
    return [to_ns(date) for record in page if (date := key_of(record)[-1])]


def date_order(dates: list[int]) -> float:
    """How the service orders a window, from the dates of its pages in the order sent: the
    rank correlation of position and date, 1 ascending, -1 descending, near 0 in no date
    order (Spearman's rho; ties ranked by position)."""
    n = len(dates)
    if n < 3:
        return 1.0
    by_date = sorted(range(n), key=dates.__getitem__)  # stable: ties stay in position order
    squares = sum((rank - position) ** 2 for rank, position in enumerate(by_date))
    return 1 - 6 * squares / (n * (n * n - 1))


@dataclasses.dataclass
class Backfill:
    """What a sync has completed, in the stream's state beside the bookmark::

        "backfill": {"filters": "<digest>", "latest": "<latest date delivered>",
                     "completed": [["<after>" | null, "<before>" | null], ...]}

    ``completed`` holds merged, sorted half-open intervals (adjacent windows merge, so the
    list stays short). It is only valid for the same filters: another ``app_ids`` etc. reads
    everything again. Removed when the sync completes.
    """

    filters: str
    completed: list[tuple[int | None, int | None]] = dataclasses.field(default_factory=list)
    latest: str | None = None

    @classmethod
    def from_state(cls, state: Mapping[str, t.Any], filters: str) -> Backfill | None:
        saved = state.get(BACKFILL)
        if not isinstance(saved, dict) or saved.get("filters") != filters:
            return None
        completed = [
            (None if a is None else to_ns(a), None if b is None else to_ns(b))
            for a, b in saved.get("completed") or []
        ]
        return cls(filters, completed, saved.get("latest"))

    def to_state(self) -> dict[str, t.Any]:
        return {
            "filters": self.filters,
            "latest": self.latest,
            "completed": [
                [None if a is None else from_ns(a), None if b is None else from_ns(b)]
                for a, b in self.completed
            ],
        }

    def complete(self, window: Window) -> None:
        intervals = sorted(
            [*self.completed, (window.start, window.end)],
            key=lambda iv: -math.inf if iv[0] is None else iv[0],
        )
        merged: list[tuple[int | None, int | None]] = []
        for a, b in intervals:
            if merged and (merged[-1][1] is None or a is None or a <= merged[-1][1]):
                prev_a, prev_b = merged[-1]
                merged[-1] = (prev_a, None if prev_b is None or b is None else max(prev_b, b))
            else:
                merged.append((a, b))
        self.completed = merged

    def remaining(self, windows: Iterable[Window]) -> list[Window]:
        """``windows`` without the parts already completed."""
        left: list[Window] = []
        for window in windows:
            parts = [window]
            for a, b in self.completed:
                parts = [piece for part in parts for piece in _minus(part, a, b)]
            left.extend(parts)
        return left

    def saw(self, date: str) -> None:
        if self.latest is None or date > self.latest:
            self.latest = date


def _minus(window: Window, a: int | None, b: int | None) -> list[Window]:
    lo, hi = window.start, window.end
    out = []
    # each part cut as the window would have been (a coarse one at its first page)
    if a is not None and (lo is None or lo < a):  # the part before [a, b)
        end = a if hi is None else min(hi, a)
        out.append(dataclasses.replace(window, start=lo, end=end))
    if b is not None and (hi is None or hi > b):  # the part after it
        start = b if lo is None else max(lo, b)
        out.append(dataclasses.replace(window, start=start, end=hi))
    return [w for w in out if w.start is None or w.end is None or w.start < w.end]


class InFlight:
    """How many windows are read at once: one at first (read in the main thread, no worker),
    more while the run is mostly waiting for the service, up to ``maximum``.

    Windows in flight pay where the service makes the run wait (its latency: 4.5x to 5.4x
    on a backfill, docs/backfills.md), and cost where it does not: the process is then
    bound by its own CPU (one core: the GIL), and worker threads only hand the GIL and the
    page queue back and forth (on a server that answers at once, the same windows took
    45-78% more CPU eight at a time than one at a time, and 48-57% more two at a time;
    docs/performance.md). Whether the run waits is what its own CPU says: the process's CPU
    time over the wall time of the last ``SPAN`` (looked at on a page, no more often than
    ``LOOK_EVERY``), since the windows last changed; the wall time of ``wall_clock``, which
    the streams stop while the tap writes its output (a loader slower than the tap is no
    latency of the service: OutputWriter.time_not_writing). Below ``WAITING`` the run
    waits more than the windows cost, and they grow in proportion: ``n`` windows keeping
    the process busy a share ``b`` of the time, ``n / b`` would keep it busy (a server
    answering in 50 ms goes from one to eight at the first look).

    A look of one page or one moment would mistake a core taken by another process (the
    loader, the database, the service itself on a shared machine) for the service's
    latency, and a run bound by its CPU would then pay for windows to the end: measured on
    a busy 2-core machine, single looks of 50 ms fell to 0.44-0.79 busy within runs whose
    median was 0.90, and the run grew to 8 windows in some rounds and not in others
    (docs/performance.md). A latency is there at every look; a moment's contention is
    diluted in a second of them. Never fewer: a window is at most a page of memory, and a
    service that throttles is answered by ``RequestBudget``, which lowers the requests in
    flight.
    """

    LOOK_EVERY = 0.05  # s
    SPAN = 1.0  # s of looks a decision rests on, since the windows last changed
    # Busy share (process CPU / wall) under which the run is waiting for the service: where
    # windows in flight cost 45-78% more CPU, they pay below 1 / 1.45-1.78 = 0.56-0.69.
    WAITING = 0.6

    def __init__(
        self,
        maximum: int,
        wall_clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.process_time,  # every thread of the process
    ) -> None:
        self.maximum = maximum
        self.allowed = 1
        self._wall_clock, self._cpu_clock = wall_clock, cpu_clock
        # (wall, cpu) at each look since the windows last changed, the last SPAN of them
        self._looks = collections.deque([(wall_clock(), cpu_clock())])

    def page_arrived(self) -> None:
        """Look, at most every ``LOOK_EVERY``: more windows if the run was waiting."""
        if self.allowed >= self.maximum:
            return
        wall = self._wall_clock()
        looks = self._looks
        if wall - looks[-1][0] < self.LOOK_EVERY:
            return
        cpu = self._cpu_clock()
        while len(looks) > 1 and wall - looks[1][0] >= self.SPAN:
            looks.popleft()
        since_wall, since_cpu = looks[0]
        busy = (cpu - since_cpu) / (wall - since_wall)
        if busy < self.WAITING:
            wanted = math.ceil(self.allowed / max(busy, 1 / self.maximum))
            self.allowed = min(self.maximum, max(self.allowed + 1, wanted))
            looks.clear()
        looks.append((wall, cpu))


class WindowReader:
    """Reads windows, as many at once as ``in_flight`` allows (one in the main thread, more
    in ``workers`` threads), and yields their records in the main thread.

    ``read(window)`` pages through one window (the stream's request loop, in the main thread
    or a worker); ``on_complete(window)`` runs in the main thread once every record of the window
    has been handed on (the SDK has written them when it asks for the next one). ``key_of``:
    a record's key (the stream's), which a piece skips (``pieces``).
    ``wall_clock``: the run's time as ``in_flight`` reads it (the stream's writer's
    ``time_not_writing``: a slow loader is no latency of the service).
    """

    def __init__(
        self,
        read: Callable[[Window], Iterable[Record]],
        split: Callable[[Window, list[list[Record]], list[list[int]], float | None], list[Window]],
        page_size: int,
        workers: Workers,
        count: int,
        key_of: Callable[[Record], Key],
        wall_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._key_of = key_of
        self._split = split
        self._page_size = page_size
        self._workers = workers
        # windows read at once: as many as the run waits for
        self.in_flight = InFlight(count, wall_clock=wall_clock)
        # Pages on their way to the main thread: a bound, so memory stays flat.
        self._pages: queue.Queue[tuple[str, Window, t.Any]] = queue.Queue(maxsize=2 * count)
        # Pages of the windows completed so far, on average (written by the main thread);
        # None until one completes.
        self.typical_pages: float | None = None
        self._completed_pages = self._completed = 0

    def records(
        self,
        windows: Iterable[Window],
        on_complete: Callable[[Window], None],
        on_page: Callable[[list[Record]], None],
    ) -> Iterator[Record]:
        """Every record of ``windows``. While one window at a time is enough (``in_flight``),
        each is read here, in the main thread, one after another; once more are, the others
        go to the workers (the one read here, if any, goes on here, between their pages).
        ``on_page(page)`` runs once the page's every record has been handed on,
        ``on_complete(window)`` once the window's."""
        waiting = collections.deque(windows)
        running = 0
        pages: collections.Counter[Window] = collections.Counter()
        in_flight = self.in_flight
        here: Generator[tuple[str, Window, t.Any]] | None = None  # the window read here
        try:
            while waiting or running:
                if here is None and not running and in_flight.allowed == 1:
                    here = self._here(waiting.popleft())
                    running = 1
                while waiting and running < in_flight.allowed:
                    self._workers.submit(self._work, waiting.popleft())
                    running += 1
                if here is None:
                    kind, window, payload = self._pages.get()
                else:  # the workers' pages first, when there are some
                    try:
                        kind, window, payload = self._pages.get_nowait()
                    except queue.Empty:
                        kind, window, payload = next(here)
                        if kind in ("split", "done"):
                            here = None
                if kind == "records":
                    pages[window] += 1
                    in_flight.page_arrived()
                    yield from payload
                    on_page(payload)
                elif kind == "split":
                    running -= 1
                    pages.pop(window, 0)
                    waiting = collections.deque(sorted([*payload, *waiting], key=reading_order))
                elif kind == "done":
                    running -= 1
                    self._completed += 1
                    self._completed_pages += pages.pop(window, 0)
                    self.typical_pages = self._completed_pages / self._completed
                    on_complete(window)
                else:  # "failed"
                    raise payload
        finally:
            if here is not None:
                here.close()
            self._workers.close()

    def _here(self, window: Window) -> Generator[tuple[str, Window, t.Any]]:
        """``window`` read in the calling thread: what a worker would hand over."""
        for kind, payload in self._read_window(window):
            yield kind, window, payload

    def _work(self, window: Window) -> None:
        try:
            for kind, payload in self._read_window(window):
                if self._workers.stop.is_set():
                    return
                self._send(kind, window, payload)
        except BaseException as exc:  # handed to the main thread, raised there
            if not self._workers.stop.is_set():
                self._send("failed", window, exc)

    def _read_window(self, window: Window) -> Iterator[tuple[str, t.Any]]:
        """``window``'s pages (``records``), then ``done``; or, from one of its first pages
        on, ``split`` with the pieces to read in its place."""
        stopped = self._workers.stop.is_set
        skip = collections.Counter(window.skip or {})
        records = self._read(window)
        page: list[Record] = []
        read: list[list[Record]] = []  # the first pages, while the window may still be split
        read_dates: list[list[int]] = []  # their dates, as far as ``split`` read them
        try:
            for record in records:
                if stopped():
                    return
                if skip and skip[k := self._key_of(record)]:
                    skip[k] -= 1
                    continue
                page.append(record)
                if len(page) < self._page_size:
                    continue
                yield "records", page
                if len(read) < SPLIT_WITHIN_PAGES:
                    read.append(page)
                    # Pieces pay only where several are read at once; one window at a
                    # time reads the same events in fewer requests unsplit.
                    if self.in_flight.allowed > 1 and (
                        children := self._split(window, read, read_dates, self.typical_pages)
                    ):
                        yield "split", children
                        return
                page = []
            if page:
                yield "records", page
            yield "done", None
        finally:
            if isinstance(records, t.Generator):
                records.close()

    def _send(self, kind: str, window: Window, payload: t.Any) -> None:
        """Hand over to the main thread; give up when the sync stops (it no longer reads)."""
        while not self._workers.stop.is_set():
            try:
                self._pages.put((kind, window, payload), timeout=0.1)
            except queue.Full:
                continue
            return
