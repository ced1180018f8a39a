"""The run's one owner of concurrency (engine/concurrency.py), on its own: what each of its
ways of reading promises at a limit of 1 (the caller's thread, one request after another)
and above it (threads of the sync, at most the limit at once, results in the caller's order).
The streams that use it are tested through the tap (test_catalog, test_people_streams,
test_past_grants, test_tasks, test_backfill)."""

from __future__ import annotations

import threading
import time
import typing as t

import pytest

from tap_accessgov.engine.concurrency import Concurrency, Workers


class Sync:
    """What ``Concurrency`` needs of a stream: threads for its sync (as
    ``AccessGovStream.start_workers``: a new set closes the one before)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.workers: Workers | None = None
        self.started: list[int] = []  # the thread counts asked for

    def start_workers(self, count: int, name: str) -> Workers:
        if self.workers is not None:
            self.workers.close()
        self.started.append(count)
        self.workers = Workers(count, self.stop, name)
        return self.workers


class Calls:
    """Calls that note the thread they ran in and how many ran at once. With ``meet``, each
    waits (at most 5 s) until that many have run at once: calls that are made at once are
    then seen together however late a loaded machine starts their threads."""

    def __init__(self, meet: int = 0) -> None:
        self.meet = meet
        self.threads: list[threading.Thread] = []
        self.running = self.peak = 0
        self._met = threading.Condition()

    def call(self, value: int) -> t.Callable[[], int]:
        def run() -> int:
            with self._met:
                self.threads.append(threading.current_thread())
                self.running += 1
                self.peak = max(self.peak, self.running)
                self._met.notify_all()
                self._met.wait_for(lambda: self.peak >= self.meet, timeout=5)
                self.running -= 1
            return value

        return run


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_concurrency must be at least 1, not 0"):
        Concurrency(0)
    assert Concurrency(1).limit == 1


def test_at_once_at_a_limit_of_one_calls_in_the_callers_thread_in_order() -> None:
    sync, calls = Sync(), Calls()
    assert Concurrency(1).at_once(sync, "probes", [calls.call(n) for n in range(4)]) == [
        0,
        1,
        2,
        3,
    ]
    assert calls.threads == [threading.main_thread()] * 4
    assert sync.started == []  # no thread was started


@pytest.mark.parametrize(("limit", "count", "threads"), [(2, 5, 2), (4, 3, 3), (8, 8, 8)])
def test_at_once_calls_at_most_the_limit_at_once_and_answers_in_order(
    limit: int, count: int, threads: int
) -> None:
    sync, calls = Sync(), Calls(meet=threads)
    results = Concurrency(limit).at_once(sync, "probes", [calls.call(n) for n in range(count)])
    assert results == list(range(count))
    assert sync.started == [threads]  # the limit, or fewer for fewer calls
    assert calls.peak == threads
    assert threading.main_thread() not in calls.threads
    assert sync.workers is not None
    assert sync.workers.closed  # its threads end before it returns
    assert all(not thread.is_alive() for thread in calls.threads)


def test_at_once_of_one_call_makes_it_in_the_callers_thread() -> None:
    sync, calls = Sync(), Calls()
    assert Concurrency(8).at_once(sync, "probes", [calls.call(7)]) == [7]
    assert calls.threads == [threading.main_thread()]
    assert sync.started == []


def test_at_once_raises_the_first_failure_without_waiting_for_the_rest() -> None:
    """A call that fails ends the round once it is known: the calls not started are
    cancelled, and the round does not wait for a slow one beyond its own end."""
    sync = Sync()
    started: list[int] = []

    def failing() -> int:
        started.append(0)
        raise RuntimeError("the service refused")

    def slow(n: int) -> t.Callable[[], int]:
        def run() -> int:
            started.append(n)
            sync.stop.wait(5)  # ends when the workers are closed
            return n

        return run

    began = time.monotonic()
    with pytest.raises(RuntimeError, match="the service refused"):
        Concurrency(2).at_once(sync, "probes", [slow(1), failing, *(slow(n) for n in range(2, 9))])
    assert time.monotonic() - began < 4  # not the slow call's 5 s
    assert len(started) < 9  # what had not started was cancelled
    assert sync.workers is not None
    assert sync.workers.closed


def test_at_once_at_a_limit_of_one_stops_at_the_first_failure() -> None:
    made: list[int] = []

    def call(n: int) -> t.Callable[[], int]:
        def run() -> int:
            made.append(n)
            if n == 1:
                raise RuntimeError("refused")
            return n

        return run

    with pytest.raises(RuntimeError, match="refused"):
        Concurrency(1).at_once(Sync(), "probes", [call(n) for n in range(4)])
    assert made == [0, 1]


def test_in_order_at_a_limit_of_one_fetches_each_when_taken_in_the_callers_thread() -> None:
    sync = Sync()
    fetched: list[tuple[int, threading.Thread]] = []

    def fetch(context: t.Mapping[str, t.Any], stopped: t.Callable[[], bool]) -> list[int]:
        fetched.append((context["n"], threading.current_thread()))
        return [context["n"]] * 2

    contexts = [{"n": n} for n in range(3)]
    reader = Concurrency(1).in_order(sync, "apps", contexts, fetch)
    assert fetched == []  # nothing fetched ahead
    assert list(reader.take(contexts[0])) == [0, 0]
    assert fetched == [(0, threading.main_thread())]
    assert [list(reader.take(c)) for c in contexts[1:]] == [[1, 1], [2, 2]]
    assert sync.started == []


@pytest.mark.parametrize(("limit", "threads", "started"), [(4, None, [4]), (4, 1, [1]), (4, 0, [])])
def test_in_order_fetches_ahead_in_the_threads_asked_for(
    limit: int, threads: int | None, started: list[int]
) -> None:
    sync = Sync()
    where: dict[int, threading.Thread] = {}

    def fetch(context: t.Mapping[str, t.Any], stopped: t.Callable[[], bool]) -> list[int]:
        where[context["n"]] = threading.current_thread()
        return [context["n"]]

    contexts = [{"n": n} for n in range(6)]
    reader = Concurrency(limit).in_order(sync, "apps", contexts, fetch, threads=threads)
    assert [list(reader.take(c)) for c in contexts] == [[n] for n in range(6)]
    assert sync.started == started
    in_main = {n for n, thread in where.items() if thread is threading.main_thread()}
    assert in_main == (set(range(6)) if not started else set())


def test_read_ahead_at_a_limit_of_one_reads_as_the_caller_takes() -> None:
    sync = Sync()
    read: list[int] = []

    def series() -> t.Iterator[int]:
        for n in range(5):
            read.append(n)
            yield n

    items = Concurrency(1).read_ahead(sync, "directory", series, chunk=2, chunks=2)
    assert read == []
    assert next(iter(items)) == 0
    assert read == [0]  # nothing read ahead of the caller
    assert list(items) == [1, 2, 3, 4]
    assert sync.started == []


def test_read_ahead_above_one_reads_in_a_thread_of_its_own() -> None:
    sync = Sync()
    where: set[threading.Thread] = set()

    def series() -> t.Iterator[int]:
        for n in range(25):
            where.add(threading.current_thread())
            yield n

    assert list(Concurrency(3).read_ahead(sync, "directory", series, chunk=10, chunks=2)) == list(
        range(25)
    )
    assert sync.started == [1]
    assert threading.main_thread() not in where


def test_workers_are_the_limits_threads_for_the_sync() -> None:
    sync = Sync()
    workers = Concurrency(5).workers(sync, "grant-feed")
    try:
        assert sync.started == [5]
        assert workers.count == 5
    finally:
        workers.close()
