"""Worker threads of one sync: HTTP work of a stream ahead of the SDK, in threads that end with
the sync that started them.

The SDK syncs partitions one after another and has no concurrency (sdk#183, sdk#2121); with
hundreds of entitlements or a years-long grant feed the run is one request latency after
another. Here the SDK still drives the sync (contexts, records, state, child streams, one
writer on stdout, all in the main thread); only HTTP work runs in ``Workers``, through the
stream's own request loop (same paging, retries, authenticator and request budget). A stream
starts them with ``AccessGovStream.start_workers`` and the base ends them when its sync ends
(``TapStream.sync``): the partitions fetched ahead (partitions.py), the grant feed's time
windows (engine/time_ranges.py) and the directory's pages read ahead (``read_ahead``, for
``users``) share them. Closing them sets the stream's stop event, which
ends every wait in the request path at once, cancels what has not started and joins the
threads: none outlives its sync.
"""

from __future__ import annotations

import queue
import threading
import typing as t
from concurrent.futures import Future, ThreadPoolExecutor

if t.TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

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
