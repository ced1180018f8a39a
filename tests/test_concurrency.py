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


def until(condition: t.Callable[[], object], seconds: float = 5) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (a generous bound on what would
    otherwise be a wait without end)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


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


@pytest.mark.parametrize(
    ("limit", "count", "threads"), [(2, 5, 2), (4, 3, 3), (8, 8, 8), (4, 2, 2), (2, 2, 2)]
)
def test_at_once_calls_at_most_the_limit_at_once_and_answers_in_order(
    limit: int, count: int, threads: int
) -> None:
    """Two calls or more, above a limit of 1, are made at once (two already: a round of two
    requests is one latency, not two), in as many threads as calls up to the limit."""
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


@pytest.mark.parametrize(
    ("limit", "threads", "started"),
    [(4, None, [4]), (4, 1, [1]), (4, 0, []), (2, None, [2]), (2, 1, [1])],
)
def test_in_order_fetches_ahead_in_the_threads_asked_for(
    limit: int, threads: int | None, started: list[int]
) -> None:
    """Above a limit of 1 (2 already) the contexts are fetched ahead in threads of the sync,
    the limit's or the fewer asked for; with no thread to give, in the caller's thread."""
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


def test_a_fetch_in_the_callers_thread_reads_to_the_end() -> None:
    """A fetch made when its context is taken (in the caller's thread: a limit of 1, or a
    context asked out of order) is never told to stop: ``read_partition`` checks
    ``stopped()`` between records, and would otherwise hand on none of them."""

    def fetch(context: t.Mapping[str, t.Any], stopped: t.Callable[[], bool]) -> t.Iterator[int]:
        for n in range(3):
            if stopped():
                return
            yield 10 * context["n"] + n

    contexts = [{"n": n} for n in range(3)]
    reader = Concurrency(1).in_order(Sync(), "apps", contexts, fetch)
    assert [list(reader.take(c)) for c in contexts] == [[0, 1, 2], [10, 11, 12], [20, 21, 22]]
    sync = Sync()
    ahead = Concurrency(2).in_order(sync, "apps", contexts, fetch)
    try:
        assert list(ahead.take(contexts[2])) == [20, 21, 22]  # out of order: fetched here
    finally:
        ahead.close()
    assert sync.workers is not None
    assert sync.workers.closed


@pytest.mark.parametrize(("limit", "threads", "ahead"), [(2, None, 4), (3, None, 6), (4, 1, 2)])
def test_in_order_fetches_two_contexts_per_thread_ahead_and_no_more(
    limit: int, threads: int | None, ahead: int
) -> None:
    """Up to two contexts per thread are fetched ahead of the one taken, and no more until
    the caller takes one: each holds its records until taken, so memory stays bounded
    however many contexts (partitions) there are; taking one fetches the next."""
    sync = Sync()
    fetched: list[int] = []

    def fetch(context: t.Mapping[str, t.Any], stopped: t.Callable[[], bool]) -> list[int]:
        fetched.append(context["n"])
        return [context["n"]]

    contexts = [{"n": n} for n in range(20)]
    reader = Concurrency(limit).in_order(sync, "apps", contexts, fetch, threads=threads)
    try:
        assert until(lambda: len(fetched) >= ahead)
        assert sync.workers is not None
        sync.workers.submit(lambda: None).result(timeout=5)  # what was handed out is taken up
        assert sorted(fetched) == list(range(ahead))
        assert list(reader.take(contexts[0])) == [0]
        assert until(lambda: len(fetched) > ahead)
        sync.workers.submit(lambda: None).result(timeout=5)
        assert sorted(fetched) == list(range(ahead + 1))
    finally:
        reader.close()


def test_in_order_is_ready_only_for_the_next_context_once_its_records_arrived() -> None:
    """``ready`` (``fetched``: ``users`` takes exclusions between directory pages only when
    they need no wait) says yes for the next context once its fetch has ended, and never for
    another, nor before, nor without threads (nothing is fetched ahead)."""
    sync = Sync()
    gate = threading.Event()

    def fetch(context: t.Mapping[str, t.Any], stopped: t.Callable[[], bool]) -> list[int]:
        if context["n"] == 0:
            gate.wait(5)
        return [context["n"]]

    contexts = [{"n": n} for n in range(3)]
    serial = Concurrency(1).in_order(sync, "apps", contexts, fetch)
    assert not serial.ready(contexts[0])
    reader = Concurrency(2).in_order(sync, "apps", contexts, fetch)
    try:
        assert not reader.ready(contexts[0])  # its fetch has not ended
        gate.set()
        assert until(lambda: reader.ready(contexts[0]))
        assert not reader.ready(contexts[1])  # fetched, but not the next one
        assert list(reader.take(contexts[0])) == [0]
        assert until(lambda: reader.ready(contexts[1]))
        assert list(reader.take(contexts[1])) == [1]
        assert until(lambda: reader.ready(contexts[2]))  # the last one, alone in flight
        assert list(reader.take(contexts[2])) == [2]
    finally:
        gate.set()
        reader.close()


def test_closing_in_order_ends_its_threads_and_fetches_nothing_more() -> None:
    """``close`` (past_grants' reader when its sync ends, or fails) ends the fetches in
    progress (``stopped()``), fetches none of those not started, joins the threads, and the
    reader says it is closed (partitions.py then makes a new one); closing a reader without
    threads only marks it closed."""
    sync = Sync()
    fetched: dict[int, threading.Thread] = {}

    def fetch(context: t.Mapping[str, t.Any], stopped: t.Callable[[], bool]) -> list[int]:
        fetched[context["n"]] = threading.current_thread()
        sync.stop.wait(5)  # a request that ends when the workers are closed
        return [context["n"]]

    contexts = [{"n": n} for n in range(10)]
    reader = Concurrency(2).in_order(sync, "apps", contexts, fetch)
    try:
        assert until(lambda: len(fetched) == 2)
        assert not reader.closed
        began = time.monotonic()
        reader.close()
        assert time.monotonic() - began < 4  # not the fetches' 5 s
        assert reader.closed
        assert sync.workers is not None
        assert sync.workers.closed
        assert sorted(fetched) == [0, 1]  # those queued behind them were not fetched
        assert all(not thread.is_alive() for thread in fetched.values())
    finally:
        if sync.workers is not None:
            sync.workers.close()
    serial = Concurrency(1).in_order(sync, "apps", contexts, fetch)
    assert not serial.closed
    serial.close()
    assert serial.closed


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


@pytest.mark.parametrize("limit", [2, 3])
def test_read_ahead_above_one_reads_in_a_thread_of_its_own(limit: int) -> None:
    """Above a limit of 1 (2 already) the series is read in one thread of the sync."""
    sync = Sync()
    where: set[threading.Thread] = set()

    def series() -> t.Iterator[int]:
        for n in range(25):
            where.add(threading.current_thread())
            yield n

    assert list(
        Concurrency(limit).read_ahead(sync, "directory", series, chunk=10, chunks=2)
    ) == list(range(25))
    assert sync.started == [1]
    assert threading.main_thread() not in where


def test_read_ahead_waits_out_a_slow_page_doing_the_callers_other_work() -> None:
    """A page slower than the caller's poll (0.1 s) still comes: the caller waits on, doing
    its other work (``idle``, in its own thread) meanwhile, and the series goes on after it."""
    sync = Sync()
    idled: list[threading.Thread] = []
    waited = threading.Event()

    def idle() -> None:
        idled.append(threading.current_thread())
        waited.set()

    def series() -> t.Iterator[int]:
        yield from range(3)
        assert waited.wait(5)  # the next page comes once the caller has waited for it
        yield from range(3, 6)

    items = Concurrency(2).read_ahead(sync, "directory", series, chunk=3, chunks=2, idle=idle)
    try:
        assert list(items) == list(range(6))
    finally:
        assert sync.workers is not None
        sync.workers.close()
    assert idled
    assert set(idled) == {threading.main_thread()}


def test_read_ahead_keeps_a_slow_caller_s_items_and_reads_only_so_far_ahead() -> None:
    """A caller slower than the reading loses nothing: the reader waits for room as long as
    the caller takes (however long it holds an item), and reads no further meanwhile than
    the chunks the queue holds and the one it waits to hand on (memory stays bounded)."""
    sync = Sync()
    read: list[int] = []
    waiting = threading.Event()  # the reader waits for room to hand a chunk on
    resumed = threading.Event()

    def series() -> t.Iterator[int]:
        for n in range(8):
            if n == 4:
                resumed.wait(5)
            read.append(n)
            if n == 2:
                waiting.set()
            yield n

    items = Concurrency(2).read_ahead(sync, "directory", series, chunk=1, chunks=1)
    try:
        taken = [next(items)]
        assert waiting.wait(5)
        time.sleep(0.3)  # the caller holds its item a while
        assert read == [0, 1, 2]  # the one taken, one chunk queued, one waiting for room
        resumed.set()
        taken.extend(items)
        assert taken == list(range(8))
    finally:
        resumed.set()
        assert sync.workers is not None
        sync.workers.close()


def test_closing_ends_a_read_ahead_waiting_for_room() -> None:
    """The sync ends (or fails) while its caller no longer takes: closing the workers ends
    the reader waiting to hand on its next chunk, and its thread, at once."""
    sync = Sync()
    reader: list[threading.Thread] = []
    waiting = threading.Event()

    def series() -> t.Iterator[int]:
        reader.append(threading.current_thread())
        n = 0
        while True:
            if n == 2:
                waiting.set()
            yield n
            n += 1

    items = Concurrency(2).read_ahead(sync, "directory", series, chunk=1, chunks=1)
    assert next(items) == 0
    assert waiting.wait(5)
    assert sync.workers is not None
    closing = threading.Thread(target=sync.workers.close, daemon=True)
    closing.start()
    closing.join(5)
    try:
        assert not closing.is_alive(), "closing waits for the reader, which waits for room"
        assert not reader[0].is_alive()
    finally:
        for _ in items:  # takes what the reader waits to hand on: a reader left waiting ends
            pass
        closing.join(5)


def test_workers_are_the_limits_threads_for_the_sync() -> None:
    sync = Sync()
    workers = Concurrency(5).workers(sync, "grant-feed")
    try:
        assert sync.started == [5]
        assert workers.count == 5
    finally:
        workers.close()


def test_the_threads_carry_the_name_they_were_asked_for() -> None:
    """Every thread of a sync is named as its stream asked (``grant-feed``, ``prefetch``,
    ``directory``): a thread dump says whose it is, and test_reliability and test_backfill
    find by that name any thread that outlived its sync."""
    sync = Sync()
    names: list[str] = []  # "<name>_<n>" (ThreadPoolExecutor)

    def note(*_: object) -> list[int]:
        names.append(threading.current_thread().name)
        return [0]

    concurrency = Concurrency(2)
    concurrency.at_once(sync, "probes", [note, note])
    assert [name.rsplit("_", 1)[0] for name in names] == ["probes"] * 2
    names.clear()
    contexts = [{"n": n} for n in range(2)]
    reader = concurrency.in_order(sync, "prefetch", contexts, note)
    assert [list(reader.take(c)) for c in contexts] == [[0], [0]]
    assert [name.rsplit("_", 1)[0] for name in names] == ["prefetch"] * 2
    names.clear()
    assert list(concurrency.read_ahead(sync, "directory", note, chunk=1, chunks=1)) == [0]
    assert [name.rsplit("_", 1)[0] for name in names] == ["directory"]
    workers = concurrency.workers(sync, "grant-feed")
    try:
        names.append(workers.submit(lambda: threading.current_thread().name).result(5))
    finally:
        workers.close()
    assert [name.rsplit("_", 1)[0] for name in names] == ["directory", "grant-feed"]
