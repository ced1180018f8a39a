"""``users``: the users found in automation exclusions, one record per user id per run.

The service has no users endpoint: it sends each excluded user whole inside its exclusion
entries, and automation_exclusions.py says why the users travel through the run's
``ExcludedUsers`` and not through SDK contexts (personal data in logs and state).
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.streams.automation_exclusions import (
    AutomationExclusionsStream,
    partition_key,
)
from tap_accessgov.streams.base import TapStream

if t.TYPE_CHECKING:
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.request_budget import RequestBudget


class UsersStream(TapStream):
    """Users found in automation exclusions, one record per user id per run.

    A top-level stream synced after ``automation_exclusions``: it emits the users that stream
    collected, and reads the exclusion pages not yet read in this run itself (all of them when
    ``automation_exclusions`` is not selected), through that stream's own request loop. See
    automation_exclusions.py for why no user object travels in an SDK context.
    """

    name = "users"
    primary_keys = ("id",)
    reads = {"exclusions": AutomationExclusionsStream}
    schema = schemas.USER

    def __init__(self, tap: Tap, *, exclusions: AutomationExclusionsStream) -> None:
        super().__init__(tap)
        self.exclusions = exclusions

    @property
    @override
    def request_budget(self) -> RequestBudget:
        return self.exclusions.request_budget

    @override
    def stop_workers(self) -> None:
        """The exclusion fetches this stream drives end with its sync (see TapStream.sync)."""
        self.exclusions.stop_workers()

    @override
    def records(self, context: Context | None) -> t.Iterator[dict[str, t.Any]]:
        exclusions = self.exclusions
        excluded_users = exclusions.excluded_users
        emitted = 0
        for partition in exclusions.partitions:
            if not excluded_users.was_read(partition_key(partition)):
                for _ in exclusions.records(partition):
                    pass  # the exclusion records are not ours to emit; their users are
            users = excluded_users.since(emitted)
            emitted += len(users)
            yield from users
