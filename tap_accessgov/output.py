"""How Singer messages leave the tap: the SDK's msgspec writer (several times faster than
simplejson), and a closed output reported as such."""

from __future__ import annotations

import typing as t

from singer_sdk.contrib.msgspec import MsgSpecWriter
from typing_extensions import override

if t.TYPE_CHECKING:
    from singer_sdk.singerlib import Message


class OutputClosedError(BaseException):
    """The process reading the tap's output (the loader) stopped reading.

    A BaseException, like KeyboardInterrupt, so that it goes through the SDK's ``except
    Exception`` handlers, which would log it as an "unhandled error" of whichever stream was
    writing, straight to the one line the command line prints.
    """


class OutputWriter(MsgSpecWriter):
    """The SDK's msgspec writer, which reports a closed output as OutputClosedError."""

    @override
    def write_message(self, message: Message) -> None:
        try:
            super().write_message(message)
        except BrokenPipeError:
            raise OutputClosedError from None
