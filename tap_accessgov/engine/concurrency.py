"""The run's one owner of concurrency (``Concurrency``), and what it runs requests in.

The SDK syncs partitions one after another and has no concurrency (sdk#183, sdk#2121); with
hundreds of entitlements or a years-long grant feed the run is one request latency after
another. The tap builds one ``Concurrency`` from ``max_concurrency`` (the only place the
setting is read), beside the run's request budget (request_budget.py: the requests actually
in flight, which a 429 lowers). A stream asks it for "these requests, in this order, at most
N at once" (``in_order``), for a round of requests at once (``at_once``), for a page series read ahead of its records (``read_ahead``), or
for the threads of its time windows (``workers``, which time_ranges.py's reader uses); it
never reads the setting, nor decides between serial and concurrent: at a limit of 1 the
requests are made in the caller's thread, one after another.

The SDK still drives the sync (contexts, records, state, child streams, one writer on stdout,
all in the main thread); only HTTP work runs in ``Workers``, through the stream's own request
loop (same paging, retries, authenticator and request budget), in threads that end with the
sync that started them (``AccessGovStream.start_workers``; the base ends them when its sync
ends, ``TapStream.sync``). Closing them sets the stream's stop event, which ends every wait in
the request path at once, cancels what has not started and joins the threads: none outlives
its sync.
"""

from __future__ import annotations

import collections
import queue
import threading
import typing as t
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait

if t.TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

Record = dict[str, t.Any]
Context = t.Mapping[str, t.Any]
Fetch = t.Callable[[Context, t.Callable[[], bool]], "Iterable[Record]"]


class SyncingStream(t.Protocol):
    """What ``Concurrency`` needs of a stream: threads for its sync, which end with it
    (``AccessGovStream.start_workers``)."""

    def start_workers(self, count: int, name: str) -> Workers: ...


class Concurrency:
    """At most ``limit`` requests of the run at once (``max_concurrency``): built once by the
    tap; every stream's concurrent reading goes through it."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            msg = f"max_concurrency must be at least 1, not {limit}"
            raise ValueError(msg)
        self.limit = limit

    def workers(self, stream: SyncingStream, name: str) -> Workers:
        """``limit`` threads for ``stream``'s sync (its time windows: time_ranges.py's reader
        reads in the caller's thread alone while it is allowed one window at a time)."""
        return stream.start_workers(self.limit, name)

    def in_order(
        self,
        stream: SyncingStream,
        name: str,
        contexts: Sequence[Context],
        fetch: Fetch,
        *,
        threads: int | None = None,
    ) -> InOrder:
        """The records of each of ``contexts`` (``fetch(context, stopped)``), taken in their
        order, the next ones fetched ahead in ``threads`` of ``stream``'s sync (by default the
        limit; a stream that keeps a thread for other work asks for fewer). At a limit of 1,
        or with no thread to give, each is fetched when it is taken, in the caller's thread."""
        count = self.limit if threads is None else threads
        if self.limit < 2 or count < 1:
            return InOrder(fetch, contexts, None)
        return InOrder(fetch, contexts, stream.start_workers(count, name))

    def at_once(
        self, stream: SyncingStream, name: str, calls: Sequence[t.Callable[[], _T]]
    ) -> list[_T]:
        """What each of ``calls`` returns, in their order, the calls made at once in threads
        of ``stream``'s sync (at most the limit), which end before this returns; the first
        failure is raised once known (what has not started is cancelled, what runs ends at
        its next request). At a limit of 1, one after another in the caller's thread."""
        if self.limit < 2 or len(calls) < 2:
            return [call() for call in calls]
        workers = stream.start_workers(min(self.limit, len(calls)), name)
        try:
            futures = [workers.submit(call) for call in calls]
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future.done() and (failure := future.exception()) is not None:
                    raise failure
            return [future.result() for future in futures]
        finally:
            workers.close()

    def read_ahead(
        self,
        stream: SyncingStream,
        name: str,
        read: t.Callable[[], Iterable[_T]],
        chunk: int,
        chunks: int,
        idle: t.Callable[[], object] = lambda: None,
    ) -> Iterator[_T]:
        """The items of ``read()``, a page series read in a thread of its own up to ``chunks``
        chunks of ``chunk`` items ahead of the caller (``read_ahead``); at a limit of 1, read
        as the caller takes them, in its thread."""
        if self.limit < 2:
            return iter(read())
        return read_ahead(stream.start_workers(1, name), read, chunk, chunks, idle)


_T = t.TypeVar("_T")


class Workers:
    """``count`` threads for one sync; ``stop`` is the stream's event that ends their waits."""

    def __init__(self, count: int, stop: threading.Event, name: str) -> None:
        stop.clear()
        self.count = count
        self.stop = stop
        self._executor = ThreadPoolExecutor(max_workers=count, thread_name_prefix=name)
        self.closed = False

    def submit(self, fn: t.Callable[..., _T], *args: t.Any) -> Future[_T]:
        return self._executor.submit(fn, *args)

    def close(self) -> None:
        """Stop: waits end, pending work is cancelled, running work ends at its next request
        (at most the HTTP call in progress), and the threads are joined."""
        if self.closed:
            return
        self.closed = True
        self.stop.set()
        try:
            self._executor.shutdown(wait=True, cancel_futures=True)
        finally:
            self.stop.clear()  # the threads are gone; the main thread's requests go on


def read_ahead(
    workers: Workers,
    read: t.Callable[[], Iterable[_T]],
    chunk: int,
    chunks: int,
    idle: t.Callable[[], object] = lambda: None,
) -> Iterator[_T]:
    """The items of ``read()``, read in one of ``workers``' threads up to ``chunks`` chunks of
    ``chunk`` items ahead of the caller: a page series whose pages must follow each other
    (each token comes with the page before) still has its next page in flight while the
    caller hands the last one on. The reading starts here, not when the caller first asks
    (a generator function would start it only then). What ``read`` raises is raised here,
    after the items read before it, as the series itself would; closing ``workers`` ends the
    reading at its next item, and the caller's wait with it.

    ``idle`` is called in the caller's thread each time it has waited 0.1 s for the next
    chunk: the caller's other work, done while the series is in flight (what it raises ends
    the iteration)."""
    handed: queue.Queue[tuple[bool, t.Any]] = queue.Queue(maxsize=chunks)

    def send(done: bool, payload: t.Any) -> None:
        while not workers.stop.is_set():  # the caller no longer takes: give up
            try:
                handed.put((done, payload), timeout=0.1)
            except queue.Full:
                continue
            return

    def work() -> None:
        items: list[_T] = []
        try:
            for item in read():
                if workers.stop.is_set():
                    return
                items.append(item)
                if len(items) == chunk:
                    send(False, items)
                    items = []
        except BaseException as exc:  # handed to the caller after the items read before it
            send(False, items)
            send(True, exc)
        else:
            send(False, items)
            send(True, None)

    def taken() -> Iterator[_T]:
        while True:
            try:
                done, payload = handed.get(timeout=0.1)
            except queue.Empty:
                # ``closed``, not ``stop``: close() clears ``stop`` once its threads are
                # joined, which a poll between the two would miss, waiting forever.
                if workers.closed:
                    return  # closed: the sync is ending, nothing is read further
                idle()
                continue
            if done:
                if payload is not None:
                    raise payload
                return
            yield from payload

    workers.submit(work)
    return taken()


def _key(context: Context) -> tuple[tuple[str, t.Any], ...]:
    return tuple(sorted(context.items()))


class InOrder:
    """Requests taken in a given order (partitions, searches), up to two per worker fetched
    ahead of the one being taken; with no workers, each fetched when it is taken.

    ``fetch(context, stopped)`` reads one, as its records come (a worker keeps them until they
    are taken; in the caller's thread they are handed on as they arrive); it should end early
    once ``stopped()`` is true (the run failed or its output was closed), so that closing does
    not wait for it. ``workers``:
    the stream's (``AccessGovStream.start_workers``), so that closing also ends the waits of
    its requests; None: the caller's thread alone (``Concurrency.in_order`` at a limit of 1).
    """

    def __init__(self, fetch: Fetch, contexts: Sequence[Context], workers: Workers | None) -> None:
        self._fetch = fetch
        self._upcoming = collections.deque(contexts)
        self._in_flight: collections.deque[tuple[tuple[t.Any, ...], Future[list[Record]]]] = (
            collections.deque()
        )
        self._workers = workers
        self._closed = False
        self._ahead = 2 * workers.count if workers is not None else 0
        self._fill()

    @property
    def closed(self) -> bool:
        return self._closed or (self._workers is not None and self._workers.closed)

    def _fill(self) -> None:
        workers = self._workers
        while workers is not None and self._upcoming and len(self._in_flight) < self._ahead:
            context = self._upcoming.popleft()
            self._in_flight.append((_key(context), workers.submit(self._run, workers, context)))

    def _run(self, workers: Workers, context: Context) -> list[Record]:
        if workers.stop.is_set():
            return []
        return list(self._fetch(context, workers.stop.is_set))

    def ready(self, context: Context) -> bool:
        """Whether ``context`` is the next one and its records have all arrived (never,
        without workers: nothing is fetched ahead)."""
        return bool(self._in_flight) and (
            self._in_flight[0][0] == _key(context) and self._in_flight[0][1].done()
        )

    def take(self, context: Context) -> Iterable[Record]:
        """The records of ``context``; re-raises what its fetch raised."""
        if not self._in_flight or self._in_flight[0][0] != _key(context):
            # not fetched ahead (no workers, or asked out of order): fetched here
            return self._fetch(context, lambda: False)
        _, future = self._in_flight.popleft()
        self._fill()
        try:
            return future.result()
        finally:
            if not self._in_flight:
                self.close()

    def close(self) -> None:
        """Stop: cancel what has not started, end what runs, join the threads."""
        self._closed = True
        self._upcoming.clear()
        self._in_flight.clear()
        if self._workers is not None:
            self._workers.close()
