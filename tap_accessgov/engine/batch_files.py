"""BATCH files (``batch_config``), for every stream of the tap: which streams' records may go
in them (those no stream map, flattening or deselected property changes), the STATEs that
wait for the files of the records they count, and the files as the SDK writes them but for
two differences (tap.py, the sixth bend). docs/decisions.md, *Loaders*, says why and what
they measured."""

from __future__ import annotations

import typing as t
from functools import cached_property

from singer_sdk.batch import BaseBatcher, Batcher
from singer_sdk.mapper import SameRecordTransform
from singer_sdk.streams import Stream
from typing_extensions import override

from tap_accessgov.output import PlainJSONLinesBatcher, StateWriter, microsecond_timestamps

if t.TYPE_CHECKING:
    from singer_sdk import Tap
    from singer_sdk.helpers._batch import BaseBatchFileEncoding, BatchConfig  # types only
    from singer_sdk.helpers.types import Context


class BatchFilesStream(Stream):
    """A stream whose records go in BATCH files where that is safe (``get_batch_config``),
    its STATEs held until their records' file has left (``get_batches``)."""

    def __init__(self, tap: Tap) -> None:
        super().__init__(tap)
        self._states_of = tap  # its state writer is made after its streams (tap.py, bend 5)

    @cached_property
    def selects_every_property(self) -> bool:
        """Whether the catalog selects the stream and every one of its properties: what
        ``--discover`` gives, and what Meltano passes unless a user deselects a property."""
        return all(self.mask.values())

    @property
    def batch_unsafe(self) -> str | None:
        """Why this stream's records cannot leave in BATCH files, or None: the SDK writes
        those files from the records as ``post_process`` leaves them, and only RECORD
        messages pass through its stream maps, flattening and property selection, which a
        target does not apply to BATCH files either. So a stream that any of them would
        change, or that feeds child streams (their syncs write inside its files' span),
        keeps RECORD messages."""
        maps = self.stream_maps  # a rename (__alias__) or a removal is a map of its own class
        if len(maps) != 1 or type(maps[0]) is not SameRecordTransform:
            return "a stream map applies to it"
        if maps[0].flattening_enabled:
            return "flattening is on"
        if not self.selects_every_property:
            return "the catalog deselects a property"
        if self.child_streams or self.parent_stream_type:
            return "it has a parent or child streams"
        return None

    @override
    def get_batch_config(self, config: t.Mapping[str, t.Any]) -> BatchConfig | None:
        """``batch_config``'s BATCH files where this stream's records leave as the tap reads
        them; otherwise None, RECORD messages (``batch_unsafe``), said once (the SDK asks once
        a sync): what reaches the warehouse is the same either way."""
        batch = super().get_batch_config(config)
        if batch is not None and (why := self.batch_unsafe):
            self.logger.warning("%s: RECORD messages, not BATCH files: %s", self.name, why)
            return None
        return batch

    @override
    def get_batches(
        self, batch_config: BatchConfig, context: Context | None = None
    ) -> t.Iterable[tuple[BaseBatchFileEncoding, list[str]]]:
        """The stream's BATCH files (``batch_files``), with every STATE asked for while a
        file fills kept back until the file's BATCH message has left (StateWriter.held): a
        window completes, and its STATE is asked for, while its last records still wait in
        the open file, and a run killed then must read them again, not skip them."""
        writer = t.cast(StateWriter, self._states_of.state_writer)  # tap.py, bend 5
        with writer.held():
            for batch in self.batch_files(batch_config, context):
                yield batch  # the SDK writes its BATCH message (and asks for a STATE)
                writer.release()

    def batch_files(
        self, batch_config: BatchConfig, context: Context | None
    ) -> t.Iterator[tuple[BaseBatchFileEncoding, list[str]]]:
        """The SDK's get_batches, step for step, with two differences: JSON lines without
        compression are written by the tap (output.PlainJSONLinesBatcher: the SDK gzips them
        all the same), and date-time values are cut to microseconds as a target parses them
        from RECORD messages (output.microsecond_timestamps)."""
        encoding = batch_config.encoding
        batcher: BaseBatcher = (
            PlainJSONLinesBatcher(self.tap_name, self.name, batch_config)
            if encoding.format == "jsonl" and encoding.compression != "gzip"
            else Batcher(self.tap_name, self.name, batch_config)
        )
        # The records the SDK's own get_batches reads, the same way: a private with no
        # public twin (the stream's records as the SDK syncs them, without RECORD messages).
        records = self._sync_records(context, write_messages=False)
        for manifest in batcher.get_batches(map(microsecond_timestamps(self.schema), records)):
            yield encoding, manifest
