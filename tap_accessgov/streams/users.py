"""``users``: the directory (``GET /api/v1/users``), then the users of the automation
exclusions it did not list, one record per user id per run.

The users of the exclusion entries are a subset of the directory on the service, but the
design promises them whatever the directory lists (a user deleted since, or a key that may
not read the directory: ``read_directory: false`` keeps ``users`` to them).
automation_exclusions.py says why those users travel through the run's ``ExcludedUsers`` and
not through SDK contexts (personal data in logs and state).
"""

from __future__ import annotations

import collections
import itertools
import typing as t

from singer_sdk.exceptions import FatalAPIError
from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.stream import AccessGovStream
from tap_accessgov.paging import QueryPaging, viewed_objects
from tap_accessgov.streams.automation_exclusions import (
    AutomationExclusionsStream,
    partition_key,
)

if t.TYPE_CHECKING:
    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.stream import ApiConnection

User = dict[str, t.Any]

DIRECTORY_AHEAD = 8  # pages of the directory read ahead of the records handed on, at most


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

    @property
    @override
    def snapshot_scope(self) -> str:
        """``directory`` when the run read the directory, else ``automation_exclusion_users``:
        an owner missing from the latter has not left (int_users_snapshot reads this)."""
        return "directory" if self.config["read_directory"] else "automation_exclusion_users"

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
        """The directory's users, then the exclusions' users it did not list.

        The directory is one page series (each page's token comes with the page before), so its
        pages follow each other, read in a thread of their own a few pages ahead of the records
        handed on. Its first page comes before anything else: a key that may not read the
        directory fails on that one request, not after the catalog's. The exclusion pages not
        read yet in this run (all of them when ``automation_exclusions`` is not selected) are
        then listed while the directory's next pages are read ahead, fetched (those alone) by
        the other threads of ``max_concurrency`` (all of them without the directory), and
        taken in partition order between the directory's records and while the main thread
        waits for its next page (so a failed exclusion page fails the run at once, not after a
        directory page that does not come).
        """
        exclusions = self.exclusions
        unread: collections.deque[dict[str, t.Any]] = collections.deque()
        directory: t.Iterator[User] = iter(())
        if self.config["read_directory"]:
            directory = self.concurrency.read_ahead(
                self,
                "directory",
                lambda: self.request_records(None),
                self.page_size,
                DIRECTORY_AHEAD,
                idle=lambda: self._take_fetched(unread),
            )
        first = list(itertools.islice(directory, 1))
        unread.extend(
            partition
            for partition in exclusions.partitions
            if not exclusions.excluded_users.was_read(partition_key(partition))
        )
        if unread:
            # the directory's series keeps one of the run's threads; the exclusions the rest
            directory_threads = 1 if self.config["read_directory"] else 0
            exclusions.fetch_ahead(list(unread), self.concurrency.limit - directory_threads)
        listed: set[str] = set()
        for user in itertools.chain(first, directory):
            listed.add(user["id"])
            yield user
            self._take_fetched(unread)
        yield from self._excluded_users(unread, listed)

    def _take_fetched(self, unread: collections.deque[dict[str, t.Any]]) -> None:
        """Read the next exclusion partitions whose pages have all arrived (or whose fetch
        failed: reading it raises), in partition order."""
        while unread and self.exclusions.fetched(unread[0]):
            self._read_exclusions(unread.popleft())

    def _read_exclusions(self, partition: dict[str, t.Any]) -> None:
        """Read one exclusion partition through ``automation_exclusions``' own loop: its
        records are not ours to emit; its users go to the run's ``ExcludedUsers``."""
        for _ in self.exclusions.records(partition):
            pass

    def _excluded_users(
        self, unread: collections.deque[dict[str, t.Any]], listed: set[str]
    ) -> t.Iterator[User]:
        """The exclusions' users the directory did not list, in ``ExcludedUsers``' order, each
        partition's as soon as it is read."""
        excluded_users = self.exclusions.excluded_users
        emitted = 0
        while True:
            users = excluded_users.since(emitted)
            emitted += len(users)
            yield from (user for user in users if user["id"] not in listed)
            if not unread:
                return
            self._read_exclusions(unread.popleft())
