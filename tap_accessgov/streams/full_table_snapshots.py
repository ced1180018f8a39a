"""``full_table_snapshots``: the "snapshot complete" signal, one row per full-table stream
synced in full in this run (snapshots.py says why and how the models read it)."""

from __future__ import annotations

import datetime
import typing as t

from typing_extensions import override

from tap_accessgov.engine.batch_files import BatchFilesStream
from tap_accessgov.schemas import FULL_TABLE_SNAPSHOT, SNAPSHOT_AT

if t.TYPE_CHECKING:
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.snapshots import SnapshotStream


class FullTableSnapshotsStream(BatchFilesStream):
    """One row per full-table stream synced in full in this run; synced after all others
    (the tap's ``streams`` puts it last).

    Written only when every stream before it succeeded (the SDK stops at the first failure),
    so its rows are the "snapshot complete" signal the models read.
    """

    name = "full_table_snapshots"
    primary_keys = ("stream", SNAPSHOT_AT)
    schema = FULL_TABLE_SNAPSHOT

    def __init__(self, tap: Tap, *, snapshot_streams: t.Sequence[SnapshotStream]) -> None:
        super().__init__(tap)
        self.snapshot_streams = snapshot_streams

    @override
    def get_records(self, context: Context | None) -> t.Iterable[dict[str, t.Any]]:
        completed = datetime.datetime.now(tz=datetime.UTC).isoformat(timespec="milliseconds")
        for stream in self.snapshot_streams:
            # With a record limit (--test, the SDK's test suite) only the streams that ended
            # before it were read in full.
            if stream.snapshot_at is not None and stream.selected and stream.synced_in_full:
                yield {
                    "stream": stream.name,
                    SNAPSHOT_AT: stream.snapshot_at,
                    "completedAt": completed.replace("+00:00", "Z"),
                    "scope": stream.snapshot_scope,
                }
