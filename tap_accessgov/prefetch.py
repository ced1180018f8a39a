"""Fetch the partitions of a stream ahead of the SDK, a few at a time, in worker threads.

The SDK syncs partitions one after another and has no concurrency (sdk#183, sdk#2121); with
hundreds of entitlements the run is one request latency after another. Here the SDK still
drives the sync (contexts, records, state, child streams, one writer on stdout); only the
HTTP work of the next few partitions runs ahead in threads, through the stream's own request
loop (same paging, retries and authenticator). Results are handed back in partition order.
"""

from __future__ import annotations

import collections
import typing as t
from concurrent.futures import Future, ThreadPoolExecutor

Record = dict[str, t.Any]
Context = t.Mapping[str, t.Any]


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
    ) -> None:
        self._fetch = fetch
        self._upcoming = collections.deque(partitions)
        self._in_flight: collections.deque[tuple[tuple[t.Any, ...], Future[list[Record]]]] = (
            collections.deque()
        )
        self._window = 2 * workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prefetch")
        self.closed = False
        self._fill()

    def _fill(self) -> None:
        while self._upcoming and len(self._in_flight) < self._window:
            context = self._upcoming.popleft()
            self._in_flight.append((_key(context), self._executor.submit(self._run, context)))

    def _run(self, context: Context) -> list[Record]:
        if self.closed:
            return []
        return self._fetch(context, lambda: self.closed)

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
        """Stop: cancel what has not started, let running fetches end."""
        self.closed = True
        self._upcoming.clear()
        for _, future in self._in_flight:
            future.cancel()
        self._in_flight.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)
