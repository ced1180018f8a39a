"""What a real tenant does to a backfill: a limit of requests in flight (429 + Retry-After
beyond it), a skewed distribution of event dates and a feed in any order, from Python, the
HTTP controls and the command line."""

from __future__ import annotations

import itertools
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import requests

from emulator import Emulator
from emulator.__main__ import parse_args
from emulator.feed import ORDER_TAG, ORDERS
from emulator.service import InFlight
from emulator.tests.conftest import CRED, FEED, ROOT, login, small_dataset
from emulator.timefmt import format_ns, to_ns


def _concurrent_statuses(emu: Emulator, n: int) -> Counter[int]:
    session = login(emu)
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    retry_after: set[str] = set()

    def call() -> None:
        response = session.post(emu.url + FEED, json={"pageSize": 10}, timeout=10)
        with lock:
            statuses[response.status_code] += 1
            if response.status_code == 429:
                retry_after.add(response.headers["Retry-After"])

    threads = [threading.Thread(target=call) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if retry_after:
        assert retry_after == {str(emu.throttle_retry_after)}
    return statuses


def test_requests_beyond_the_limit_in_flight_are_answered_429_with_retry_after() -> None:
    with Emulator(small_dataset(events=300), credential=CRED, latency=0.3) as emu:
        emu.max_in_flight = 2
        emu.throttle_retry_after = 3
        statuses = _concurrent_statuses(emu, 6)
        assert statuses == {200: 2, 429: 4}
        assert emu.stats["throttled"] == 4
        assert emu.stats["peak_in_flight"] == 2
        # the two answered were in flight at once for a while (the 429s never were)
        occupancy = emu.stats["in_flight"]
        assert occupancy["peak"] == 2
        assert 0 < occupancy["by_level"]["2"] <= occupancy["seconds"]
        assert set(occupancy["by_level"]) <= {"0", "1", "2"}
        emu.max_in_flight = 0
        emu.reset_stats()
        assert _concurrent_statuses(emu, 6) == {200: 6}
        assert emu.stats["peak_in_flight"] == 6


def test_in_flight_limit_from_the_http_controls() -> None:
    with Emulator(small_dataset(events=300), credential=CRED, latency=0.3) as emu:
        answer = requests.post(
            emu.url + "/_emulator/settings",
            json={"max_in_flight": 1, "throttle_retry_after": 0},
            timeout=10,
        ).json()
        assert (answer["max_in_flight"], answer["throttle_retry_after"]) == (1, 0)
        assert _concurrent_statuses(emu, 3) == {200: 1, 429: 2}
        bad = requests.post(emu.url + "/_emulator/settings", json={"max_in_flight": -1}, timeout=10)
        assert bad.status_code == 400


def test_occupancy_says_how_long_each_number_of_requests_was_in_flight() -> None:
    """From the first request in to the last one out: the seconds at each level, and the
    stretches before the peak was first reached (the ramp) and after it was last left (the
    tail), with their mean requests in flight. A clock of whole seconds set by hand."""
    now = [100.0]
    in_flight = InFlight(clock=lambda: now[0])
    nothing = {"seconds": 0.0, "mean": 0.0}
    assert in_flight.occupancy() == {
        **nothing,
        "peak": 0,
        "by_level": {},
        "ramp": nothing,
        "tail": nothing,
    }

    def at(second: float, step: Callable[[], Any]) -> None:
        now[0] = 100.0 + second
        step()

    for second, step in [
        (0, lambda: in_flight.enter(0)),  # 1 in flight for 2 s (the ramp)
        (2, lambda: in_flight.enter(0)),  # 2: the peak, for 3 s
        (5, in_flight.leave),  # 1 for 1 s
        (6, lambda: in_flight.enter(0)),  # 2 again for 4 s
        (10, in_flight.leave),  # 1 for 2 s (the tail)
        (12, in_flight.leave),  # none for 3 s, between two
        (15, lambda: in_flight.enter(0)),  # 1 for 1 s (the tail)
        (16, in_flight.leave),
    ]:
        at(second, step)
    now[0] = 130.0  # later, idle: not counted
    assert in_flight.occupancy() == {
        "seconds": 16.0,
        "mean": 1.25,
        "peak": 2,
        "by_level": {"0": 3.0, "1": 6.0, "2": 7.0},
        "ramp": {"seconds": 2.0, "mean": 1.0},
        "tail": {"seconds": 6.0, "mean": 0.5},
    }
    in_flight.enter(0)
    now[0] = 131.0
    in_flight.reset_peak()  # a request still in flight is counted from the reset
    now[0] = 133.0
    assert in_flight.occupancy()["by_level"] == {"1": 2.0}


def test_skewed_dates_crowd_into_a_burst_and_the_recent_past() -> None:
    uniform = small_dataset(events=3000)
    skewed = small_dataset(events=3000, distribution="skewed")
    span = skewed.end_ns - skewed.feed.base

    def tenths(ds: object) -> Counter[int]:
        return Counter(
            min(9, (ds.event(i).date - ds.feed.base) * 10 // span)  # type: ignore[attr-defined]
            for i in range(3000)
        )

    assert max(tenths(uniform).values()) < 2 * min(tenths(uniform).values())
    by_tenth = tenths(skewed)
    assert by_tenth[6] > 0.35 * 3000  # the burst (and its neighbourhood)
    assert sum(by_tenth[k] for k in range(6)) < 0.25 * 3000  # a sparse past
    # Same events, other dates: ids and order do not depend on the distribution.
    assert [e[:5] for e in map(skewed.event, range(50))] == [
        e[:5] for e in map(uniform.event, range(50))
    ]


@pytest.mark.parametrize("bounds", [(0.55, 0.65), (0.6, 0.61), (0.0, 0.2), (0.9, 1.2)])
def test_a_time_window_of_skewed_data_is_exact(bounds: tuple[float, float]) -> None:
    ds = small_dataset(events=3000, distribution="skewed")
    span = ds.end_ns - ds.feed.base
    after, before = (format_ns(ds.feed.base + int(b * span)) for b in bounds)
    got = ds.feed_entries(after=after, before=before)
    after_ns, before_ns = ds.feed.base + int(bounds[0] * span), ds.feed.base + int(bounds[1] * span)
    expected = [i for i in range(ds.total) if after_ns <= ds.event(i).date < before_ns]
    assert got == [{"feed": ds.feed_object(ds.event(i))} for i in expected]
    assert got


def assert_refused_by_the_command_line(flag: str, value: str) -> None:
    """``python -m emulator FLAG VALUE`` exits 2 with a usage error naming the flag."""
    out = subprocess.run(
        [sys.executable, "-m", "emulator", flag, value],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert flag in out.stderr


def test_command_line_flags() -> None:
    args = parse_args(
        ["--distribution", "skewed", "--max-in-flight", "2", "--throttle-retry-after", "4"]
    )
    assert (args.distribution, args.max_in_flight, args.throttle_retry_after) == ("skewed", 2, 4)
    assert parse_args([]).distribution == "uniform"
    assert parse_args([]).max_in_flight == 0
    assert_refused_by_the_command_line("--distribution", "lumpy")


def test_a_client_that_resets_its_connection_leaves_no_traceback(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A killed tap resets its keep-alive connections: no traceback on the emulator's stderr."""
    with Emulator(small_dataset(events=100), credential=CRED) as emu:
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", emu.port))
            sock.sendall(b"POST /api/v1/grants/feed HTTP/1.1\r\nHost: x\r\n")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        time.sleep(0.3)
    assert "Traceback" not in capfd.readouterr().err


# ----- the feed's order, which the service does not document -------------------------------


def _dates(entries: list[dict[str, Any]]) -> list[int]:
    return [to_ns(entry["feed"]["date"]) for entry in entries]


def test_the_feed_is_served_in_each_order_with_the_same_events() -> None:
    near = small_dataset(events=2000, distribution="recent")
    events = Counter(json.dumps(e, sort_keys=True) for e in near.feed_entries())
    served: dict[str, list[int]] = {}
    for order in ORDERS:
        ds = small_dataset(events=2000, distribution="recent", order=order)
        entries = ds.feed_entries()
        assert Counter(json.dumps(e, sort_keys=True) for e in entries) == events
        served[order] = _dates(entries)
    assert served["ascending"] == sorted(served["near"])
    assert served["descending"] == sorted(served["near"], reverse=True)
    inversions = {
        order: sum(a > b for a, b in itertools.pairwise(dates)) / len(dates)
        for order, dates in served.items()
    }
    assert inversions["near"] < 0.35  # neighbours out of order, the whole roughly by date
    assert 0.4 < inversions["none"] < 0.6  # no date order at all


@pytest.mark.parametrize("order", ORDERS)
def test_a_window_pages_through_its_events_in_the_order(order: str) -> None:
    """Over HTTP, in pages, a window's search returns exactly its events, in the order."""
    ds = small_dataset(events=2000, distribution="recent", order=order)
    span = ds.end_ns - ds.feed.base
    after, before = (format_ns(ds.feed.base + int(b * span)) for b in (0.85, 0.95))
    with Emulator(ds, credential=CRED) as emu:
        session, body, got = login(emu), {"after": after, "before": before, "pageSize": 37}, []
        while True:
            page = session.post(emu.url + FEED, json=body, timeout=10).json()
            got.extend(page.get("list") or [])
            if not page["nextPageToken"]:
                break
            body["pageToken"] = page["nextPageToken"]
    expected = ds.feed_entries(after=after, before=before)
    assert got == expected
    assert len(expected) > 5 * 37
    if order == "none":  # the window's first page is spread over the window's dates
        first = sorted(_dates(expected[:37]))
        assert first[-1] - first[0] > (to_ns(before) - to_ns(after)) // 2


def test_recent_dates_crowd_into_the_last_tenth() -> None:
    ds = small_dataset(events=3000, distribution="recent")
    span = ds.end_ns - ds.feed.base
    recent = sum(1 for i in range(3000) if ds.event(i).date - ds.feed.base >= span * 9 // 10)
    assert 0.65 * 3000 < recent < 0.75 * 3000


def test_feed_order_from_the_command_line_and_bad_values() -> None:
    assert parse_args(["--feed-order", "none"]).feed_order == "none"
    assert parse_args([]).feed_order == "near"
    with pytest.raises(ValueError, match="order must be one of"):
        small_dataset(order="by-id")
    assert_refused_by_the_command_line("--feed-order", "random")


@pytest.mark.parametrize("order", ORDERS)
def test_wide_searches_are_read_from_one_sort_of_the_feed(
    order: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backfill's probes and its sample search wide ranges at once: each is served from the
    whole feed's order, decoded and sorted once (sorting each again cost 0.3-0.5 s of CPU
    per round), in the same order as sorting the range itself; a narrow window sorts its own."""
    ds = small_dataset(events=2000, distribution="recent", order=order)
    feed = ds.feed
    event = feed.event
    decoded = 0

    def counting(i: int) -> Any:
        nonlocal decoded
        decoded += 1
        return event(i)

    monkeypatch.setattr(feed, "event", counting)
    wide = [(0, 2000), (0, 1900), (0, 1500), (100, 2000), (0, 1000)]
    narrow = [(1200, 1300), (1500, 1550)]
    for lo, hi in wide + narrow:
        if order == "near":
            expected = list(range(lo, hi))
        elif order == "none":
            expected = sorted(range(lo, hi), key=lambda i: feed.seed.mix(ORDER_TAG, i))
        else:
            expected = [i for _, i in sorted((event(i).date, i) for i in range(lo, hi))]
            if order == "descending":
                expected.reverse()
        assert list(feed.server_order(lo, hi)) == expected, (lo, hi)
    once = 0 if order in ("near", "none") else 2000 + 150
    assert decoded <= once * 1.1, f"{decoded} events decoded for {len(wide)} wide searches"


def test_an_answer_is_written_only_after_its_request_left_the_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A serial client on two connections, each request sent the moment the last answer is
    read, under a limit of one: the gateway must have let go of the first before the client can
    see its answer. Leaving is slowed here so the order, not the machine's speed, decides (it
    once let a loaded CI count a serial tap's peak as two)."""
    leave = InFlight.leave

    def slow_leave(self: InFlight) -> None:
        time.sleep(0.3)
        leave(self)

    monkeypatch.setattr(InFlight, "leave", slow_leave)
    with Emulator(small_dataset(events=300), credential=CRED) as emu:
        emu.max_in_flight = 1
        first, second = login(emu), login(emu)
        statuses = [
            session.post(emu.url + FEED, json={"pageSize": 10}, timeout=10).status_code
            for session in (first, second, first)
        ]
        assert (statuses, emu.stats["throttled"], emu.stats["peak_in_flight"]) == ([200] * 3, 0, 1)
