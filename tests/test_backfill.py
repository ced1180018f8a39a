"""A real tenant's backfill: the grant feed in concurrent time windows (exact, resumable from
any STATE it emitted, polite under 429), against emulators with latency, skewed event dates
and a limit of requests in flight."""

from __future__ import annotations

import collections
import contextlib
import io
import itertools
import json
import logging
import math
import random
import re
import signal
import subprocess
import threading
import time
import typing as t
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from emulator import Dataset, Emulator
from tap_accessgov.engine import time_ranges
from tap_accessgov.engine.time_ranges import (
    BY_DATE,
    COARSE_PIECES,
    MAX_PIECES,
    MIN_COARSE_WINDOWS,
    MIN_WIDTH,
    SAMPLE_PIECES,
    TARGET_PAGES,
    Backfill,
    InFlight,
    Window,
    cut,
    date_order,
    initial_windows,
    pieces,
)
from tap_accessgov.output import OutputClosedError
from tap_accessgov.request_budget import RequestBudget, SyncStopped
from tap_accessgov.streams.grant_feed import key
from tap_accessgov.tap import TapAccessGov
from tap_accessgov.timestamps import from_ns, normalize_timestamp
from tests.conftest import (
    BIN_TAP,
    CREDENTIAL,
    ClosingOutput,
    SyncResult,
    batch_config,
    batch_records,
    catalog_selecting,
    ns,
    parse_singer,
    sync,
    tap_config,
)

FEED = "/api/v1/grants/feed"
SKEWED = {"seed": 3, "events": 3000, "apps": 4, "users": 250, "distribution": "skewed"}
Key = tuple[str, ...]


def feed_key(feed: dict[str, t.Any]) -> Key:
    """An event as the service sent it (the date as an instant: digits vary)."""
    return (
        feed["appId"],
        feed["appEntitlementId"],
        feed["appUserId"],
        feed.get("eventType") or "",
        str(ns(feed["date"])),
    )


def truth(dataset: Dataset, **filters: t.Any) -> collections.Counter[Key]:
    return collections.Counter(feed_key(e["feed"]) for e in dataset.feed_entries(**filters))


def delivered(records: list[dict[str, t.Any]]) -> collections.Counter[Key]:
    return collections.Counter(feed_key(r["feed"]) for r in records)


@pytest.fixture(scope="module")
def skewed() -> t.Iterator[Emulator]:
    with Emulator(Dataset(**SKEWED), credential=CREDENTIAL, latency=0.01) as emulator:
        yield emulator


def feed_config(emulator: Emulator, **settings: t.Any) -> dict[str, t.Any]:
    return {**tap_config(emulator), "exclusion_entitlements": [], **settings}


def feed_only(config: dict[str, t.Any]) -> dict[str, t.Any]:
    """A catalog of the grant feed alone: what these tests check (the other streams' syncs,
    a full sync's among them, are checked in test_streams.py and test_reliability.py)."""
    return catalog_selecting(config, {"grant_feed": None})


class Bodies:
    """Every grant feed request body a tap sends (a requests response hook: public API), and
    whether each query's last page had a next page (``more``, by after, before and page
    size): a query left with one was abandoned, as a window split into pieces is."""

    def __init__(self, tap: TapAccessGov) -> None:
        self.sent: list[dict[str, t.Any]] = []
        self.more: dict[tuple[t.Any, ...], bool] = {}
        self.threads: dict[tuple[t.Any, ...], set[threading.Thread]] = {}  # that read a query
        self._lock = threading.Lock()
        tap.streams["grant_feed"].requests_session.hooks["response"].append(self._hook)  # type: ignore[attr-defined]

    @property
    def windows(self) -> set[tuple[str | None, str | None]]:
        """The distinct (after, before) pairs sent: one per time window read."""
        return {(body.get("after"), body.get("before")) for body in self.sent}

    def _hook(self, response: requests.Response, *args: t.Any, **kwargs: t.Any) -> None:
        if response.request.path_url == FEED and response.request.body:
            body = json.loads(response.request.body)
            query = (body.get("after"), body.get("before"), body.get("pageSize"))
            with self._lock:
                self.sent.append(body)
                self.more[query] = bool(response.json().get("nextPageToken"))
                self.threads.setdefault(query, set()).add(threading.current_thread())


@dataclass(frozen=True)
class Backfilled:
    config: dict[str, t.Any]
    result: SyncResult
    bodies: list[dict[str, t.Any]]  # every grant feed request body, in the order sent


@pytest.fixture(scope="module")
def backfilled(skewed: Emulator) -> Backfilled:
    """One default backfill of the skewed feed, which several tests read (it takes seconds):
    what it delivered, its states and the request bodies it sent."""
    config = feed_config(skewed)
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    return Backfilled(config, sync(config, tap=tap), bodies.sent)


def test_skewed_feed_is_delivered_exactly_once_in_windows(
    skewed: Emulator, backfilled: Backfilled
) -> None:
    config, result = backfilled.config, backfilled.result
    assert delivered(result.records["grant_feed"]) == truth(
        skewed.dataset, after=config["start_date"]
    )
    windows = {(b.get("after"), b.get("before")) for b in backfilled.bodies}
    assert len(windows) >= 16  # 2 windows per request in flight, and then the dense ones split


def test_dense_windows_are_split(skewed: Emulator, backfilled: Backfilled) -> None:
    """The burst holds a third of the events in a few days: the windows cut over it at the
    start are split into narrower ones, and the result is still exact."""
    config, result, sent = backfilled.config, backfilled.result, backfilled.bodies
    assert delivered(result.records["grant_feed"]) == truth(
        skewed.dataset, after=config["start_date"]
    )
    widths = collections.Counter()
    for after, before in {(b.get("after"), b.get("before")) for b in sent}:
        if after and before:
            widths[ns(before) - ns(after)] += 1
    widest = max(widths)
    narrow = [w for w in widths if w * 3 <= widest * 2]  # pieces of a cut window
    assert narrow, f"no window was split: widths {sorted(widths)}"
    # Each split window was read in its first pages only: no window needed many pages.
    pages = collections.Counter(
        (b.get("after"), b.get("before")) for b in sent if b.get("pageToken")
    )
    assert max(pages.values()) <= 12


def test_every_window_request_carries_the_filters(skewed: Emulator) -> None:
    ds = skewed.dataset
    apps = ds.apps[:3]
    entitlements = [
        {"app_id": app_id, "id": entitlement} for app_id, entitlement in ds.entitlements[:40]
    ]
    app_users = [
        {"app_id": ds.apps[a], "id": ds.app_user_id(a, u)} for a in range(3) for u in range(200)
    ]
    users = ds.user_ids[:150]
    config = feed_config(
        skewed,
        app_ids=apps,
        app_entitlement_refs=entitlements,
        app_user_refs=app_users,
        user_ids=users,
        expand_mask=["app_id", "ticket_id"],
    )
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    result = sync(config, tap=tap)
    expected = truth(
        ds,
        after=config["start_date"],
        app_ids=apps,
        app_entitlement_refs=[(r["app_id"], r["id"]) for r in entitlements],
        app_user_refs=[(r["app_id"], r["id"]) for r in app_users],
        user_ids=users,
    )
    assert expected, "the filters leave events to find"
    assert delivered(result.records["grant_feed"]) == expected
    assert len(bodies.windows) > 8, "read in windows"
    for body in bodies.sent:
        assert body["appRefs"] == [{"id": app_id} for app_id in apps]
        assert body["appEntitlementRefs"] == [
            {"appId": r["app_id"], "id": r["id"]} for r in entitlements
        ]
        assert body["appUserRefs"] == [{"appId": r["app_id"], "id": r["id"]} for r in app_users]
        assert body["userRefs"] == [{"id": user_id} for user_id in users]
        assert body["expandMask"] == {"paths": ["app_id", "ticket_id"]}
        assert "after" in body or "before" in body


def test_final_state_is_the_plain_bookmark_and_windows_are_saved_as_they_complete(
    backfilled: Backfilled,
) -> None:
    result = backfilled.result
    records = result.records["grant_feed"]
    latest = max(records, key=lambda r: ns(r["date"]))["date"]
    assert result.state["bookmarks"]["grant_feed"] == {
        "replication_key": "date",
        "replication_key_value": latest,
    }
    midway = [s["bookmarks"].get("grant_feed", {}).get("backfill") for s in result.states]
    saved = [m for m in midway if m]
    assert len(saved) > 10, "a STATE as windows complete"
    assert len(saved[-1]["completed"]) == 1, "all windows done: one merged range"


def test_a_nightly_incremental_run_is_a_few_requests_not_a_backfill() -> None:
    dataset = Dataset(**{**SKEWED, "events": 500})
    with Emulator(dataset, credential=CREDENTIAL) as emulator:
        config = feed_config(emulator)
        first = sync(config, catalog=feed_only(config))
        before = dataset.total
        emulator.add_events(count=120)
        emulator.reset_stats()
        second = sync(config, state=first.state, catalog=feed_only(config))
        bookmark = first.state["bookmarks"]["grant_feed"]["replication_key_value"]
        assert delivered(second.records["grant_feed"]) == truth(dataset, after=bookmark)
        assert len(second.records["grant_feed"]) >= dataset.total - before
        # 120 new events: two pages of 100, twice: grant_feed's read, and past_grants' of the
        # removals since its bookmark (the catalog streams read the catalog besides)
        assert emulator.stats["api_requests_by_path"]["/api/v1/grants/feed"] <= 2 * 3


def test_a_state_file_of_the_previous_version_is_accepted(skewed: Emulator) -> None:
    ds = skewed.dataset
    entries = ds.feed_entries()
    middle = sorted(ns(e["feed"]["date"]) for e in entries)[len(entries) // 2]
    bookmark = next(e["feed"]["date"] for e in entries if ns(e["feed"]["date"]) == middle)
    old = {
        "bookmarks": {"grant_feed": {"replication_key": "date", "replication_key_value": bookmark}}
    }
    config = feed_config(skewed)
    tap = TapAccessGov(config=config, state=old, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    result = sync(config, tap=tap)
    assert delivered(result.records["grant_feed"]) == truth(ds, after=bookmark)
    assert len(bodies.windows) > 8, "the rest of the feed is read in windows"
    assert all(after and ns(after) >= ns(bookmark) for after, _ in bodies.windows)
    assert all(body["pageSize"] != 10 for body in bodies.sent), "no probes after a bookmark"
    assert set(result.state["bookmarks"]["grant_feed"]) == {
        "replication_key",
        "replication_key_value",
    }


def logged(
    caplog: pytest.LogCaptureFixture, begins: str, pattern: str
) -> list[re.Match[str] | None]:
    """The log's lines that begin with ``begins``, each matched against ``pattern`` whole
    (None: the line does not read as it should)."""
    return [
        re.fullmatch(pattern, record.getMessage())
        for record in caplog.records
        if record.getMessage().startswith(begins)
    ]


def probe_round(caplog: pytest.LogCaptureFixture) -> tuple[str, int, int]:
    """What a first sync's log says of its round of probes: after what it looked (an instant
    or "the start"), where it found the events begin (ns), in how many requests."""
    said = logged(
        caplog,
        "The earliest ",
        r"The earliest grant feed record after (the start|\S+) is on or after (\S+) "
        r"\((\d+) requests\); the windows are cut from there",
    )
    assert len(said) == 1, said
    (line,) = said
    assert line is not None, "the probe round's line, as it reads"
    return line[1], ns(line[2]), int(line[3])


def begin_found(probes: list[dict[str, t.Any]], first: int, lowest: int) -> int:
    """Where a round of ``probes`` finds the events begin, the first at ``first``: the newest
    probe instant with no event before it (none: ``lowest``)."""
    return max((ns(p["before"]) for p in probes if ns(p["before"]) <= first), default=lowest)


def test_no_start_date_and_no_state_reads_everything(
    skewed: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    config = feed_config(skewed)
    del config["start_date"]
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    with caplog.at_level(logging.INFO):
        result = sync(config, tap=tap)
    assert delivered(result.records["grant_feed"]) == truth(skewed.dataset)
    # A few probes find the earliest event, then windows are cut from there; the first
    # window has no lower bound, so nothing older can be missed.
    assert len(bodies.windows) > 8
    assert sum(1 for after, _ in bodies.windows if after is None) >= 2
    # The probes (pages of 10) go out at once, one round: not a bisection of ~16 in a row;
    # as many as the requests in flight but one, which the first page of the range takes.
    probes = [body for body in bodies.sent if body["pageSize"] == 10]
    # each probe instant back from now (1 day to 44 years; the first seven reach 11) is after
    # the epoch: as many probes as there are requests in flight but one
    assert len(probes) == tap.config["max_concurrency"] - 1
    # and the log says what they found, in how many requests (the first page of the range's)
    first = min(ns(entry["feed"]["date"]) for entry in skewed.dataset.feed_entries())
    assert probe_round(caplog) == ("the start", begin_found(probes, first, 0), len(probes) + 1)


@pytest.mark.parametrize("max_concurrency", [1, 2])
def test_a_first_sync_of_one_or_two_requests_in_flight_probes_once(
    skewed: Emulator, max_concurrency: int
) -> None:
    """The requests in flight but one probe where the events begin (the first page of the
    range takes the other): one probe at a limit of 2, and one still at a limit of 1."""
    config = feed_config(skewed, max_concurrency=max_concurrency)
    del config["start_date"]
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    result = sync(config, tap=tap)
    assert delivered(result.records["grant_feed"]) == truth(skewed.dataset)
    assert sum(1 for body in bodies.sent if body["pageSize"] == 10) == 1


def test_a_run_with_an_end_date_asks_for_nothing_after_it(skewed: Emulator) -> None:
    """start_date and end_date: every request of a first sync (the first page of the range,
    the probes, the windows and their pieces) asks for events before end_date, and the run
    delivers exactly the events between the two."""
    dates = sorted(ns(entry["feed"]["date"]) for entry in skewed.dataset.feed_entries())
    start, end = from_ns(dates[len(dates) // 10]), from_ns(dates[len(dates) * 9 // 10])
    config = feed_config(skewed, start_date=start, end_date=end)
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    result = sync(config, tap=tap)
    assert delivered(result.records["grant_feed"]) == truth(skewed.dataset, after=start, before=end)
    assert len(bodies.windows) > 8
    beyond = [
        body for body in bodies.sent if body.get("before") is None or ns(body["before"]) > ns(end)
    ]
    assert beyond == []


def test_a_service_allowing_two_requests_in_flight_still_gets_an_exact_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dataset = Dataset(**{**SKEWED, "events": 1500})
    with Emulator(dataset, credential=CREDENTIAL, latency=0.05, max_in_flight=2) as emulator:
        config = feed_config(emulator)
        with caplog.at_level(logging.INFO):
            result = sync(config, catalog=feed_only(config))
        stats = emulator.stats
    assert delivered(result.records["grant_feed"]) == truth(dataset, after=config["start_date"])
    assert stats["throttled"] > 0
    assert stats["peak_in_flight"] <= 2
    slowed = [r.getMessage() for r in caplog.records if "slowing down" in r.getMessage()]
    assert len(slowed) == 1, slowed
    assert "from 8 to 4 requests in flight" in slowed[0]


def test_the_budget_halves_once_per_round_and_grows_slowly() -> None:
    budget = RequestBudget(8, logging.getLogger("test"))
    stop = threading.Event()
    rounds = []
    for _ in range(6):  # six requests of the same round meet a 429
        with budget.attempt(stop) as started_in:
            rounds.append(started_in)
    for started_in in rounds:
        budget.throttled(started_in, retry_after=None)
    assert budget.limit == 4, "one slow-down for one burst"
    with budget.attempt(stop) as started_in:
        pass
    budget.throttled(started_in, retry_after=None)
    assert (budget.limit, budget.lowest, budget.slowdowns) == (2, 2, 2)
    for _ in range(50):
        budget.succeeded()
    assert budget.limit == 2, "no growth before a quiet interval"
    stop.set()
    with pytest.raises(SyncStopped), budget.attempt(stop):
        pass


class Clocks:
    """A wall clock and a process CPU clock the test moves."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def spend(self, seconds: float, busy: float) -> None:
        """``seconds`` of wall time pass, of which the process spends ``busy`` on its CPU."""
        self.wall += seconds
        self.cpu += seconds * busy


@pytest.mark.parametrize(
    ("busy", "allowed"),
    [
        (1.0, [1, 1, 1, 1]),  # bound by its own CPU: a server that answers at once
        (InFlight.WAITING + 0.05, [1, 1, 1, 1]),  # waiting, but less than a worker costs
        (0.5, [2, 4, 8, 8]),  # half the time waiting: twice as many each look
        (0.2, [5, 8, 8, 8]),
        (0.0, [8, 8, 8, 8]),  # nothing but waiting: all at once
    ],
)
def test_windows_in_flight_grow_only_while_the_run_waits_for_the_service(
    busy: float, allowed: list[int]
) -> None:
    clocks = Clocks()
    in_flight = InFlight(8, wall_clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)
    assert in_flight.allowed == 1
    grown = []
    for _ in allowed:  # a page every look
        clocks.spend(InFlight.LOOK_EVERY, busy)
        in_flight.page_arrived()
        grown.append(in_flight.allowed)
    assert grown == allowed


def test_a_moment_of_contention_is_not_taken_for_the_service_latency() -> None:
    """A run bound by its CPU (busy 0.9) loses its core to another process for a few looks
    (busy 0.45: what single looks fell to on a busy 2-core machine): no windows more, they
    would cost for the rest of the run."""
    clocks = Clocks()
    in_flight = InFlight(8, wall_clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)
    for busy in [0.9] * round(InFlight.SPAN / InFlight.LOOK_EVERY) + [0.45] * 3 + [0.9] * 40:
        clocks.spend(InFlight.LOOK_EVERY, busy)
        in_flight.page_arrived()
        assert in_flight.allowed == 1, f"grew at busy {busy}"


def test_a_latency_that_begins_mid_run_grows_the_windows_within_a_span() -> None:
    """Two seconds busy, then the service slows down (busy 0.1): the windows grow before a
    span of looks has passed, not after the quiet past has been outweighed."""
    clocks = Clocks()
    in_flight = InFlight(8, wall_clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)
    for _ in range(round(2 / InFlight.LOOK_EVERY)):
        clocks.spend(InFlight.LOOK_EVERY, 0.9)
        in_flight.page_arrived()
    assert in_flight.allowed == 1
    looks = 0
    while in_flight.allowed < 8:
        clocks.spend(InFlight.LOOK_EVERY, 0.1)
        in_flight.page_arrived()
        looks += 1
        assert looks * InFlight.LOOK_EVERY < InFlight.SPAN, f"{in_flight.allowed} after {looks}"


def test_the_windows_in_flight_read_the_runs_time_without_its_writing(
    skewed: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The windows' clock is the stream's ``time_not_writing`` (the writer's, output.py):
    a loader slower than the tap makes it wait on a full pipe, which is no latency of the
    service."""
    clocks: list[t.Callable[[], float]] = []

    class Recorded(InFlight):
        def __init__(self, maximum: int, **clock: t.Callable[[], float]) -> None:
            super().__init__(maximum, **clock)
            clocks.append(clock["wall_clock"])

    monkeypatch.setattr(time_ranges, "InFlight", Recorded)
    config = feed_config(skewed)
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    sync(config, tap=tap)
    assert clocks == [tap.streams["grant_feed"].time_not_writing]


def test_pages_closer_than_a_look_apart_grow_nothing_until_the_next_look() -> None:
    clocks = Clocks()
    in_flight = InFlight(8, wall_clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)
    for _ in range(9):  # pages ten times as often as a look, the process idle
        clocks.spend(InFlight.LOOK_EVERY / 10, 0.0)
        in_flight.page_arrived()
    assert in_flight.allowed == 1
    clocks.spend(InFlight.LOOK_EVERY / 5, 0.0)  # past the look
    in_flight.page_arrived()
    assert in_flight.allowed == 8


def test_on_a_server_with_latency_the_windows_in_flight_grow_to_max_concurrency(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """50 ms a request: the run waits for the service, one window at a time would be a
    latency after another. (Not the 10 ms of the ``skewed`` server: in this process its
    work is the tap's CPU too, and at 10 ms that is enough to keep the run busy over half
    the time with two windows.)"""
    with Emulator(Dataset(**SKEWED), credential=CREDENTIAL, latency=0.05) as emulator:
        config = feed_config(emulator, max_concurrency=4)
        with caplog.at_level(logging.INFO):
            result = sync(config, catalog=feed_only(config))
    assert delivered(result.records["grant_feed"]) == truth(
        emulator.dataset, after=config["start_date"]
    )
    said = [r.getMessage() for r in caplog.records if "at once at most" in r.getMessage()]
    assert said == [
        "The grant feed was read 4 time range(s) at once at most (max_concurrency 4): more "
        "only while the run was waiting for the service"
    ]


def test_concurrent_windows_meeting_a_revoked_token_renew_it_once(skewed: Emulator) -> None:
    config = feed_config(skewed)
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    tap.authenticator.update_access_token()
    skewed.revoke_tokens()
    skewed.reset_stats()
    result = sync(config, tap=tap)
    assert len(bodies.windows) > 8
    assert delivered(result.records["grant_feed"]) == truth(
        skewed.dataset, after=config["start_date"]
    )
    assert skewed.stats["unauthorized"] >= 1
    assert skewed.stats["token_requests"] == 1, "one new token for all the windows"


def test_a_failed_run_does_not_wait_for_retries_and_leaves_no_thread() -> None:
    """One window answered 429 (Retry-After 40 s), the next 403: the run ends on the 403
    without sitting out the 40 s. A 429 pauses every new request for its Retry-After, so the
    403 must come from a request sent before the 429 came back: the feed alone is read (no
    catalog requests first) and the service holds each answer 2 s, time enough for the
    windows' first two requests even on a loaded machine. (With six 429s, a seventh request
    for the 403 and 50 ms answers, a fresh clone's suite on a busy machine sent the seventh
    after the pause and waited 45 s; with 1 s answers it had six, not seven, in flight.)"""
    dataset = Dataset(**SKEWED)
    with Emulator(dataset, credential=CREDENTIAL, latency=2.0) as emulator:
        config = feed_config(emulator)
        catalog = catalog_selecting(config, {"grant_feed": None})
        emulator.faults.add("429", path=FEED, times=1, retry_after=40)
        emulator.faults.add("403", path=FEED, times=1)
        started = time.monotonic()
        with pytest.raises(Exception, match="403"):
            sync(config, catalog=catalog)
        took = time.monotonic() - started
        stats = emulator.stats
    assert stats["faults_by_kind"] == {"429": 1, "403": 1}
    assert stats["peak_in_flight"] >= 2  # the 403 was in flight with the 429
    # Sitting out the Retry-After would take 40 s: a bound for what it means, not a guess at
    # the machine's speed.
    assert took < 40, f"the failed run waited {took:.0f} s for retries"
    assert not [th.name for th in threading.enumerate() if th.name.startswith("grant-feed")]


def test_a_429_holds_every_new_request_of_the_run_until_its_retry_after() -> None:
    """A 429 says the service is overloaded: its Retry-After holds every request of the run,
    not only the one retried (RequestBudget). The 429 is planned mid-run, once the windows
    are read at once; for a second from 0.3 s after it was answered (its Retry-After is 3 s;
    before that, requests sent before the tap read the 429 may still arrive: a suite on a
    loaded machine saw one) no new request reaches the service, and the run is still
    exact."""
    dataset = Dataset(**{**SKEWED, "events": 20_000})
    sent_while_held: list[int] = []
    with Emulator(dataset, credential=CREDENTIAL, latency=0.05) as emulator:
        config = feed_config(emulator)
        catalog = catalog_selecting(config, {"grant_feed": None})

        def plan_the_429_and_count() -> None:
            while emulator.stats["api_requests"] < 40:
                time.sleep(0.005)
            emulator.faults.add("429", path=FEED, times=1, retry_after=3)
            while "429" not in emulator.stats["faults_by_kind"]:
                time.sleep(0.005)
            time.sleep(0.3)
            before = emulator.stats["api_requests"]
            time.sleep(1.0)
            sent_while_held.append(emulator.stats["api_requests"] - before)

        watcher = threading.Thread(target=plan_the_429_and_count)
        watcher.start()
        result = sync(config, catalog=catalog)
        watcher.join()
        assert emulator.stats["peak_in_flight"] > 2
    assert delivered(result.records["grant_feed"]) == truth(dataset, after=config["start_date"])
    assert sent_while_held == [0]


def test_no_worker_thread_outlives_a_sync(skewed: Emulator) -> None:
    config = feed_config(skewed)
    tap = TapAccessGov(config=config, parse_env_config=False)
    workers: set[threading.Thread] = set()
    tap.streams["grant_feed"].requests_session.hooks["response"].append(  # type: ignore[attr-defined]
        lambda response, *args, **kwargs: workers.add(threading.current_thread())
    )
    sync(config, tap=tap)
    workers.discard(threading.main_thread())  # it reads the first window itself (InFlight)
    assert len(workers) > 1, "the windows were read by worker threads"
    assert not [thread for thread in workers if thread.is_alive()]


@pytest.mark.parametrize(
    ("stream", "selected"),
    [("grant_feed", {"grant_feed": None}), ("automation_exclusions", {"users": None})],
    ids=["grant-feed-windows", "exclusions-driven-by-users"],
)
def test_no_worker_thread_outlives_a_sync_that_fails_outside_its_records(
    stream: str, selected: dict[str, None]
) -> None:
    """The output closes while a stream's workers fetch ahead: the failure is raised by the
    SDK's writer, outside the stream's records generator, which stays suspended in the
    traceback; the workers must still end with the sync (here the users stream drives the
    exclusions' fetches)."""
    dataset = Dataset(**SKEWED)
    with Emulator(dataset, credential=CREDENTIAL, latency=0.05) as emulator:
        config = {**feed_config(emulator), "max_concurrency": 8, "page_size": 10}
        config.pop("exclusion_entitlements")
        # users without the directory: its records are the exclusions', which it drives.
        config["read_directory"] = False
        tap = TapAccessGov(
            config=config, catalog=catalog_selecting(config, selected), parse_env_config=False
        )
        workers: set[threading.Thread] = set()
        tap.streams[stream].requests_session.hooks["response"].append(  # type: ignore[attr-defined]
            lambda response, *args, **kwargs: workers.add(threading.current_thread())
        )
        out = io.TextIOWrapper(io.BufferedWriter(ClosingOutput(8), buffer_size=1))
        with contextlib.redirect_stdout(out), pytest.raises(OutputClosedError) as failed:
            tap.sync_all()
        assert failed.traceback, "the failure (and the suspended generator) is still referenced"
        workers.discard(threading.main_thread())  # it reads a window itself at first
        assert workers, "worker threads fetched"
        assert not [thread.name for thread in workers if thread.is_alive()]


def test_a_loader_that_stalls_while_the_workers_fill_the_page_queue_then_closes_ends_the_sync(
    skewed: Emulator,
) -> None:
    """The loader stops reading for a second, long enough for eight workers to fill the
    queue of pages on their way to the main thread, then closes: each worker, waiting for
    room in the queue, gives up once the sync stops, and the sync ends (a worker that waited
    for room without end would hold the sync's end, which joins it, forever)."""
    config = {**feed_config(skewed), "max_concurrency": 8, "page_size": 10}
    tap = TapAccessGov(
        config=config,
        catalog=catalog_selecting(config, {"grant_feed": None}),
        parse_env_config=False,
    )
    failed: list[BaseException] = []

    def run() -> None:
        try:
            tap.sync_all()
        except BaseException as exc:  # the failure is what the test reads
            failed.append(exc)

    out = io.TextIOWrapper(io.BufferedWriter(ClosingOutput(40, stalling=1.0), buffer_size=1))
    with contextlib.redirect_stdout(out):
        syncing = threading.Thread(target=run, daemon=True)
        syncing.start()
        syncing.join(timeout=60)
    assert not syncing.is_alive(), "the sync never ended: a worker waits for room in the queue"
    assert [type(exc) for exc in failed] == [OutputClosedError]


@pytest.mark.cli
def test_sigkill_mid_backfill_then_resume_rereads_only_windows_in_flight(tmp_path: Path) -> None:
    """The command line killed with SIGKILL after a few windows completed; a rerun from the
    last STATE it wrote reads nothing that state calls complete, and the two runs together
    deliver every event."""
    dataset = Dataset(**SKEWED)
    with Emulator(dataset, credential=CREDENTIAL, latency=0.05) as emulator:
        config = feed_config(emulator)
        catalog = catalog_selecting(config, {"grant_feed": None})
        paths = {}
        for name, content in (("config", config), ("catalog", catalog)):
            paths[name] = tmp_path / f"{name}.json"
            paths[name].write_text(json.dumps(content))
        command = [
            str(BIN_TAP),
            "--config",
            str(paths["config"]),
            "--catalog",
            str(paths["catalog"]),
        ]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert process.stdout is not None
        lines, completions = [], 0
        for line in process.stdout:
            lines.append(line)
            if '"backfill"' in line:
                completions += 1
                if completions == 12:
                    process.send_signal(signal.SIGKILL)
                    break
        lines.extend(process.stdout.read().splitlines(keepends=True))
        process.wait(timeout=30)
        assert process.returncode == -signal.SIGKILL
        killed = parse_singer("".join(line for line in lines if line.endswith("\n")))
        state = killed.states[-1]
        completed = state["bookmarks"]["grant_feed"]["backfill"]["completed"]
        paths["state"] = tmp_path / "state.json"
        paths["state"].write_text(json.dumps(state))
        rerun = subprocess.run(
            [*command, "--state", str(paths["state"])],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    resumed = parse_singer(rerun.stdout)
    first, second = (
        delivered(killed.records["grant_feed"]),
        delivered(resumed.records["grant_feed"]),
    )
    expected = truth(dataset, after=config["start_date"])
    assert set(first) | set(second) == set(expected)

    def in_completed(key: Key) -> bool:
        instant = int(key[-1])
        return any(
            (a is None or ns(a) <= instant) and (b is None or instant < ns(b)) for a, b in completed
        )

    assert not [key for key in second if in_completed(key)], "a completed window was read again"
    twice = set(first) & set(second)
    # Read twice: only events of windows that were in flight (started, not complete).
    assert all(not in_completed(key) for key in twice)
    assert sum(second.values()) < sum(expected.values())
    assert resumed.state["bookmarks"]["grant_feed"] == {
        "replication_key": "date",
        "replication_key_value": max(
            (r["date"] for r in killed.records["grant_feed"] + resumed.records["grant_feed"]),
            key=ns,
        ),
    }


def test_completed_windows_merge_and_only_the_rest_is_read_again() -> None:
    ms = 1_000_000  # ns
    backfill = Backfill("digest")
    for a, b in ((30, 40), (None, 10), (50, None), (10, 20)):
        backfill.complete(Window(a and a * ms, b and b * ms))
    assert backfill.completed == [(None, 20 * ms), (30 * ms, 40 * ms), (50 * ms, None)]
    left = backfill.remaining(cut(None, None, 0, 100 * ms, 4))
    assert [(w.start, w.end) for w in left] == [
        (20 * ms, 25 * ms),
        (25 * ms, 30 * ms),
        (40 * ms, 50 * ms),
    ]
    assert [(w.start, w.end) for w in cut(None, None, 0, 1, 4)] == [(None, None)]
    saved = backfill.to_state()
    assert Backfill.from_state({"backfill": saved}, "digest") == backfill
    assert Backfill.from_state({"backfill": saved}, "other filters") is None


def test_a_run_that_fails_after_slowing_down_still_says_how_far_it_slowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The line that shows the service's real limit, which the README's troubleshooting
    points to, also ends a run that fails (a successful one ends with it too). One 429 is
    one slow-down (8 -> 4): three, as before, were one only when the machine sent their
    requests before the first answer (a loaded one did not: "down to 2"). The 403 comes
    after the tap has taken the 429 in: the other requests of the first round (the probes,
    at most eight at once) are answered a second late, so the next request is the 429's
    retry. With the 403 on the second request, a loaded machine failed the run before the
    thread that got the 429 had read it, and then nothing had slowed the run down (seen in
    a full run of the suite; it passed alone)."""
    dataset = Dataset(**{**SKEWED, "events": 1500})
    with Emulator(dataset, credential=CREDENTIAL) as emulator:
        emulator.faults.add("429", path=FEED, times=1, retry_after=0)
        emulator.faults.add("slow", path=FEED, times=7, delay=1.0)
        emulator.faults.add("403", path=FEED, times=1)
        with caplog.at_level(logging.INFO), pytest.raises(Exception, match="403"):
            sync(feed_config(emulator), catalog=feed_only(feed_config(emulator)))
    said = [
        r.getMessage() for r in caplog.records if "asked the tap to slow down" in r.getMessage()
    ]
    assert len(said) == 1, said
    assert "requests in flight went down to 4 (of 8)" in said[0]


# ----- the feed in every order the service may use ------------------------------------------

ORDERS = ("near", "ascending", "descending", "none")


@pytest.fixture(scope="module", params=ORDERS)
def ordered(request: pytest.FixtureRequest) -> t.Iterator[Emulator]:
    """The skewed feed served in one of the orders the service does not rule out."""
    dataset = Dataset(**SKEWED, order=request.param)
    with Emulator(dataset, credential=CREDENTIAL, latency=0.01) as emulator:
        yield emulator


def _in(ranges: list[list[str | None]], instant: int) -> bool:
    return any(
        (a is None or ns(a) <= instant) and (b is None or instant < ns(b)) for a, b in ranges
    )


def _overlaps(ranges: list[list[str | None]], first: int, last: int) -> bool:
    """Whether any of ``ranges`` (after, before) holds an instant of ``[first, last]``."""
    return any((a is None or ns(a) <= last) and (b is None or first < ns(b)) for a, b in ranges)


def test_a_state_leaves_after_the_batch_files_of_every_record_it_counts(
    ordered: Emulator, tmp_path: Path
) -> None:
    """With ``batch_config`` (files of 50 records), each STATE follows the BATCH messages of
    every event it counts as read (its completed windows): a window completes while its last
    records still wait in the open file, and a run killed after such a STATE would resume
    past records that never left. The files hold the feed exactly once, and the run's last
    STATE, after the last file, keeps the latest event as its bookmark. In every order the
    service may return a window in."""
    config = feed_config(ordered, batch_config=batch_config(tmp_path, batch_size=50))
    result = sync(config, catalog=feed_only(config))
    expected = truth(ordered.dataset, after=config["start_date"])
    sent: collections.Counter[Key] = collections.Counter()
    checked = 0
    for message in result.messages:
        if message["type"] == "BATCH":
            sent += delivered(batch_records(message))
        elif message["type"] == "STATE":
            feed = message["value"].get("bookmarks", {}).get("grant_feed", {})
            completed = feed.get("backfill", {}).get("completed", [])
            unsent = [k for k in expected if _in(completed, int(k[-1])) and k not in sent]
            assert not unsent, f"a STATE counts {len(unsent)} events no BATCH file held yet"
            checked += bool(completed)
    assert "grant_feed" not in result.records  # no RECORD messages
    assert sent == expected
    assert checked >= 10, checked  # many STATEs held completed windows
    latest = max(int(k[-1]) for k in expected)
    assert ns(result.state["bookmarks"]["grant_feed"]["replication_key_value"]) == latest
    assert result.messages[-1]["type"] == "STATE"


def test_every_order_is_delivered_exactly_once_and_resumes_from_any_state(
    ordered: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever order the service returns a window in, the windows (split or not) deliver
    each event once; a rerun from a STATE written midway reads exactly what that STATE
    does not call complete, each event once."""
    config = feed_config(ordered)
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    first = sync(config, tap=tap)
    expected = truth(ordered.dataset, after=config["start_date"])
    assert delivered(first.records["grant_feed"]) == expected
    assert len(bodies.windows) > 8, "read in windows"
    # The first page of the whole range (what the service serves first, pages of 100),
    # served in no date order, is a sample of the range's dates: the first windows are cut
    # at its quantiles, so their edges are dates of its events (one per window of the
    # first cut but the last: max_concurrency windows, six at least). Cut evenly, few are:
    # only a piece's edge, cut at the dates its window read, can fall on one by chance.
    sample = {
        ns(e["feed"]["date"])
        for e in ordered.dataset.feed_entries(after=config["start_date"])[:100]
    }
    edges = {ns(edge) for window in bodies.windows for edge in window if edge is not None}
    if ordered.dataset.order == "none":
        at_sample = len(edges & sample)
        sample_edges = max(tap.config["max_concurrency"], MIN_COARSE_WINDOWS) - 1
        assert at_sample >= sample_edges - 1, f"{at_sample} edges of the sample's"
    midway = [s for s in first.states if s["bookmarks"].get("grant_feed", {}).get("backfill")]
    state = midway[len(midway) // 3]
    completed = state["bookmarks"]["grant_feed"]["backfill"]["completed"]
    with caplog.at_level(logging.INFO):
        resumed = sync(config, state=state, catalog=feed_only(config))
    # the log says the run resumes, and how much of the range it does not read again
    resuming = logged(
        caplog,
        "Resuming ",
        r"Resuming an interrupted grant feed sync: (\d+) completed time range\(s\) "
        r"from its state are not read again",
    )
    assert [int(line[1]) if line else None for line in resuming] == [len(completed)]
    rest = collections.Counter(
        {k: n for k, n in expected.items() if not _in(completed, int(k[-1]))}
    )
    assert rest
    assert len(rest) < len(expected)
    assert delivered(resumed.records["grant_feed"]) == rest
    # The bookmark is the latest change delivered, whichever run delivered it. In date order
    # the newest windows, read first, were completed by the interrupted run, not read again;
    # in no date order the coarse windows' pieces are read largest first, and the newest
    # event may be in a small piece left to the resumed run
    bookmark = "replication_key_value"
    latest = first.state["bookmarks"]["grant_feed"][bookmark]
    assert latest in {r["date"] for r in first.records["grant_feed"]}
    if ordered.dataset.order != "none":
        assert latest not in {r["date"] for r in resumed.records["grant_feed"]}
    assert resumed.state["bookmarks"]["grant_feed"][bookmark] == latest
    # The same STATE under other filters: its windows were completed for another query, so
    # none is taken as read (one app's events, every one of them)
    app = next(iter(expected))[0]
    narrowed = {**config, "app_ids": [app]}
    other = sync(narrowed, state=state, catalog=feed_only(narrowed))
    assert delivered(other.records["grant_feed"]) == truth(
        ordered.dataset, after=config["start_date"], app_ids=[app]
    )


def test_one_window_at_a_time_reads_each_window_to_its_end_unsplit(
    ordered: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one window is read at a time (a server that answers at once: the run is never
    found waiting, ``InFlight``), pieces would be read one after another as well, each
    ending on a part page of its own, after the pages the split window had read: more
    requests for the same events (18% more on the ratios benchmark's feed,
    docs/performance.md). So no window is split: every query the run starts is paged to its
    end, but the first page of the whole range (the sample the windows are cut at); the
    dense burst that a run with windows in flight splits is read unsplit, and exactly, in
    every order."""
    monkeypatch.setattr(InFlight, "WAITING", 0.0)  # never found waiting: one window at a time
    config = feed_config(ordered)
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    result = sync(config, tap=tap)
    assert delivered(result.records["grant_feed"]) == truth(
        ordered.dataset, after=config["start_date"]
    )
    abandoned = [query for query, more in bodies.more.items() if more]
    sample = (normalize_timestamp(config["start_date"]), None, 100)
    probes = [query for query in abandoned if query[2] == 10]
    assert sorted(abandoned, key=str) == sorted([sample, *probes], key=str)
    assert len(bodies.more) > 8, "read in windows"
    # and each in the main thread: one window at a time needs no worker (the first round,
    # the sample and the probes, is sent at once)
    read_by = {query: threads for query, threads in bodies.threads.items() if query[2] != 10}
    del read_by[sample]
    assert read_by
    assert {thread for threads in read_by.values() for thread in threads} == {
        threading.main_thread()
    }


def test_a_dense_window_of_an_unordered_feed_is_cut_at_its_dates_quantiles() -> None:
    """Served in no date order, a window's first pages span the whole window: they are a
    sample of its dates, and the window is cut where they say its events are (the cut of
    the old rule never fired there: the pages seemed to cover the window)."""
    dataset = Dataset(**SKEWED, order="none")
    with Emulator(dataset, credential=CREDENTIAL, latency=0.01) as emulator:
        config = feed_config(emulator)
        tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
        bodies = Bodies(tap)
        result = sync(config, tap=tap)
    assert delivered(result.records["grant_feed"]) == truth(dataset, after=config["start_date"])
    bounded = [(ns(a), ns(b)) for a, b in bodies.windows if a and b]
    widest = max(b - a for a, b in bounded)
    pieces = [(a, b) for a, b in bounded if (b - a) * 4 < widest]
    assert len(pieces) >= 8, "the dense window was cut into pieces"
    # Cut at quantiles, not evenly: the pieces' widths differ as the dates' density does.
    widths = sorted(b - a for a, b in pieces)
    assert widths[-1] > 3 * widths[0]
    pages = collections.Counter(
        (b.get("after"), b.get("before")) for b in bodies.sent if b.get("pageToken")
    )
    assert max(pages.values()) < 8, "no window was read for long"


def test_date_order_tells_sorted_pages_from_a_sample() -> None:
    dates = list(range(0, 100_000, 1000))
    assert date_order(dates) == 1
    assert date_order(dates[::-1]) == -1
    shuffled = dates[:]
    random.Random(5).shuffle(shuffled)
    assert abs(date_order(shuffled)) < BY_DATE
    jittered = [d + random.Random(d).randrange(3000) for d in dates]  # near-chronological
    assert date_order(jittered) > BY_DATE


def _event(n: int, instant: int) -> dict[str, t.Any]:
    """A grant event record with the fields ``key`` reads."""
    return {
        "appId": "a",
        "appEntitlementId": "e",
        "appUserId": str(n),
        "eventType": "X",
        "date": from_ns(instant),
    }


def test_a_sample_cut_gives_pieces_of_equal_counts_that_tile_the_window() -> None:
    ms = 1_000_000
    rng = random.Random(3)
    # 90% of the window's events in its last tenth, in no order
    dates = [
        rng.randrange(900 * ms, 1000 * ms) if rng.random() < 0.9 else rng.randrange(1000 * ms)
        for _ in range(200)
    ]

    delivered_pages = [
        [_event(n, d) for n, d in enumerate(dates[:100])],
        [_event(n, d) for n, d in enumerate(dates[100:], 100)],
    ]
    window = Window(0, 1000 * ms)
    children = pieces(window, delivered_pages, 1.0, 0, 1000 * ms, key)
    assert len(children) == SAMPLE_PIECES
    assert children[0].start == 0
    assert children[-1].end == 1000 * ms
    assert all(a.end == b.start for a, b in itertools.pairwise(children))
    assert (
        sum(1 for c in children if c.start is not None and c.start >= 900 * ms)
        >= SAMPLE_PIECES // 2
    )
    assert sum(sum(c.skip.values()) for c in children if c.skip) == 200, (
        "each read event skipped once"
    )
    assert not pieces(children[0], delivered_pages, 1.0, 0, 1000 * ms, key), (
        "a piece is not cut again"
    )


def test_a_start_date_years_before_the_data_is_not_cut_into_empty_windows(
    skewed: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """A start_date two years before the first event: one round of probes (pages of 10, at
    once) finds where the events begin, and the windows are cut there, the oldest still
    reaching down to start_date; cut evenly from start_date, three in four would be empty."""
    first = min(ns(entry["feed"]["date"]) for entry in skewed.dataset.feed_entries())
    start = from_ns(first - 730 * 86_400 * 1_000_000_000)
    config = feed_config(skewed, start_date=start)
    tap = TapAccessGov(config=config, catalog=feed_only(config), parse_env_config=False)
    bodies = Bodies(tap)
    with caplog.at_level(logging.INFO):
        result = sync(config, tap=tap)
    assert delivered(result.records["grant_feed"]) == truth(skewed.dataset, after=start)
    probes = [body for body in bodies.sent if body["pageSize"] == 10]
    assert 0 < len(probes) <= tap.config["max_concurrency"] - 1
    # each asks whether an event lies between start_date and an instant after it
    assert all(ns(body["after"]) == ns(start) < ns(body["before"]) for body in probes)
    looked_after, begin, requests_sent = probe_round(caplog)
    assert (ns(looked_after), begin, requests_sent) == (
        ns(start),
        begin_found(probes, first, ns(start)),
        len(probes) + 1,
    )
    assert begin > ns(start), "found after the start"
    windows = {(b["after"], b.get("before")) for b in bodies.sent if b["pageSize"] != 10}
    assert min(ns(after) for after, _ in windows) == ns(start)
    empty = [(a, b) for a, b in windows if b is not None and ns(b) <= first]
    assert len(windows) > 16
    assert len(empty) <= 12, f"{len(empty)} of {len(windows)} windows hold no event"


def test_a_sample_in_no_date_order_cuts_the_first_windows_at_its_quantiles() -> None:
    """The first page of the whole range, served in no date order, is a sample of its dates:
    the first windows, one per request in flight, hold about equal shares of it (cut evenly,
    the last tenth that holds 70% of the events would be one or two windows of thousands of
    events), and each is coarse: cut again at its own first page; at one request in flight
    still ``MIN_COARSE_WINDOWS`` of them. A sample in date order covers one end of
    the range only: the windows are of equal width, none coarse."""
    ms = 1_000_000
    rng = random.Random(7)
    sample = [
        rng.randrange(900 * ms, 1000 * ms) if rng.random() < 0.7 else rng.randrange(1000 * ms)
        for _ in range(100)
    ]
    windows = initial_windows(-5 * ms, None, 0, 1000 * ms, 8, sample)
    assert len(windows) == 8
    assert all(w.coarse and w.sampled == 1 for w in windows)
    oldest_first = list(reversed(windows))
    assert oldest_first[0].start == -5 * ms, "the oldest reaches down to start_date"
    assert oldest_first[-1].end is None, "the newest is left open"
    assert all(a.end == b.start for a, b in itertools.pairwise(oldest_first))
    shares = [sum(1 for date in sample if window.contains(date)) for window in windows]
    assert sum(shares) == len(sample)
    assert max(shares) <= 2 * len(sample) // len(windows), shares
    assert [w.weight for w in windows] == [share / len(sample) for share in shares]
    assert sum(1 for w in windows if w.start is not None and w.start >= 900 * ms) >= 5
    in_order = initial_windows(-5 * ms, None, 0, 1000 * ms, 8, sorted(sample))
    assert in_order == initial_windows(-5 * ms, None, 0, 1000 * ms, 8)
    assert not any(w.coarse for w in in_order)
    # one request at a time never cuts them: each completes a part a kill does not read again
    alone = initial_windows(-5 * ms, None, 0, 1000 * ms, 1, sample)
    assert len(alone) == MIN_COARSE_WINDOWS


def test_a_coarse_window_is_cut_at_its_first_page_and_its_pieces_are_not_cut_again() -> None:
    """A window of the first cut at the range's sample is cut as soon as its first full page
    is read in no date order: at that page's dates, into ``COARSE_PIECES`` pieces of
    decreasing shares that tile it and skip each event of the page once; its pieces, even
    long ones, are read on uncut (each would read the pages it delivered again). A page in
    date order cuts nothing: one page may be all the window holds, as for any window."""
    ms = 1_000_000
    rng = random.Random(11)
    dates = [rng.randrange(100 * ms, 900 * ms) for _ in range(100)]
    page = [_event(n, d) for n, d in enumerate(dates)]
    window = Window(0, 1000 * ms, sampled=1, coarse=True, weight=0.5)
    children = pieces(window, [page], None, 0, 1000 * ms, key)
    assert len(children) == COARSE_PIECES == 6
    ordered = sorted(dates)
    # shares of 6, 5 ... 1 in 21, oldest to newest
    quantiles = [ordered[100 * n // 21] for n in (6, 11, 15, 18, 20)]
    assert [c.end for c in children[:-1]] == quantiles
    held = [sum(1 for d in dates if c.contains(d)) for c in children]
    assert held == [28, 24, 19, 14, 10, 5]
    assert [c.weight for c in children] == [0.5 * n / 100 for n in held]
    assert (children[0].start, children[-1].end) == (0, 1000 * ms)
    assert all(a.end == b.start for a, b in itertools.pairwise(children))
    assert sum(sum(c.skip.values()) for c in children if c.skip) == 100, "each skipped once"
    assert not any(c.coarse for c in children)
    more = [
        [_event(100 * p + n, rng.randrange(1000 * ms)) for n in range(100)] for p in range(1, 5)
    ]
    assert not pieces(children[2], [page, *more], 1.0, 0, 1000 * ms, key), "not cut again"
    assert not pieces(Window(0, 1000 * ms, sampled=1), [page], None, 0, 1000 * ms, key)
    # dates packed at the window's start, in date order: read as any window's first page,
    # the part ahead is cut by its density, the part read one piece (its events skipped)
    packed = [_event(n, 100 * ms + n * ms // 10) for n in range(100)]
    by_density = pieces(window, [packed], None, 0, 1000 * ms, key)
    assert not any(c.coarse or c.sampled for c in by_density)
    assert by_density[0] == Window(0, 109_900_000)  # up to the last instant read
    assert sum(by_density[0].skip.values()) == 99
    # a page that covers the whole of a short window ahead: nothing to cut
    assert not pieces(Window(0, 120 * ms, coarse=True), [packed], None, 0, 120 * ms, key)


def test_a_resumed_first_sync_cuts_its_coarse_windows_as_the_first_run_did() -> None:
    """What a resumed first sync still has to read of a coarse window, less what the
    interrupted run completed inside it, is coarse still: cut at its first page as the
    interrupted run's windows were, not read whole (and a piece keeps its share)."""
    ms = 1_000_000
    window = Window(0, 1000 * ms, sampled=1, coarse=True)
    left = Backfill("digest", [(200 * ms, 300 * ms)]).remaining([window])
    assert [(w.start, w.end) for w in left] == [(0, 200 * ms), (300 * ms, 1000 * ms)]
    assert all(w.coarse and w.sampled == 1 for w in left)
    piece = Window(0, 1000 * ms, sampled=2, weight=0.25)
    assert [w.weight for w in Backfill("digest", [(0, 300 * ms)]).remaining([piece])] == [0.25]


@pytest.mark.parametrize("ascending", [True, False])
def test_a_window_in_date_order_is_cut_ahead_of_the_reading_only(ascending: bool) -> None:
    """Two pages read in date order from one end of a window: the rest lies ahead of the
    reading, cut into pieces of about TARGET_PAGES; the part read, with the sliver behind it
    (empty when sorted), is one piece, not two (each piece costs a request at least). It stops
    short of the last instant read, whose events the piece next to it skips: read again, it
    holds fewer events than the two pages, so it ends on a part page, not on an empty third."""
    ms = 1_000_000
    dates = [10 * ms + n * ms // 10 for n in range(200)]  # 10 per ms from 10 ms on
    if not ascending:
        dates = [1000 * ms - d for d in dates]
    pages = [[_event(n, d) for n, d in enumerate(dates[:100])]]
    pages.append([_event(n, d) for n, d in enumerate(dates[100:], 100)])
    window = Window(0, 1000 * ms)
    children = pieces(window, pages, None, 0, 1000 * ms, key)
    assert children[0].start == 0
    assert children[-1].end == 1000 * ms
    assert all(a.end == b.start for a, b in itertools.pairwise(children))
    read, next_to_it = (children[0], children[1]) if ascending else (children[-1], children[-2])
    first, last = (min(dates), max(dates)) if ascending else (max(dates), min(dates))
    assert read.contains(first)
    assert not read.contains(last), "the last instant read lies in the piece next to it"
    assert next_to_it.contains(last)
    assert read.skip is not None
    assert next_to_it.skip is not None
    assert sum(read.skip.values()) == 199, "the part read, its events skipped"
    assert sum(next_to_it.skip.values()) == 1, "the last event read, skipped next to it"
    ahead = [child for child in children if child is not read]
    # 970 ms ahead, at the density of the part read (2 pages in its 30 ms, the first 10 ms
    # without an event): about 65 pages, in pieces of about TARGET_PAGES
    assert len(ahead) == min(math.ceil(65 / TARGET_PAGES), MAX_PIECES), len(ahead)


@pytest.mark.parametrize("ascending", [True, False])
def test_pages_read_within_a_burst_after_a_quiet_stretch_are_no_density_to_cut_by(
    ascending: bool,
) -> None:
    """Two pages read in date order, both within a burst of events a millisecond wide, half a
    window after its start (a nightly run of the system log: the sign-ins filed at one
    instant, nothing before them since the bookmark, nothing after them up to the run's
    start): the window's part read holds two pages in 500 ms, so a page or two lies in the
    500 ms ahead, and the window is read on, not cut into MAX_PIECES pieces of a request
    each (as the burst's own width said: a nightly run took 90 requests for 17 pages)."""
    ms = 1_000_000
    dates = [500 * ms + n * ms // 200 for n in range(200)]  # 200 events in a millisecond
    if not ascending:
        dates = [1000 * ms - d for d in dates]
    pages = [[_event(n, d) for n, d in enumerate(dates[:100])]]
    pages.append([_event(n, d) for n, d in enumerate(dates[100:], 100)])
    assert not pieces(Window(0, 1000 * ms), pages, None, 0, 1000 * ms, key)
    # the same pages with a long stretch ahead: cut, at the density of the part read
    wide = Window(0, 4000 * ms) if ascending else Window(-3000 * ms, 1000 * ms)
    children = pieces(wide, pages, None, -3000 * ms, 4000 * ms, key)
    assert 1 < len(children) <= math.ceil(3500 / 250 / TARGET_PAGES) + 1, len(children)


@pytest.mark.parametrize("limit", [None, 1], ids=["default", "one-at-a-time"])
def test_a_kill_at_70_percent_rereads_only_windows_in_flight_in_every_order(
    ordered: Emulator, limit: int | None
) -> None:
    """A run cut off after 70% of its records (what the killed process wrote: its records
    and the last STATE before the cut), then resumed from that STATE: every event delivered
    twice lies in a window that was in flight (not complete in that STATE), and that is a
    small part of the feed in every order, not the most of it one unsplit window held. At a
    ``max_concurrency`` of 1 as well: one request at a time reads the same windows."""
    config = feed_config(ordered, **({} if limit is None else {"max_concurrency": limit}))
    full = sync(config, catalog=feed_only(config))
    expected = truth(ordered.dataset, after=config["start_date"])
    cut_at, seen, state = int(0.7 * sum(expected.values())), 0, None
    killed: list[dict[str, t.Any]] = []
    for message in full.messages:
        if message["type"] == "RECORD" and message["stream"] == "grant_feed":
            killed.append(message["record"])
            seen += 1
            if seen == cut_at:
                break
        elif message["type"] == "STATE":
            state = message["value"]
    assert state is not None
    completed = state["bookmarks"]["grant_feed"]["backfill"]["completed"]
    resumed = sync(config, state=state, catalog=feed_only(config))
    first, second = delivered(killed), delivered(resumed.records["grant_feed"])
    assert (first | second).keys() == expected.keys()
    twice = first & second
    assert not [key for key in twice if _in(completed, int(key[-1]))]
    if limit == 1:  # one window in flight, read unsplit: what is read twice is within it
        dates = [int(key[-1]) for key in twice]
        assert twice
        assert not _overlaps(completed, min(dates), max(dates))
        assert sum(twice.values()) < cut_at // 2
    else:
        assert sum(twice.values()) <= sum(expected.values()) // 4, (
            f"{sum(twice.values())} of {sum(expected.values())} read twice"
        )


@pytest.mark.parametrize("ascending", [True, False])
def test_a_burst_at_one_instant_under_the_last_page_is_no_density_to_cut_by(
    ascending: bool,
) -> None:
    """Two pages read in date order, the second a burst of events at one instant (the system
    log files dozens at once): the pages read span a tenth of the window, so about ten
    pages lie ahead, not the thousands the burst's zero width would say. The window is cut
    in pieces of about TARGET_PAGES by the instants read (the burst one of them), not into
    MAX_PIECES pieces of a request each; a window whose pages span most of it is not cut at
    all."""
    ms = 1_000_000
    spread = [n * ms for n in range(100)]  # one a ms over the first 100 ms
    burst = [100 * ms] * 100
    dates = spread + burst
    if not ascending:
        dates = [999 * ms - d for d in dates]
    pages = [[_event(n, d) for n, d in enumerate(dates[:100])]]
    pages.append([_event(n, d) for n, d in enumerate(dates[100:], 100)])
    window = Window(0, 950 * ms) if ascending else Window(50 * ms, 1000 * ms)
    children = pieces(window, pages, None, 0, 1000 * ms, key)
    # 850 ms ahead at about 100 ms a page (101 instants over the 100 ms read, pages of
    # 100 events: the burst counts once): 8.5 pages, in pieces of about TARGET_PAGES, and
    # the part read
    assert len(children) == math.ceil(8.5 / TARGET_PAGES) + 1, len(children)
    assert sum(sum(child.skip.values()) for child in children if child.skip) == 200
    narrow = Window(0, 130 * ms) if ascending else Window(870 * ms, 1000 * ms)
    assert not pieces(narrow, pages, None, 0, 1000 * ms, key), "a page or so ahead: read on"


@pytest.mark.parametrize("ascending", [True, False])
def test_a_burst_read_just_after_a_pieces_start_counts_its_instants_not_its_events(
    ascending: bool,
) -> None:
    """Two pages read in date order, ten events at each of twenty instants from 10 ms into a
    window half a second wide (a piece cut just before the sign-ins a nightly run of the
    system log finds, filed a few at a time, the rest of it quiet up to the run's start):
    the part read holds twenty instants in 30 ms, so three or four pages lie in the 500 ms
    ahead, not the thirty-five its 200 events would say; the window is read on, not cut into
    pieces of a request each, each cut again (a nightly run took 93 requests for 17 pages)."""
    ms = 1_000_000
    dates = [10 * ms + n // 10 * ms for n in range(200)]
    if not ascending:
        dates = [530 * ms - d for d in dates]
    pages = [[_event(n, d) for n, d in enumerate(dates[:100])]]
    pages.append([_event(n, d) for n, d in enumerate(dates[100:], 100)])
    assert not pieces(Window(0, 530 * ms), pages, None, 0, 530 * ms, key)


@pytest.mark.parametrize("ascending", [True, False])
def test_no_piece_is_cut_narrower_than_a_millisecond(ascending: bool) -> None:
    """Windows 3 ms wide read densely: two pages within the first 20 microseconds, in date
    order; two pages spread over the window in no order (a sample, the window twice the
    typical pages). The service keeps instants to the millisecond, so the pieces are at
    least MIN_WIDTH wide (two or three here), not MAX_PIECES or SAMPLE_PIECES pieces of a few
    microseconds, most of them empty and each a request; each event read is skipped by the
    one piece that holds it."""
    width = 3 * MIN_WIDTH
    in_order = [n * 100 for n in range(200)]  # 100 ns apart from the start
    if not ascending:
        in_order = [width - 1 - d for d in in_order]
    sample = random.Random(7).sample([n * 15_000 for n in range(200)], 200)
    for dates in (in_order, sample):
        pages = [[_event(n, d) for n, d in enumerate(dates[:100])]]
        pages.append([_event(n, d) for n, d in enumerate(dates[100:], 100)])
        children = pieces(Window(0, width), pages, 0.5, 0, width, key)
        bounds = [(child.start, child.end) for child in children]
        assert 2 <= len(children) <= 3, bounds
        assert all(c.start is not None and c.end is not None for c in children)
        assert all(c.end - c.start >= MIN_WIDTH for c in children), bounds
        assert sum(sum(c.skip.values()) for c in children if c.skip) == 200
