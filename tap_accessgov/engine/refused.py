"""Streams of operations the service may refuse as a whole: an older release lacks some (404),
and a client may lack the permission for one (403). Such a stream says so once, in one line
naming the operation, delivers nothing more this run, and is no full snapshot (the models keep
its last complete one); the run goes on with the other streams.

A 404 of a request that names a partition (an app, an app entitlement) says the service does
not know that partition (partitions.py skips it and goes on), once a partition has been read:
a release that lacks a per-app operation answers 404 for every app, so a 404 before any
partition was read refuses the stream (an app deleted between the listing and its read costs
the stream this run, said in the warning; the next run reads it).
"""

from __future__ import annotations

import typing as t

from singer_sdk.exceptions import FatalAPIError
from typing_extensions import override

from tap_accessgov.engine.partitions import ConcurrentPartitionsStream, PartitionNotFoundError
from tap_accessgov.engine.stream import AccessGovStream

if t.TYPE_CHECKING:
    import requests
    from singer_sdk.helpers.types import Context

Record = dict[str, t.Any]


class OperationRefusedError(FatalAPIError):
    """The service refuses a stream's operation itself (403; 404 outside a partition)."""


class RefusableStream(AccessGovStream):
    """A stream whose operation the service may refuse (module docstring)."""

    refused = False  # whether the service refused this run's stream
    refusal: OperationRefusedError | None = None  # how

    @override
    def validate_response(self, response: requests.Response) -> None:
        status = response.status_code
        if status == 403 or (status == 404 and not self.names_a_partition(response)):
            raise OperationRefusedError(self.response_error_message(response))
        super().validate_response(response)

    @property
    @override
    def partitions(self) -> list[dict[str, t.Any]]:
        """The SDK's contexts (none: one sync without a partition); none once the service
        refused the operation that lists them (the attribute types of ``attribute_values``,
        the resource types of ``app_resources``)."""
        if self.refused:
            return []
        try:
            return super().partitions or []
        except OperationRefusedError as exc:
            self.refuse(exc)
            return []

    @override
    def get_records(self, context: Context | None) -> t.Iterable[Record]:
        if self.refused:
            return
        try:
            yield from super().get_records(context)
        except OperationRefusedError as exc:
            self.refuse(exc)

    def refuse(self, refusal: OperationRefusedError) -> None:
        """Say once that the service refused this stream, which reads nothing more."""
        self.refused, self.refusal = True, refusal
        self.stop_workers()
        self.logger.warning(
            "Skipping the stream %s this run: %s (the other streams are still extracted)",
            self.name,
            refusal,
        )

    @property
    @override
    def synced_in_full(self) -> bool:
        return not self.refused and super().synced_in_full


class RefusablePartitionsStream(RefusableStream, ConcurrentPartitionsStream):
    """A partitioned stream whose operation the service may refuse: a 404 before any of its
    partitions was read refuses it (module docstring)."""

    @override
    def partition_not_found(self, context: Context, exc: PartitionNotFoundError) -> None:
        if not self.read_a_partition:
            raise OperationRefusedError(f"{exc}, before any other answered") from None
        super().partition_not_found(context, exc)
