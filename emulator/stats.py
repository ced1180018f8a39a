"""Request counters the tests and benchmarks read to check client behaviour."""

from __future__ import annotations

import copy
import threading
from collections import Counter
from typing import Any


class Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._by: dict[str, Counter[str]] = {}

    def count(self, name: str, key: str | None = None) -> None:
        """Bump counter `name`, and `name`'s breakdown entry `key` if given."""
        with self._lock:
            self._counts[name] += 1
            if key is not None:
                self._by.setdefault(name, Counter())[key] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            by = copy.deepcopy(self._by)
            return {
                "token_requests": self._counts["token_requests"],
                "token_requests_by_method": dict(by.get("token_method", {})),
                "token_failures": self._counts["token_failures"],
                "api_requests": self._counts["api_requests"],
                "api_requests_by_path": dict(by.get("api_requests", {})),
                "unauthorized": self._counts["unauthorized"],
                "faults_injected": self._counts["faults_injected"],
                "faults_by_kind": dict(by.get("faults_injected", {})),
                "throttled": self._counts["throttled"],
            }

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._by.clear()
