"""Partitioned streams: their partitions listed once per run, and the next partitions'
records fetched ahead in the sync's worker threads (workers.py), consumed in partition order.

The app entitlements (one partition per app) and the automation exclusions (one per app
entitlement) are such streams: with hundreds of partitions, one after another is one request
latency after another. Their contexts hold ids only (the SDK writes them into logs and state).
"""

from __future__ import annotations

import collections
import typing as t

from singer_sdk.exceptions import FatalAPIError
from typing_extensions import override

from tap_accessgov.engine.stream import AccessGovStream

if t.TYPE_CHECKING:
    from concurrent.futures import Future

    import requests
    from singer_sdk.helpers.types import Context as SdkContext

    from tap_accessgov.engine.workers import Workers

Record = dict[str, t.Any]
Context = t.Mapping[str, t.Any]


def _key(context: Context) -> tuple[tuple[str, t.Any], ...]:
    return tuple(sorted(context.items()))


class PartitionPrefetcher:
    """Keeps up to two partitions per worker in flight ahead of the one being consumed.

    ``fetch(context, stopped)`` reads one partition; it should end early once ``stopped()``
    is true (the run failed or its output was closed), so that closing does not wait for it.
    """

    def __init__(
        self,
        fetch: t.Callable[[Context, t.Callable[[], bool]], list[Record]],
        partitions: t.Sequence[Context],
        workers: Workers,
    ) -> None:
        """``workers``: the stream's (``AccessGovStream.start_workers``), so that closing
        also ends the waits of its requests."""
        self._fetch = fetch
        self._upcoming = collections.deque(partitions)
        self._in_flight: collections.deque[tuple[tuple[t.Any, ...], Future[list[Record]]]] = (
            collections.deque()
        )
        self._window = 2 * workers.count
        self._workers = workers
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

    def ready(self, context: Context) -> bool:
        """Whether ``context`` is the next partition and its records have all arrived."""
        return bool(self._in_flight) and (
            self._in_flight[0][0] == _key(context) and self._in_flight[0][1].done()
        )

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


class PartitionNotFoundError(FatalAPIError):
    """A partition (an app, an app entitlement) the service does not know (404)."""


class ConcurrentPartitionsStream(AccessGovStream):
    """A partitioned stream whose partitions (``list_partitions``) are listed once per run and
    whose next partitions are fetched ahead in worker threads (``max_concurrency`` of them;
    1 = one after another), through its own request loop.

    A partition the service answers with 404 (deleted since it was listed, or a mistyped
    setting) is a warning naming it; the others are still extracted.
    """

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, **kwargs)
        self._partitions: list[dict[str, t.Any]] | None = None
        self._prefetcher: PartitionPrefetcher | None = None

    @property
    @override
    def partitions(self) -> list[dict[str, t.Any]]:
        """The SDK's contexts of this stream: ``list_partitions``, asked once per run."""
        if self._partitions is None:
            self._partitions = self.list_partitions()
        return self._partitions

    def list_partitions(self) -> list[dict[str, t.Any]]:
        """The stream's partitions, named like the record fields the SDK fills from them."""
        raise NotImplementedError

    @override
    def records(self, context: SdkContext | None) -> t.Iterable[Record]:
        """The records of one partition (``partition_records``)."""
        return self.partition_records(context) if context else ()

    def describe(self, context: Context) -> str:
        """How a partition is named in messages (ids only: no personal data)."""
        return ", ".join(f"{key} {value}" for key, value in context.items())

    @override
    def validate_response(self, response: requests.Response) -> None:
        if response.status_code == 404:
            raise PartitionNotFoundError(self.response_error_message(response))
        super().validate_response(response)

    def partition_records(self, context: Context) -> t.Iterator[Record]:
        """The records of one partition, in partition order whatever the concurrency."""
        try:
            if (workers := int(self.config["max_concurrency"])) > 1:
                yield from self._prefetcher_from(context, workers).take(context)
            else:
                yield from self.read_partition(context)
        except PartitionNotFoundError as exc:
            self.logger.warning(
                "Skipping %s: the service does not know it (%s)", self.describe(context), exc
            )
        except BaseException:
            self.stop_workers()
            raise

    def read_partition(
        self, context: Context, stopped: t.Callable[[], bool] = lambda: False
    ) -> t.Iterator[Record]:
        """Every record of one partition; ends early once ``stopped()`` is true."""
        for record in self.request_records(dict(context)):
            if stopped():
                return
            yield record

    def fetch_ahead(self, context: Context, workers: int) -> None:
        """Start fetching ``context`` and the partitions after it in ``workers`` threads now,
        before ``partition_records`` asks for them: for a stream that reads this one's
        partitions while its own requests are one after another (``users`` reading the
        directory), and keeps a thread of the run's budget for them."""
        if workers > 0:
            self._prefetcher_from(context, workers)

    def fetched(self, context: Context) -> bool:
        """Whether ``partition_records(context)`` answers without waiting: it is the next
        partition fetched ahead, and its records have arrived."""
        prefetcher = self._prefetcher
        return prefetcher is not None and not prefetcher.closed and prefetcher.ready(context)

    def _prefetcher_from(self, context: Context, workers: int) -> PartitionPrefetcher:
        if self._prefetcher is None or self._prefetcher.closed:
            partitions = self.partitions
            start = partitions.index(dict(context)) if dict(context) in partitions else 0
            self._prefetcher = PartitionPrefetcher(
                lambda ctx, stopped: list(self.read_partition(ctx, stopped)),
                partitions[start:],
                self.start_workers(workers, "prefetch"),
            )
        return self._prefetcher
