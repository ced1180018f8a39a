"""``automation_exclusions`` (one partition per app entitlement, configured or found through
the app entitlements) and the run's store of the users found in them (``ExcludedUsers``), which
the ``users`` stream emits: the service sends each excluded user whole inside its exclusion
entries, and has no users endpoint to read them from.

Why the users are collected here, and not handed to a child stream: a child stream would
receive them through SDK contexts, and the SDK writes contexts into its log lines, its state
and its partition bookkeeping (personal data in the logs), and hands child contexts only for
parent records that pass the stream maps (a ``__filter__`` on ``automation_exclusions`` would
lose users). So the request loop yields the service's exclusion entries as they are, and
``automation_exclusions`` turns each into its record and its user in one place, in the main
thread, *before* the record reaches the maps; the users go to the run's ``ExcludedUsers``, from
which ``users``, a top-level stream synced after it, reads them back. When
``automation_exclusions`` is not selected, ``users`` drives the same page fetches itself: either
way each page is fetched once per run. Memory grows with the number of distinct users, not
with the number of exclusion entries.
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.paging import QueryPaging, RepeatedPageTokenError
from tap_accessgov.streams.app_entitlements import AppEntitlementsStream, PerEntitlementStream

if t.TYPE_CHECKING:
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.stream import ApiConnection

Entry = dict[str, t.Any]  # an exclusion entry as the service sends it, the user inside
User = dict[str, t.Any]
PartitionKey = tuple[str, str]


class ExcludedUsers:
    """Distinct users by id, in the order they first appear (partition order, then page order),
    and which exclusion partitions have been read in full: the run's users of the exclusion
    pages, for the ``users`` stream."""

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


def _user_id(entry: Entry) -> str | None:
    return (entry.get("user") or {}).get("id") or None


class AutomationExclusionsStream(QueryPaging, PerEntitlementStream):
    """Users excluded from automation, one partition per app entitlement: those of the
    ``exclusion_entitlements`` setting, or, when it is not set, every app entitlement of the
    tenant's catalog whose automation is on (all of them with ``exclusion_scope: all``).

    The operation declares no paging parameters, so the first request sends none; a
    non-empty ``nextPageToken`` is followed with ``page_token`` and ``page_size``.
    The users of each page go to the run's ``ExcludedUsers``, from which the ``users`` stream
    reads them.
    """

    name = "automation_exclusions"
    path = "/api/v1/apps/{appId}/entitlements/{appEntitlementId}/automation/exclusions"
    primary_keys = ("appId", "appEntitlementId", "userId")
    schema = schemas.AUTOMATION_EXCLUSION
    declares_paging = False

    def __init__(
        self, tap: Tap, *, connection: ApiConnection, catalog: AppEntitlementsStream
    ) -> None:
        super().__init__(tap, connection=connection, catalog=catalog)
        self.excluded_users = ExcludedUsers()

    @override
    def list_partitions(self) -> list[dict[str, t.Any]]:
        """Contexts named like the record fields, filled into records that lack them
        (engine/partitions.py), through the app entitlements unless ``exclusion_entitlements``
        is set."""
        configured = self.config.get("exclusion_entitlements")
        if configured is not None:
            keys = [(e["app_id"], e["app_entitlement_id"]) for e in configured]
        else:
            keys = self.catalog.entitlements(
                automated_only=self.config["exclusion_scope"] == "automated"
            )
        return [{"appId": app, "appEntitlementId": ent} for app, ent in keys]

    @override
    def records(self, context: Context | None) -> t.Iterator[dict[str, t.Any]]:
        """Records of one entitlement; with ``max_concurrency`` > 1 the next entitlements are
        already being fetched in worker threads (see partitions.py).

        Runs in the main thread in partition order, before stream maps and selection see a
        record: the users it collects do not depend on either, nor on the concurrency. The
        partition counts as read once its last record has been taken.
        """
        if not context:
            self.logger.info("No app entitlement to read automation exclusions of")
            return
        excluded_users = self.excluded_users
        for entry in self.partition_records(context):
            if (record := self.exclusion_record(entry)) is not None:
                excluded_users.add(entry["user"])
                yield record
        excluded_users.mark_read(partition_key(context))

    def exclusion_record(self, entry: Entry) -> dict[str, t.Any] | None:
        """The record of one exclusion entry, its user reduced to ``userId``; None, with a
        warning, for an entry without a user id (it cannot be keyed)."""
        user_id = _user_id(entry)
        if user_id is None:
            # The entry may hold personal data (the user's e-mail...): name ids only.
            self.logger.warning(
                "Skipping an automation exclusion without a user id (app %s, app "
                "entitlement %s, app user %s)",
                entry.get("appId"),
                entry.get("appEntitlementId"),
                entry.get("appUserId"),
            )
            return None
        record: dict[str, t.Any] = {
            key: entry[key] for key in ("appId", "appEntitlementId", "appUserId") if key in entry
        }
        record["userId"] = user_id
        return record

    @override
    def read_partition(
        self, context: Context, stopped: t.Callable[[], bool] = lambda: False
    ) -> t.Iterator[Entry]:
        """The exclusion entries of one entitlement, each user once (the service's entries,
        as the base stream's ``parse_response`` yields them).

        The operation declares no paging parameters, and a gateway that ignores undeclared
        query parameters answers ``page_token`` with the first page and the same token again.
        That entitlement then keeps what was read (a repeated page adds no entry twice) and
        the run goes on with the others, with a warning naming it.
        """
        seen: set[str] = set()
        try:
            for entry in super().read_partition(context, stopped):
                user_id = _user_id(entry)
                if user_id is None:
                    yield entry  # reported by exclusion_record, in the main thread
                elif user_id not in seen:
                    seen.add(user_id)
                    yield entry
        except RepeatedPageTokenError:
            self.logger.warning(
                "App entitlement %s of app %s: the service answered a page token with a token "
                "it had already returned (it may ignore page_token on this endpoint); keeping "
                "the %d exclusions read so far and going on with the other entitlements",
                context["appEntitlementId"],
                context["appId"],
                len(seen),
            )


def partition_key(context: Context | dict[str, t.Any]) -> PartitionKey:
    return (context["appId"], context["appEntitlementId"])
