"""What a run keeps of a stream's records for the streams that read it (the apps' ids, each
app's entitlements and whether automation is on): noted as the records pass through the
stream's own request loop, and kept once a partition has been read in full, so that each page
is fetched once per run whether the stream is selected or not.

The store belongs to the stream that reads the records (an attribute of it, read through its
methods by the streams built with it: ``TapStream.reads``), never a module-level cache.
"""

from __future__ import annotations

import typing as t

if t.TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

Record = dict[str, t.Any]
K = t.TypeVar("K")
V = t.TypeVar("V")


class ReadOnce(t.Generic[K, V]):
    """What ``note`` says of each record, kept by partition once its last record was taken."""

    def __init__(self, note: Callable[[Record], V]) -> None:
        self._note = note
        self._kept: dict[K, list[V]] = {}

    def noting(self, key: K, records: Iterable[Record]) -> Iterator[Record]:
        """Every record of partition ``key``, each noted; kept once the last was taken (a
        partition left early, e.g. by ``--test``'s limit, is read again when asked for)."""
        noted = []
        for record in records:
            noted.append(self._note(record))
            yield record
        self._kept[key] = noted

    def kept(self, key: K) -> list[V] | None:
        """What was kept of partition ``key``; None when the run has not read it in full."""
        return self._kept.get(key)

    def of(self, key: K, read: Callable[[], Iterable[Record]]) -> list[V]:
        """What was kept of partition ``key``, which ``read`` reads now (its records not
        emitted) unless the run read it in full already."""
        if key not in self._kept:
            for _ in read():
                pass
        return self._kept.get(key, [])
