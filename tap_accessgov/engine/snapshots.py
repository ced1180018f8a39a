"""Full-table snapshots: how the warehouse tells today's exclusions, users (and every other
full-table stream) from those the service has since removed.

The service has no change feed for these objects, so every run re-reads them whole, and a row
removed on the service is simply absent from the next read. A loader cannot see an absence:
target-jsonl appends, target-postgres merges on the key. Singer's ACTIVATE_VERSION would let
target-postgres delete the rows of older versions, but singer-sdk 0.54 announces the version
*before* the records (a reader during or after a failed run sees a partly deleted table),
target-jsonl ignores it, and target-postgres needs ``add_record_metadata`` on every stream for
it (measured in docs/decisions.md, "Full-table snapshots"). So instead:

- every record of a full-table stream carries ``snapshotAt``, the run's start (the same instant
  for every stream of a run), which is also part of its primary key: a merging target keeps
  each run's copy, an appending one appends it;
- the ``full_table_snapshots`` stream (full_table_snapshots.py), synced last, writes one row per full-table stream that
  was synced in full in this run. The SDK stops a run at the first stream that fails, so a
  run that fails or is killed half-way writes none, and its partial rows are never part of a
  complete snapshot.

The models read, per stream, the rows of its latest complete snapshot, and keep its history
in a change log (transform/models/history, one line per stream), after which the earlier
copies are pruned (prune_raw_snapshots, transform/README.md). A new full-table stream (every stream
derives from ``SnapshotStream`` through ``TapStream``) gets all of this without code of its own.
"""

from __future__ import annotations

import copy
import datetime
import typing as t

from singer_sdk.streams import Stream
from typing_extensions import override

from tap_accessgov.schemas import SNAPSHOT_AT, SNAPSHOT_AT_PROPERTY

if t.TYPE_CHECKING:
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def snapshot_instant(tap: Tap) -> str:
    """The run's snapshot id: the tap's start (the SDK's ``initialized_at``, epoch ms) in RFC
    3339 with milliseconds, a form every warehouse stores exactly."""
    started = EPOCH + datetime.timedelta(milliseconds=tap.initialized_at)
    return started.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SnapshotStream(Stream):
    """A stream that, when it is full-table (no replication key), stamps every record with the
    run's ``snapshotAt`` and has it in its schema and primary key.

    The stamp is put on in ``post_process`` (the SDK's per-record hook): a stream that
    overrides it returns ``super().post_process(row, context)``."""

    def __init__(self, tap: Tap) -> None:
        super().__init__(tap)
        self.snapshot_at: str | None = None
        if not self.replication_key:
            self.snapshot_at = snapshot_instant(tap)
            schema = copy.deepcopy(self.schema)
            schema["properties"][SNAPSHOT_AT] = SNAPSHOT_AT_PROPERTY.to_dict()[SNAPSHOT_AT]
            schema["required"] = [*schema.get("required", []), SNAPSHOT_AT]
            # The streams declare both as class attributes (shadowing the SDK's properties,
            # one of them read-only), so the per-instance values go on the instance.
            self.schema = schema  # type: ignore[misc]
            self.primary_keys = (*self.primary_keys, SNAPSHOT_AT)

    @property
    def synced_in_full(self) -> bool:
        """Whether this run read every record of the stream (a record limit, ``--test``'s
        or the SDK's test suite's, may have ended it early)."""
        return True

    @property
    def snapshot_scope(self) -> str | None:
        """What this run's snapshot covers, for ``full_table_snapshots``' ``scope``: None (the
        default) for the stream's whole listing; a stream whose settings narrow what it reads
        names it, so the models need not guess it from the rows (they look alike either way)."""
        return None

    @override
    def post_process(
        self, row: dict[str, t.Any], context: Context | None = None
    ) -> dict[str, t.Any] | None:
        if self.snapshot_at is not None:
            row[SNAPSHOT_AT] = self.snapshot_at
        return row
