"""``users``: the directory (``GET /api/v1/users``), then the users of the automation
exclusions it did not list, one record per user id per run.

The users of the exclusion entries are a subset of the directory on the service, but the
design promises them whatever the directory lists (a user deleted since, or a key that may
not read the directory: ``read_directory: false`` keeps ``users`` to them).
automation_exclusions.py says why those users travel through the run's ``ExcludedUsers`` and
not through SDK contexts (personal data in logs and state).
"""

from __future__ import annotations

import typing as t

from singer_sdk.exceptions import FatalAPIError
from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.paging import QueryPaging, viewed_objects
from tap_accessgov.streams.automation_exclusions import (
    AutomationExclusionsStream,
    partition_key,
)
from tap_accessgov.streams.base import AccessGovStream

if t.TYPE_CHECKING:
    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.streams.base import ApiConnection

User = dict[str, t.Any]


class UsersStream(QueryPaging, AccessGovStream):
    """The directory, then the users ``automation_exclusions`` collected that it did not list.

    A top-level stream synced after ``automation_exclusions``: it reads the exclusion pages not
    yet read in this run itself (all of them when ``automation_exclusions`` is not selected),
    through that stream's own request loop.
    """

    name = "users"
    path = "/api/v1/users"
    primary_keys = ("id",)
    reads = {"exclusions": AutomationExclusionsStream}
    schema = schemas.USER

    def __init__(
        self, tap: Tap, *, connection: ApiConnection, exclusions: AutomationExclusionsStream
    ) -> None:
        super().__init__(tap, connection=connection)
        self.exclusions = exclusions

    @override
    def stop_workers(self) -> None:
        """The exclusion fetches this stream drives end with its sync (see TapStream.sync)."""
        super().stop_workers()
        self.exclusions.stop_workers()

    @override
    def validate_response(self, response: requests.Response) -> None:
        """A key whose roles may not list users answers 403: one line naming the setting
        that does without the directory."""
        if response.status_code == 403:
            msg = (
                f"{self.response_error_message(response)}. The API key may not read the "
                "directory: give it a role that may list users, or set read_directory: false "
                "to keep users to the users of the automation exclusions."
            )
            raise FatalAPIError(msg)
        super().validate_response(response)

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[User]:
        """The ``user`` of each UserView; one without an id is skipped, with a warning."""
        return viewed_objects(response, "user", self.logger)

    @override
    def records(self, context: Context | None) -> t.Iterator[User]:
        listed: set[str] = set()
        if self.config["read_directory"]:
            for user in self.request_records(None):
                listed.add(user["id"])
                yield user
        for user in self._excluded_users():
            if user["id"] not in listed:
                yield user

    def _excluded_users(self) -> t.Iterator[User]:
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
