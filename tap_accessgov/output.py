"""How Singer messages leave the tap: the SDK's msgspec writer, flushed once per batch of
records instead of once per record."""

from __future__ import annotations

import sys

from singer_sdk.contrib.msgspec import MsgSpecWriter
from singer_sdk.singerlib.encoding.base import SingerMessageType
from singer_sdk.singerlib.encoding.simple import Message
from typing_extensions import override


class BufferedMsgSpecWriter(MsgSpecWriter):
    """The SDK's msgspec writer without its flush after every RECORD.

    The SDK (0.54) flushes stdout after each message: one write system call per record,
    and, in a pipeline, one wake-up of the reader (Meltano, the target) per record, which
    cost ~15% of the tap's time on a 50k-event feed into a pipe. Records now leave in
    buffer-sized chunks; every other message (SCHEMA, STATE, BATCH, ACTIVATE_VERSION) still
    flushes, so a STATE never waits behind buffered records and nothing stays behind at exit.
    """

    @override
    def write_message(self, message: Message) -> None:
        sys.stdout.buffer.write(self.format_message(message))
        if message.type != SingerMessageType.RECORD:
            sys.stdout.flush()
