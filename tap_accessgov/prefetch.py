"""HTTP work of a stream ahead of the SDK, in worker threads that end with the sync.

The SDK syncs partitions one after another and has no concurrency (sdk#183, sdk#2121); with
hundreds of entitlements or a years-long grant feed the run is one request latency after
another. Here the SDK still drives the sync (contexts, records, state, child streams, one
writer on stdout, all in the main thread); only HTTP work runs in ``Workers``, through the
stream's own request loop (same paging, retries, authenticator and request budget).

``Workers`` is the one pool both users share: the exclusions' ``PartitionPrefetcher`` (results
in partition order) and the grant feed's time windows (grant_feed_windows.py, results as they
come). Closing it sets the stream's stop event, which ends every wait in the request path at
once, cancels what has not started and joins the threads: none outlives its sync.
"""

from __future__ import annotations

import collections
import threading
import typing as t
from concurrent.futures import Future, ThreadPoolExecutor

Record = dict[str, t.Any]
Context = t.Mapping[str, t.Any]
_T = t.TypeVar("_T")


class Workers:
    """``count`` threads for one sync; ``stop`` is the stream's event that ends their waits."""

    def __init__(self, count: int, stop: threading.Event, name: str) -> None:
        stop.clear()
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


def _key(context: Context) -> tuple[tuple[str, t.Any], ...]:
    return tuple(sorted(context.items()))


class PartitionPrefetcher:
    """Keeps up to ``2 x workers`` partitions in flight ahead of the one being consumed.

    ``fetch(context, stopped)`` reads one partition; it should end early once ``stopped()``
    is true (the run failed or its output was closed), so that closing does not wait for it.
    """

    def __init__(
        self,
        fetch: t.Callable[[Context, t.Callable[[], bool]], list[Record]],
        partitions: t.Sequence[Context],
        workers: int,
        stop: threading.Event | None = None,
    ) -> None:
        """``stop``: the stream's ``stopping`` event, so that closing also ends the waits of
        its requests (see client.py)."""
        self._fetch = fetch
        self._upcoming = collections.deque(partitions)
        self._in_flight: collections.deque[tuple[tuple[t.Any, ...], Future[list[Record]]]] = (
            collections.deque()
        )
        self._window = 2 * workers
        self._workers = Workers(workers, stop or threading.Event(), "prefetch")
        self._fill()

    @property
    def closed(self) -> bool:
        return self._workers.closed

    def _fill(self) -> None:
        while self._upcoming and len(self._in_flight) < self._window:
            context = self._upcoming.popleft()
            self._in_flight.append((_key(context), self._workers.submit(self._run, context)))

    def _run(self, context: Context) -> list[Record]:
        if self._workers.stop.is_set():
            return []
        return self._fetch(context, self._workers.stop.is_set)

    def take(self, context: Context) -> list[Record]:
        """The records of ``context``; re-raises what its fetch raised."""
        if not self._in_flight or self._in_flight[0][0] != _key(context):
            return self._fetch(
                context, lambda: False
            )  # asked out of order: fetch it here, unchanged result
        _, future = self._in_flight.popleft()
        self._fill()
        try:
            return future.result()
        finally:
            if not self._in_flight:
                self.close()

    def close(self) -> None:
        """Stop: cancel what has not started, end what runs, join the threads."""
        self._upcoming.clear()
        self._in_flight.clear()
        self._workers.close()
