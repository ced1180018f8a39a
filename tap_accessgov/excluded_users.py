"""The users of the automation-exclusion pages, collected once per run for the ``users`` stream.

Why a store of its own, and not a child stream: the service sends each excluded user whole
inside the exclusion entries, and there is no users endpoint to read them from. A child stream
would receive them through SDK contexts, and the SDK writes contexts into its log lines, its
state and its partition bookkeeping (personal data in the logs), and hands child contexts only
for parent records that pass the stream maps (a ``__filter__`` on ``automation_exclusions``
would lose users). So ``automation_exclusions`` puts every page's users here *before* its
records reach the maps, and ``users``, a top-level stream synced after it, reads them back.
When ``automation_exclusions`` is not selected, ``users`` drives the same page fetches itself:
either way each page is fetched once per run. Memory grows with the number of distinct users,
not with the number of exclusion entries.
"""

from __future__ import annotations

import typing as t

User = dict[str, t.Any]
PartitionKey = tuple[str, str]


class ExcludedUsers:
    """Distinct users by id, in the order they first appear (partition order, then page order),
    and which exclusion partitions have been read in full."""

    def __init__(self) -> None:
        self._users: list[User] = []
        self._ids: set[str] = set()
        self._read: set[PartitionKey] = set()

    def add(self, user: User) -> None:
        """Keep ``user`` unless a user with its id is already kept."""
        if (user_id := user.get("id")) and user_id not in self._ids:
            self._ids.add(user_id)
            self._users.append(user)

    def mark_read(self, partition: PartitionKey) -> None:
        """Every page of this (app id, entitlement id) has been read and its users added."""
        self._read.add(partition)

    def was_read(self, partition: PartitionKey) -> bool:
        return partition in self._read

    def __len__(self) -> int:
        return len(self._users)

    def since(self, start: int) -> list[User]:
        """The users added after the first ``start`` ones."""
        return self._users[start:]
