"""The range reader's arithmetic, as properties: how a range is cut into windows, a window
into pieces, what a resumed run has left to read, and how the order of a window's pages is
told. The syncs of test_backfill.py check that a run delivers each event once whatever the
cut; these pin what the cut itself promises (it tiles, no window narrower than a
millisecond, each read event skipped by exactly the piece that holds it), so that a change
of the reader (issue 66's one reader for every windowed stream) keeps it, each checked
against a computation of its own (points counted one by one, ranks correlated directly)."""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import math
import random
import threading
import typing as t

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from tap_accessgov.engine.concurrency import Workers
from tap_accessgov.engine.time_ranges import (
    BY_DATE,
    MAX_PIECES,
    MIN_WIDTH,
    SAMPLE_CUTS,
    SAMPLE_PIECES,
    TARGET_PAGES,
    Backfill,
    Window,
    WindowReader,
    _at_least_min_width,
    _minus,
    _quantile_cut,
    cut,
    date_order,
    pieces,
)
from tap_accessgov.streams.grant_feed import filters_digest, key
from tap_accessgov.timestamps import from_ns
from tests.conftest import ns
from tests.test_backfill import _event as event  # a grant event with the fields key reads

MS = MIN_WIDTH  # one millisecond, the narrowest window
Bound = int | None
Record = dict[str, t.Any]


def tiles(windows: list[Window], start: Bound, end: Bound) -> bool:
    """``windows`` cover ``[start, end)`` in order, each beginning where the one before ends."""
    return (
        bool(windows)
        and windows[0].start == start
        and windows[-1].end == end
        and all(a.end == b.start for a, b in itertools.pairwise(windows))
    )


def bounded_widths(windows: list[Window]) -> list[int]:
    return [w.end - w.start for w in windows if w.start is not None and w.end is not None]


@given(
    first=st.integers(-(10**12), 10**12),
    span=st.integers(1, 10**11),
    count=st.integers(1, 40),
    start_unbounded=st.booleans(),
    end_unbounded=st.booleans(),
    known_below=st.integers(0, 10**11),
    known_above=st.integers(0, 10**11),
)
def test_a_cut_tiles_the_range_in_windows_of_equal_width(
    first: int,
    span: int,
    count: int,
    start_unbounded: bool,
    end_unbounded: bool,
    known_below: int,
    known_above: int,
) -> None:
    """``count`` windows of equal width (to the nanosecond) over ``[start, end)``, fewer where
    the range is too narrow for windows of a millisecond; an unbounded side stays unbounded,
    measured where the events are known to be (``[low, high)``, here as wide as the range
    on that side: a bounded side is measured from itself, not from what is known)."""
    last = first + span
    start, end = (None if start_unbounded else first), (None if end_unbounded else last)
    low = first if start_unbounded else first - known_below
    high = last if end_unbounded else last + known_above
    windows = cut(start, end, low, high, count)
    assert tiles(windows, start, end)
    assert len(windows) == max(1, min(count, span // MS))
    edges = [first, *(w.end for w in windows[:-1]), last]
    widths = [b - a for a, b in itertools.pairwise(edges)]
    assert max(widths) - min(widths) <= 1
    assert all(width >= MS for width in widths) or len(windows) == 1


@given(
    dates=st.lists(st.integers(0, 10**6), min_size=3, max_size=300).map(
        lambda found: sorted(date * 1000 for date in found)
    ),
    count=st.integers(2, 60),
    start=st.none() | st.integers(-(10**9), 10**8),
    end=st.none() | st.integers(10**8, 2 * 10**9),
)
@example(dates=[MS, MS, MS], count=2, start=0, end=2 * MS)  # a quantile a millisecond inside
def test_a_sample_cut_is_at_the_samples_quantiles_a_millisecond_inside_the_range(
    dates: list[int], count: int, start: Bound, end: Bound
) -> None:
    """Cut at the sample's ``count``-quantiles (the date at position ``len * n // count`` of
    the sorted sample), each one that lies at least a millisecond inside ``[start, end)``,
    and at no other instant: windows of about equal counts, marked as a sample's cut."""
    windows = _quantile_cut(start, end, dates, count)
    assert tiles(windows, start, end)
    assert all(w.sampled == 1 for w in windows)
    quantiles = {dates[len(dates) * n // count] for n in range(1, count)}
    inside = {
        q
        for q in quantiles
        if (start is None or q - start >= MS) and (end is None or end - q >= MS)
    }
    assert [w.end for w in windows[:-1]] == sorted(inside)


@given(
    start=st.integers(0, 100 * MS),
    width=st.integers(0, 200 * MS),
    edges=st.lists(st.integers(-50 * MS, 350 * MS), max_size=40),
)
@example(start=0, width=2 * MS, edges=[MS])  # a millisecond from each side: kept
@example(start=0, width=3 * MS, edges=[MS, 2 * MS])
def test_edges_are_kept_greedily_a_millisecond_apart(
    start: int, width: int, edges: list[int]
) -> None:
    """The edges kept, in order, leave every piece of ``[start, end)`` at least a millisecond
    wide; an edge is dropped only where it would leave one narrower than that, behind it (to
    the last edge kept) or ahead of it (to ``end``)."""
    end = start + width
    kept = _at_least_min_width(start, end, edges)
    assert kept == sorted(set(kept))
    assert set(kept) <= set(edges)
    assert all(b - a >= MS for a, b in itertools.pairwise([start, *kept, end])) or not kept
    for edge in set(edges) - set(kept):
        behind = max((k for k in kept if k <= edge), default=start)
        assert edge - behind < MS or end - edge < MS


SMALL = st.none() | st.integers(-12, 12)
POINTS = range(-15, 16)


def holds(start: Bound, end: Bound, point: int) -> bool:
    return (start is None or point >= start) and (end is None or point < end)


@given(lo=SMALL, hi=SMALL, a=SMALL, b=SMALL)
def test_a_window_minus_an_interval_holds_exactly_the_points_of_one_not_the_other(
    lo: Bound, hi: Bound, a: Bound, b: Bound
) -> None:
    """``_minus``: the window's parts outside ``[a, b)`` (a completed window: never empty),
    in order, none empty; counted point by point (None: unbounded)."""
    assume(a is None or b is None or a < b)
    parts = _minus(Window(lo, hi), a, b)
    for point in POINTS:
        inside = sum(holds(p.start, p.end, point) for p in parts)
        assert inside == (holds(lo, hi, point) and not holds(a, b, point)), point
    assert all(p.start is None or p.end is None or p.start < p.end for p in parts)
    assert all(
        x.end is not None and y.start is not None and x.end <= y.start
        for x, y in itertools.pairwise(parts)
    )


INTERVALS = st.lists(st.tuples(SMALL, SMALL), max_size=6)


@given(completed=INTERVALS, wanted=INTERVALS)
def test_a_resumed_backfill_reads_exactly_what_no_completed_window_covered(
    completed: list[tuple[Bound, Bound]], wanted: list[tuple[Bound, Bound]]
) -> None:
    """After windows complete (in any order, overlapping or adjacent), ``remaining`` leaves
    of the windows asked for exactly the points no completed window held, each once; the
    completed list stays merged (sorted, apart), and survives the STATE it is saved in."""
    backfill = Backfill("filters")
    done = [(a, b) for a, b in completed if a is None or b is None or a < b]
    for a, b in done:
        backfill.complete(Window(a, b))
    asked = [Window(a, b) for a, b in wanted if a is None or b is None or a < b]
    left = backfill.remaining(asked)
    for point in POINTS:
        covered = any(holds(a, b, point) for a, b in done)
        want = sum(holds(w.start, w.end, point) for w in asked) * (not covered)
        assert sum(holds(w.start, w.end, point) for w in left) == want, point
        assert any(holds(a, b, point) for a, b in backfill.completed) == covered, point
    merged = backfill.completed
    assert all(
        x[1] is not None and y[0] is not None and x[1] < y[0] for x, y in itertools.pairwise(merged)
    )
    saved = Backfill.from_state({"backfill": backfill.to_state()}, "filters")
    assert saved == backfill
    assert Backfill.from_state({"backfill": backfill.to_state()}, "other filters") is None
    assert Backfill.from_state({"backfill": "not a window list"}, "filters") is None


def test_the_latest_date_seen_is_the_greatest_and_is_saved() -> None:
    backfill = Backfill("f")
    for date in ("2026-01-02T00:00:00.000000000Z", "2026-01-03T00:00:00.000000000Z"):
        backfill.saw(date)
    backfill.saw("2026-01-01T00:00:00.000000000Z")
    assert backfill.latest == "2026-01-03T00:00:00.000000000Z"
    assert Backfill.from_state({"backfill": backfill.to_state()}, "f") == backfill


def spearman(dates: list[int]) -> float:
    """Pearson's correlation of each page position with its date's rank (ties ranked in
    position order): Spearman's rho, computed directly."""
    n = len(dates)
    rank = {position: r for r, position in enumerate(sorted(range(n), key=lambda p: dates[p]))}
    ranks = [rank[p] for p in range(n)]
    mean = (n - 1) / 2
    cov = sum((p - mean) * (r - mean) for p, r in enumerate(ranks))
    var = sum((p - mean) ** 2 for p in range(n))
    return cov / var


@given(st.lists(st.integers(0, 50), max_size=60))
def test_the_order_of_a_windows_pages_is_the_rank_correlation_of_position_and_date(
    dates: list[int],
) -> None:
    if len(dates) < 3:
        assert date_order(dates) == 1.0  # too few to tell: read as in date order
    else:
        assert math.isclose(date_order(dates), spearman(dates), abs_tol=1e-9)


key_of = key  # a grant event's key, its date last (what the grant feed's pieces skip)


@settings(max_examples=400)
@given(
    count=st.integers(20, 240),
    span=st.integers(1, 1000),
    rng=st.randoms(use_true_random=False),
    order=st.sampled_from(["ascending", "descending", "none"]),
    page=st.integers(5, 40),
    typical=st.none() | st.floats(0.5, 3.0),
    start_unbounded=st.booleans(),
    end_unbounded=st.booleans(),
    sampled=st.integers(0, 1),
)
def test_the_pieces_of_a_window_tile_it_and_skip_each_read_event_in_the_piece_holding_it(
    count: int,
    span: int,
    rng: random.Random,
    order: str,
    page: int,
    typical: float | None,
    start_unbounded: bool,
    end_unbounded: bool,
    sampled: int,
) -> None:
    """Whatever the pages say (in date order or none, dense or sparse), a window cut into
    pieces is tiled by them, none narrower than a millisecond but for its unbounded ends, at
    most MAX_PIECES (SAMPLE_PIECES for a cut at a sample's quantiles); each event read so far
    is skipped by the one piece that holds its instant, as often as it was read, and so is
    each event the window itself was to skip; a sample's cut is marked, one by date not.
    The events read lie in the window's first ``span`` ms of 1,000 (pages that cover little
    of it are what gets a window cut)."""
    instants = [rng.randrange(span * MS) for _ in range(count)]
    if order != "none":
        instants.sort(reverse=order == "descending")
    records = [event(n, at) for n, at in enumerate(instants)]
    delivered = [records[i : i + page] for i in range(0, len(records) - page + 1, page)]
    earlier = collections.Counter({key_of(event(-1, 500 * MS)): 2})
    window = Window(
        None if start_unbounded else 0,
        None if end_unbounded else 1000 * MS,
        skip=earlier,
        sampled=sampled,
    )
    children = pieces(window, delivered, typical, 0, 1000 * MS, key_of)
    if not delivered:
        assert children == []
    elif order == "none" and len(delivered) < 2:
        # a sample is cut after twice the typical pages, two at least (one page of a few
        # random dates may look ordered: it is then cut by its density, as in date order)
        assert all(child.sampled == 0 for child in children)
    if not children:
        return
    assert tiles(children, window.start, window.end)
    assert all(width >= MS for width in bounded_widths(children))
    by_sample = all(child.sampled == sampled + 1 for child in children)
    assert by_sample or all(child.sampled == 0 for child in children)
    assert len(children) <= (SAMPLE_PIECES if by_sample else MAX_PIECES + 1)
    read = collections.Counter(key_of(r) for p in delivered for r in p) + earlier
    for child in children:
        want = collections.Counter({k: n for k, n in read.items() if child.contains(ns(k[-1]))})
        assert child.skip == want
    skipped = sum((child.skip or collections.Counter() for child in children), start=read - read)
    assert skipped == read


def test_pages_of_records_of_no_known_date_cut_nothing() -> None:
    """Full pages whose records have no date (a system log event without ``time``) say
    nothing of where the window's events are: it is read whole."""
    dateless = [{**event(n, n * MS), "date": None} for n in range(100)]
    assert pieces(Window(0, 3200 * MS), [dateless], None, 0, 3200 * MS, key_of) == []
    assert pieces(Window(0, 3200 * MS, coarse=True), [dateless] * 2, 1.0, 0, 1, key_of) == []


def test_a_window_read_in_date_order_is_cut_ahead_in_pieces_of_about_target_pages() -> None:
    """Two full ascending pages of 100 events a millisecond apart cover the window's first
    200 ms of 3,200: about 30 pages lie ahead, read as pieces of about TARGET_PAGES pages
    each, and the part read becomes one piece of its own (its events skipped there)."""
    records = [event(n, n * MS) for n in range(200)]
    delivered = [records[:100], records[100:]]
    children = pieces(Window(0, 3200 * MS), delivered, None, 0, 3200 * MS, key_of)
    read_part, *ahead = children
    assert read_part == Window(0, 199 * MS)  # the last instant read joins the piece ahead
    assert sum(read_part.skip.values()) == 199
    pages_ahead = (3200 - 199) / 100
    assert len(ahead) == math.ceil(pages_ahead / TARGET_PAGES)
    widths = bounded_widths(ahead)
    assert max(widths) - min(widths) <= 1


@given(
    count=st.integers(40, 240),
    span=st.integers(20, 1000),
    rng=st.randoms(use_true_random=False),
    page=st.integers(10, 40),
    typical=st.floats(0.5, 4.0),
)
def test_a_window_read_in_no_date_order_is_cut_at_its_samples_quantiles_once_it_runs_long(
    count: int, span: int, rng: random.Random, page: int, typical: float
) -> None:
    """Pages in no date order are a sample of the window's dates: once the window has gone on
    for twice the pages of the windows completed so far (``typical``), it is cut at the
    sample's ``SAMPLE_PIECES``-quantiles (those a millisecond apart), into pieces of about
    equal counts; not before a window completed, nor sooner."""
    instants = [rng.randrange(span * MS) for _ in range(count)]
    records = [event(n, at) for n, at in enumerate(instants)]
    delivered = [records[i : i + page] for i in range(0, len(records) - page + 1, page)]
    read = [instant for p in delivered for instant in (ns(r["date"]) for r in p)]
    assume(len(delivered) >= 2 and abs(spearman(read)) < BY_DATE)
    window = Window(0, 1000 * MS)
    children = pieces(window, delivered, typical, 0, 1000 * MS, key_of)
    assert pieces(window, delivered, None, 0, 1000 * MS, key_of) == []
    if len(delivered) < 2 * typical:
        assert children == []
        return
    ordered = sorted(read)
    quantiles = [ordered[len(ordered) * n // SAMPLE_PIECES] for n in range(1, SAMPLE_PIECES)]
    edges = [c.end for c in children[:-1]]
    assert edges == _at_least_min_width(0, 1000 * MS, quantiles)
    assert all(child.sampled == 1 for child in children)


def test_pages_correlated_with_their_dates_by_exactly_by_date_are_read_as_in_date_order() -> None:
    """``BY_DATE`` is where date order begins: three events sent at 0, 2 and 1 ms (a rank
    correlation of exactly 0.5), in two full pages of a window of a second, are a run of its
    first instants, and the rest of it is cut ahead; read as a sample, with no window
    completed yet, it would not be cut at all."""
    sent = [event(0, 0), event(1, 2 * MS), event(2, 1 * MS)]
    assert date_order([ns(r["date"]) for r in sent]) == BY_DATE
    children = pieces(Window(0, 1000 * MS), [sent[:1], sent[1:]], None, 0, 1000 * MS, key_of)
    assert len(children) > 2
    assert all(child.sampled == 0 for child in children)


def test_a_window_cut_from_a_sample_is_not_cut_again_and_each_pages_dates_are_read_once() -> None:
    """A window made by a sample cut (``sampled``: SAMPLE_CUTS of them) is read on, however
    long it runs; and the dates of the pages already measured are kept in the caller's
    ``page_dates``, completed by each call for the pages that arrived since."""
    rng = random.Random(5)
    records = [event(n, rng.randrange(1000 * MS)) for n in range(200)]
    pages = [records[:50], records[50:100], records[100:150], records[150:]]
    fresh = Window(0, 1000 * MS)
    assert len(pieces(fresh, pages, 1.0, 0, 1000 * MS, key_of)) == SAMPLE_PIECES
    cut_before = Window(0, 1000 * MS, sampled=SAMPLE_CUTS)
    assert pieces(cut_before, pages, 1.0, 0, 1000 * MS, key_of) == []

    kept: list[list[int]] = []
    pieces(fresh, pages[:2], None, 0, 1000 * MS, key_of, kept)
    assert kept == [[ns(r["date"]) for r in page] for page in pages[:2]]
    pieces(fresh, pages, None, 0, 1000 * MS, key_of, kept)
    assert kept == [[ns(r["date"]) for r in page] for page in pages]


FILTERING = ("app_ids", "app_entitlement_refs", "app_user_refs", "user_ids", "expand_mask")


def test_completed_windows_count_only_for_the_same_filtering_settings() -> None:
    """A STATE's completed windows hold the events of one query: ``filters`` is the first 16
    hex digits of SHA-256 of the settings that filter the feed (or shape its events) as
    sorted JSON, unset ones null, which every version of the same major version writes
    alike (CHANGELOG.md: a STATE resumes across them). Each of them changes it; another
    setting does not."""
    config = {"app_ids": ["a"], "page_size": 100, "start_date": "2026-01-01T00:00:00Z"}
    text = json.dumps({name: config.get(name) for name in sorted(FILTERING)}, sort_keys=True)
    assert filters_digest(config) == hashlib.sha256(text.encode()).hexdigest()[:16]
    for name in FILTERING:
        assert filters_digest({**config, name: ["other"]}) != filters_digest(config), name
    assert filters_digest({**config, "page_size": 10, "start_date": None}) == (
        filters_digest(config)
    )


Split = t.Callable[[Window, list[list[Record]], list[list[int]], float | None], list[Window]]


def two_at_once(read: t.Callable[[Window], list[Record]], split: Split) -> WindowReader:
    """A reader of pages of 10 with two windows in flight from the start, each in a worker."""
    reader = WindowReader(
        read=read,
        split=split,
        page_size=10,
        workers=Workers(2, threading.Event(), "test-reader"),
        count=2,
        key_of=key_of,
    )
    reader.in_flight.allowed = 2
    return reader


def test_before_any_window_completes_a_window_in_no_date_order_is_read_on_uncut() -> None:
    """The reader with two windows in flight: the first sends page after page in no date
    order while the second does not answer until the first completes, so no window has
    completed while the first is read and nothing says how many pages a window takes
    (``typical_pages`` None): the first is read to its end, not cut. Then the reader knows
    the windows' average."""
    rng = random.Random(7)
    dense = [event(n, rng.randrange(500 * MS)) for n in range(60)]
    assert abs(date_order([ns(r["date"]) for r in dense])) < BY_DATE
    first, second = Window(0, 500 * MS), Window(500 * MS, 1000 * MS)
    first_done = threading.Event()

    def read(window: Window) -> list[Record]:
        if window == second:
            first_done.wait(timeout=10)
            return [event(100, 600 * MS)]
        return dense

    asked: list[float | None] = []

    def split(
        window: Window, pages: list[list[Record]], dates: list[list[int]], typical: float | None
    ) -> list[Window]:
        asked.append(typical)
        return pieces(window, pages, typical, 0, 1000 * MS, key_of, dates)

    completed: list[Window] = []

    def complete(window: Window) -> None:
        completed.append(window)
        first_done.set()

    reader = two_at_once(read, split)
    records = list(reader.records([first, second], complete, lambda page: None))
    assert sorted(map(key_of, records)) == sorted(map(key_of, [*dense, event(100, 600 * MS)]))
    assert asked == [None] * 6, "each of the first's six pages measured, none cut"
    assert completed == [first, second]
    assert reader.typical_pages == (6 + 1) / 2


def test_after_a_split_coarse_windows_then_the_largest_pieces_are_read_first() -> None:
    """After a split the waiting windows are read in ``reading_order``: the coarse windows
    first, as they were (newest first); then the pieces of coarse windows, largest first,
    the smallest filling the end of the run where a large one would run alone (equal ones
    in their order); then the rest, in their order. Two windows in flight: one holds its
    slot until the pieces are read, so the rest are read one at a time."""
    coarse = Window(0, 900 * MS, coarse=True)
    shares = [Window(0, 100 * MS, weight=0.1), Window(100 * MS, 300 * MS, weight=0.4)]
    shares += [Window(300 * MS, 500 * MS, weight=0.2), Window(500 * MS, 900 * MS, weight=0.4)]
    holding, last = Window(900 * MS, 950 * MS), Window(950 * MS, 1000 * MS)
    other_coarse = Window(1000 * MS, 2000 * MS, coarse=True)
    pieces_done = threading.Event()
    started: list[Window] = []

    def read(window: Window) -> list[Record]:
        started.append(window)
        if window == coarse:
            return [event(n, n * MS) for n in range(10)]  # a full page, then the split
        if window == holding:  # holds its slot until every piece is read
            pieces_done.wait(timeout=10)
        return [event(1000 + len(started), (window.start or 0) + MS)]

    def split(
        window: Window, pages: list[list[Record]], dates: list[list[int]], typical: float | None
    ) -> list[Window]:
        return shares if window == coarse else []

    def complete(window: Window) -> None:
        if window in shares and all(piece in started for piece in shares):
            pieces_done.set()

    reader = two_at_once(read, split)
    list(reader.records([coarse, holding, last, other_coarse], complete, lambda page: None))
    assert set(started[:2]) == {coarse, holding}  # in whichever thread starts first
    assert started[2:] == [other_coarse, shares[1], shares[3], shares[2], shares[0], last]


def test_a_piece_skips_each_event_as_often_as_it_was_read_by_the_streams_own_key() -> None:
    """A piece of a split window skips what the window delivered before the split: as a
    multiset (an event the service sends twice, read twice, is skipped twice and no more),
    by the key the stream gives (here a system log event's uid and time, not a grant
    event's fields)."""

    def log_key(record: Record) -> tuple[str, str]:
        return (record["uid"], record["time"])

    twice = {"uid": "u1", "time": from_ns(10 * MS)}
    once = {"uid": "u2", "time": from_ns(20 * MS)}
    sent = [twice, once, twice, twice, {"uid": "u3", "time": from_ns(30 * MS)}]
    piece = Window(0, 100 * MS, skip=collections.Counter({log_key(twice): 2, log_key(once): 1}))
    reader = WindowReader(
        read=lambda window: iter(sent),
        split=lambda *args: [],
        page_size=10,
        workers=Workers(1, threading.Event(), "test-reader"),
        count=1,
        key_of=log_key,
    )
    records = list(reader.records([piece], lambda window: None, lambda page: None))
    assert records == [twice, {"uid": "u3", "time": from_ns(30 * MS)}]
