"""How far a sync is: the running total of each stream in words, beside the SDK's METRIC lines."""

from __future__ import annotations

import logging
import time
import typing as t

from singer_sdk import metrics
from singer_sdk.streams import Stream
from typing_extensions import override

if t.TYPE_CHECKING:
    from types import TracebackType


class ProgressCounter(metrics.Counter):
    """The SDK's record counter, plus a plain progress line with the stream's running total.

    The SDK's METRIC line counts only the records since its previous line and Meltano's
    console drops its stream tag; on a long run a data engineer wants "how far" in words.
    """

    def __init__(
        self, stream: str, logger: logging.Logger, log_interval: float, endpoint: str | None
    ) -> None:
        tags: dict[str, t.Any] = {metrics.Tag.STREAM: stream}
        if endpoint:
            tags[metrics.Tag.ENDPOINT] = endpoint
        super().__init__(metrics.Metric.RECORD_COUNT, tags, log_interval=log_interval)
        self.stream = stream
        self.progress_logger = logger
        self.total = 0
        self._started = self._last_progress = time.monotonic()

    @override
    def increment(self, value: int = 1) -> None:
        super().increment(value)
        self.total += value
        now = time.monotonic()
        if now - self._last_progress >= self.log_interval:
            self._last_progress = now
            self.progress_logger.info(
                "%s: %s records so far (%.0f s)",
                self.stream,
                f"{self.total:,}",
                now - self._started,
            )

    @override
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        super().__exit__(exc_type, exc_val, exc_tb)
        if exc_type is None:
            self.progress_logger.info(
                "%s: %s records in %.1f s",
                self.stream,
                f"{self.total:,}",
                time.monotonic() - self._started,
            )


class ProgressReportingStream(Stream):
    """A stream whose record counter is a ProgressCounter, through the SDK's public hook."""

    @override
    def get_record_counter(
        self, *, endpoint: str | None = None, log_interval: float = metrics.DEFAULT_LOG_INTERVAL
    ) -> metrics.Counter:
        return ProgressCounter(self.name, self.logger, log_interval, endpoint)
