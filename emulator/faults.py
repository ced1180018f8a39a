"""Failures on demand: the transport and gateway errors a client must survive.

Rules are consumed in the order they were added; random faults (seeded, so a run repeats)
apply when no rule matches. A faulted request is answered before any work is done, so a
retry of it returns exactly what the first attempt would have.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass

# What a client must survive by retrying ...
TRANSIENT = ("429", "500", "502", "503", "504", "drop", "slow", "malformed", "truncated")
# ... and what it must not retry forever (401: retried once with a new token).
KINDS = (*TRANSIENT, "401", "403", "400")


@dataclass(frozen=True)
class Fault:
    kind: str
    retry_after: str = "1"  # 429 only: seconds, or an HTTP-date
    delay: float = 5.0  # "slow" only: seconds before answering normally


@dataclass
class _Rule:
    fault: Fault
    path: str | None
    times: int

    def applies_to(self, path: str) -> bool:
        if self.path is None:
            return path.startswith("/api/")
        prefix = self.path.rstrip("/")
        return path == prefix or path.startswith(prefix + "/")


class Faults:
    """Thread-safe fault plan shared by the server threads and the controlling test."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._rate = 0.0
        self._kinds: tuple[str, ...] = ()
        self._rng = random.Random(0)
        self._random_delay = 5.0
        self._random_retry_after = "1"

    def add(
        self,
        kind: str,
        path: str | None = None,
        times: int = 1,
        retry_after: str | int | None = None,
        delay: float = 5.0,
    ) -> None:
        """The next `times` requests to `path` (any /api/ path if None) get `kind`."""
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {KINDS}")
        if times < 1:
            raise ValueError("times must be >= 1")
        fault = Fault(kind, "1" if retry_after is None else str(retry_after), float(delay))
        with self._lock:
            self._rules.append(_Rule(fault, path, times))

    def random(
        self,
        rate: float,
        kinds: Iterable[str] = TRANSIENT,
        seed: int = 0,
        delay: float = 5.0,
        retry_after: str | int = 1,
    ) -> None:
        """Give each /api/ request probability `rate` of a fault drawn from `kinds` (a 429
        asks to wait `retry_after`, a slow answer takes `delay` seconds)."""
        chosen = tuple(kinds)
        unknown = [k for k in chosen if k not in KINDS]
        if unknown or not chosen or not 0.0 <= rate <= 1.0:
            raise ValueError(f"need 0 <= rate <= 1 and kinds from {KINDS}")
        with self._lock:
            self._rate, self._kinds, self._rng = rate, chosen, random.Random(seed)
            self._random_delay = float(delay)
            self._random_retry_after = str(retry_after)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self._rate, self._kinds = 0.0, ()

    def take(self, path: str) -> Fault | None:
        """The fault to inject into this request, if any (consumes one use of a rule)."""
        with self._lock:
            for rule in self._rules:
                if rule.applies_to(path):
                    rule.times -= 1
                    if rule.times == 0:
                        self._rules.remove(rule)
                    return rule.fault
            if self._rate and path.startswith("/api/") and self._rng.random() < self._rate:
                kind = self._rng.choice(self._kinds)
                return Fault(kind, self._random_retry_after, self._random_delay)
        return None
