"""How many requests the run has in flight: one budget for every stream and worker thread.

A real tenant answers 429 when a client asks too much at once, and publishes no limit. The
budget starts at ``max_concurrency`` requests in flight and adapts like TCP's congestion
control (additive increase, multiplicative decrease): a 429 halves the limit (once per round
of requests that saw the old limit, so a burst of 429s is one slow-down, not eight) and pauses
every new attempt until the answer's Retry-After has passed; the limit then grows by one
request after each quiet interval, which doubles each time the service pushes back, so a
service that allows only two requests at a time is probed rarely. Every wait here ends at
once when the calling sync stops (``stop`` is set), so a failed run never sits in a retry.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import typing as t

RAISE_AFTER = 5.0  # seconds without a 429 before the limit grows by one request
RAISE_AFTER_CAP = 80.0
_POLL = 0.1  # seconds: how often a waiting thread looks at its stop event


class SyncStopped(Exception):  # a signal, not an error the user sees
    """The sync that made this request is stopping: end the request without retrying."""


class RequestBudget:
    """Requests in flight, shared by the whole run (the tap owns one, like its authenticator)."""

    def __init__(self, maximum: int, logger: logging.Logger) -> None:
        self.maximum = maximum
        self.limit = maximum
        self.lowest = maximum
        self.slowdowns = 0
        self._logger = logger
        self._in_flight = 0
        self._round = 0  # bumped at each slow-down: which limit an attempt was started under
        self._paused_until = 0.0
        self._raise_after = RAISE_AFTER
        self._last_change = time.monotonic()
        self._successes = 0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def attempt(self, stop: threading.Event) -> t.Iterator[int]:
        """Hold one of the requests in flight for one HTTP attempt; yields its round, which
        ``succeeded``/``throttled`` take back."""
        with self._cond:
            while True:
                if stop.is_set():
                    raise SyncStopped
                paused = self._paused_until - time.monotonic()
                if paused <= 0 and self._in_flight < self.limit:
                    break
                self._cond.wait(min(_POLL, paused) if paused > 0 else _POLL)
            self._in_flight += 1
            started_in = self._round
        try:
            yield started_in
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify()

    def sleep(self, seconds: float, stop: threading.Event) -> None:
        """A retry's wait, cut short (SyncStopped) when the sync stops."""
        if stop.wait(seconds):
            raise SyncStopped

    def succeeded(self) -> None:
        """Additive increase: one more request in flight after a quiet interval."""
        with self._cond:
            self._successes += 1
            now = time.monotonic()
            if (
                self.limit < self.maximum
                and self._successes >= self.limit
                and now - self._last_change >= self._raise_after
            ):
                self.limit += 1
                self._successes = 0
                self._last_change = now
                self._cond.notify()

    def throttled(self, started_in: int, retry_after: float | None) -> None:
        """Multiplicative decrease on a 429, and a pause for everyone until Retry-After."""
        with self._cond:
            now = time.monotonic()
            if retry_after:
                self._paused_until = max(self._paused_until, now + retry_after)
            if started_in != self._round:
                return  # started before the last slow-down: that one already counted it
            self._round += 1
            self.slowdowns += 1
            previous, self.limit = self.limit, max(1, (self.limit + 1) // 2)
            self.lowest = min(self.lowest, self.limit)
            self._successes = 0
            self._last_change = now
            self._raise_after = min(2 * self._raise_after, RAISE_AFTER_CAP)
        if self.slowdowns == 1:
            self._logger.warning(
                "The service answered 429 (too many requests): slowing down from %d to %d "
                "requests in flight, and back up slowly while the service keeps up",
                previous,
                self.limit,
            )
        else:
            self._logger.debug("Requests in flight: %d -> %d after a 429", previous, self.limit)

    def report(self) -> None:
        """At the end of a run, successful or not: one line saying how the service slowed it
        down, if it did (the lowest number in flight is the service's real limit)."""
        if self.slowdowns:
            self._logger.info(
                "The service asked the tap to slow down %d time(s): requests in flight went "
                "down to %d (of %d) and ended at %d",
                self.slowdowns,
                self.lowest,
                self.maximum,
                self.limit,
            )
