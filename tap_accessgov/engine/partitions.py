"""Partitioned streams: their partitions listed once per run, and the next partitions'
records fetched ahead (concurrency.py: ``Concurrency.in_order``), consumed in partition order.

The app entitlements (one partition per app) and the automation exclusions (one per app
entitlement) are such streams: with hundreds of partitions, one after another is one request
latency after another. Their contexts hold ids only (the SDK writes them into logs and state).
"""

from __future__ import annotations

import typing as t

from singer_sdk.exceptions import FatalAPIError
from typing_extensions import override

from tap_accessgov.engine.stream import AccessGovStream

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context as SdkContext

    from tap_accessgov.engine.concurrency import InOrder

Record = dict[str, t.Any]
Context = t.Mapping[str, t.Any]


class PartitionNotFoundError(FatalAPIError):
    """A partition (an app, an app entitlement) the service does not know (404)."""


class ConcurrentPartitionsStream(AccessGovStream):
    """A partitioned stream whose partitions (``list_partitions``) are listed once per run and
    whose next partitions are fetched ahead as the run's ``Concurrency`` allows (at a limit of
    1, one after another), through its own request loop.

    A partition the service answers with 404 (deleted since it was listed, or a mistyped
    setting) is a warning naming it; the others are still extracted.
    """

    def __init__(self, tap: Tap, **kwargs: t.Any) -> None:
        super().__init__(tap, **kwargs)
        # Full-table only (an old state's entries: TapAccessGov.load_state): one state for
        # the stream, none per partition. Per partition the SDK writes an entry holding only
        # its context into every STATE message, and finds it by a scan of the list: the
        # small test tenant's final state was 140 KB (a real tenant's grows with its
        # entitlements), its STATE messages 42% of the run's output.
        self.state_partitioning_keys = ()
        self._partitions: list[dict[str, t.Any]] | None = None
        self._in_order: InOrder | None = None
        self.read_a_partition = False  # whether a partition was read to its end this run

    @property
    @override
    def partitions(self) -> list[dict[str, t.Any]]:
        """The SDK's contexts of this stream: ``list_partitions``, asked once per run."""
        if self._partitions is None:
            self._partitions = self.list_partitions()
        return self._partitions

    def list_partitions(self) -> list[dict[str, t.Any]]:
        """The stream's partitions, named like the record fields (``post_process`` fills
        them in where the service left them out)."""
        raise NotImplementedError

    @override
    def post_process(self, row: Record, context: SdkContext | None = None) -> Record | None:
        """The partition's ids in a record the service sent without them (its primary key):
        the SDK fills them from a stream's state partition, which these streams do not keep."""
        missing = {key: value for key, value in (context or {}).items() if key not in row}
        return super().post_process({**row, **missing} if missing else row, context)

    @override
    def records(self, context: SdkContext | None) -> t.Iterable[Record]:
        """The records of one partition (``partition_records``)."""
        return self.partition_records(context) if context else ()

    def describe(self, context: Context) -> str:
        """How a partition is named in messages, in the stream's words (ids only: no personal
        data): "app <id>", "resource type <id> of app <id>"."""
        raise NotImplementedError

    @override
    def validate_response(self, response: requests.Response) -> None:
        if response.status_code == 404 and self.names_a_partition(response):
            raise PartitionNotFoundError(self.response_error_message(response))
        super().validate_response(response)

    @override
    def names_a_partition(self, response: requests.Response) -> bool:
        """Its requests are its partitions' (a stream that lists them with a request of its
        own says which are not)."""
        return True

    def partition_records(self, context: Context) -> t.Iterator[Record]:
        """The records of one partition, in partition order whatever the concurrency."""
        try:
            yield from self._in_order_of_run().take(context)
            self.read_a_partition = True
        except PartitionNotFoundError as exc:
            self.partition_not_found(context, exc)
        except BaseException:
            self.stop_workers()
            raise

    def partition_not_found(self, context: Context, exc: PartitionNotFoundError) -> None:
        """A partition the service answered 404: a warning naming it; the others go on."""
        self.logger.warning(
            "Skipping %s: the service does not know it (%s)", self.describe(context), exc
        )

    def read_partition(
        self, context: Context, stopped: t.Callable[[], bool] = lambda: False
    ) -> t.Iterator[Record]:
        """Every record of one partition; ends early once ``stopped()`` is true."""
        for record in self.request_records(dict(context)):
            if stopped():
                return
            yield record

    def fetch_ahead(self, contexts: Sequence[Context], threads: int) -> None:
        """Start fetching ``contexts`` in ``threads`` threads now, before ``partition_records``
        asks for them in that order: for a stream that reads some of this one's partitions
        (``users``: those the run has not read) while its own requests follow each other (the
        directory's pages) in a thread of the run's limit that it keeps for them. With no
        thread to give, each is fetched when asked. What an earlier read left fetching (a
        record limit ended it) ends as the new threads start (``start_workers``)."""
        self._in_order = self.concurrency.in_order(
            self, "prefetch", contexts, self.read_partition, threads=threads
        )

    def fetched(self, context: Context) -> bool:
        """Whether ``partition_records(context)`` answers without waiting: it is the next
        partition fetched ahead, and its records have arrived."""
        in_order = self._in_order
        return in_order is not None and not in_order.closed and in_order.ready(context)

    def _in_order_of_run(self) -> InOrder:
        """The partitions being fetched ahead and taken in order: those ``fetch_ahead`` named,
        or else every partition, in the order the SDK asks for them (the run's
        ``Concurrency``)."""
        if self._in_order is None or self._in_order.closed:
            self._in_order = self.concurrency.in_order(
                self, "prefetch", self.partitions, self.read_partition
            )
        return self._in_order
