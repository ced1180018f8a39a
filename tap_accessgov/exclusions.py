"""Automation exclusions (one partition per app entitlement, configured or found through the
catalog) and the users found in them: the service sends each excluded user whole inside its
exclusion entries."""

from __future__ import annotations

import typing as t

from singer_sdk.helpers.conform import TypeConformanceLevel
from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.excluded_users import ExcludedUsers, PartitionKey
from tap_accessgov.paging import RepeatedPageTokenError, page_body
from tap_accessgov.prefetch import ConcurrentPartitionsStream
from tap_accessgov.progress import DryRunLimit, ProgressReportingStream
from tap_accessgov.snapshots import SnapshotStream

if t.TYPE_CHECKING:
    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.catalog import AppEntitlementsStream
    from tap_accessgov.client import ApiConnection

# The entry's user object travels under this key from parse_response to get_records (which
# moves it into the run's ExcludedUsers before the record reaches the SDK); never written.
_USER = "__user__"


class AutomationExclusionsStream(ConcurrentPartitionsStream):
    """Users excluded from automation, one partition per app entitlement: those of the
    ``exclusion_entitlements`` setting, or, when it is not set, every app entitlement of the
    tenant's catalog whose automation is on (all of them with ``exclusion_scope: all``).

    The operation declares no paging parameters, so the first request sends none; a
    non-empty ``nextPageToken`` is followed with ``page_token`` and ``page_size``.
    The user objects of each page go to the run's ``ExcludedUsers`` (see excluded_users.py),
    from which the ``users`` stream reads them.
    """

    name = "automation_exclusions"
    path = "/api/v1/apps/{appId}/entitlements/{appEntitlementId}/automation/exclusions"
    primary_keys = ("appId", "appEntitlementId", "userId")
    schema = schemas.AUTOMATION_EXCLUSION
    TYPE_CONFORMANCE_LEVEL = TypeConformanceLevel.NONE  # four strings built by parse_response

    def __init__(
        self, tap: Tap, *, connection: ApiConnection, catalog: AppEntitlementsStream
    ) -> None:
        super().__init__(tap, connection=connection)
        self.catalog = catalog
        self.excluded_users = ExcludedUsers()
        self._partitions: list[dict[str, t.Any]] | None = None

    @property
    @override
    def partitions(self) -> list[dict[str, t.Any]] | None:
        """Contexts named like the record fields, so the SDK fills them into records; found
        once per run (through the catalog unless ``exclusion_entitlements`` is set)."""
        if self._partitions is None:
            configured = self.config.get("exclusion_entitlements")
            if configured is not None:
                keys = [(e["app_id"], e["app_entitlement_id"]) for e in configured]
            else:
                keys = self.catalog.entitlements_for_exclusions(
                    automated_only=self.config["exclusion_scope"] == "automated"
                )
            self._partitions = [{"appId": app, "appEntitlementId": ent} for app, ent in keys]
        return self._partitions

    @override
    def describe(self, context: Context) -> str:
        return f"app entitlement {context['appEntitlementId']} of app {context['appId']}"

    @override
    def get_url_params(
        self, context: Context | None, next_page_token: str | None
    ) -> dict[str, t.Any]:
        if not next_page_token:
            return {}
        return {"page_token": next_page_token, "page_size": self.page_size}

    @override
    def get_records(self, context: Context | None) -> t.Iterable[dict[str, t.Any]]:
        """Records of one entitlement; with ``max_concurrency`` > 1 the next entitlements are
        already being fetched in worker threads (see prefetch.py).

        Runs in the main thread in partition order, before stream maps and selection see a
        record: the users it collects do not depend on either, nor on the concurrency.
        """
        if not context:
            self.logger.info("No app entitlement to read automation exclusions of")
            return
        excluded_users = self.excluded_users
        for record in self.dry_run_limit.apply(self.partition_records(context)):
            excluded_users.add(record.pop(_USER))
            yield record
        excluded_users.mark_read(partition_key(context))

    @override
    def read_partition(
        self, context: Context, stopped: t.Callable[[], bool] = lambda: False
    ) -> t.Iterator[dict[str, t.Any]]:
        """Every exclusion of one entitlement, once.

        The operation declares no paging parameters, and a gateway that ignores undeclared
        query parameters answers ``page_token`` with the first page and the same token again.
        That entitlement then keeps what was read (a repeated page adds no record twice) and
        the run goes on with the others, with a warning naming it.
        """
        seen: set[str] = set()
        try:
            for record in super().read_partition(context, stopped):
                if record["userId"] not in seen:
                    seen.add(record["userId"])
                    yield record
        except RepeatedPageTokenError:
            self.logger.warning(
                "App entitlement %s of app %s: the service answered a page token with a token "
                "it had already returned (it may ignore page_token on this endpoint); keeping "
                "the %d exclusions read so far and going on with the other entitlements",
                context["appEntitlementId"],
                context["appId"],
                len(seen),
            )

    @override
    def parse_response(self, response: requests.Response) -> list[dict[str, t.Any]]:
        """One record per exclusion entry, the user reduced to ``userId``; the user object
        rides along under a private key until get_records takes it."""
        records = []
        for entry in page_body(response).get("list") or []:
            user = entry.get("user") or {}
            if not user.get("id"):
                # The entry may hold personal data (the user's e-mail...): name ids only.
                self.logger.warning(
                    "Skipping an automation exclusion without a user id (app %s, app "
                    "entitlement %s, app user %s)",
                    entry.get("appId"),
                    entry.get("appEntitlementId"),
                    entry.get("appUserId"),
                )
                continue
            record = {
                key: entry[key]
                for key in ("appId", "appEntitlementId", "appUserId")
                if key in entry
            }
            record["userId"] = user["id"]
            record[_USER] = user
            records.append(record)
        return records


def partition_key(context: Context | dict[str, t.Any]) -> PartitionKey:
    return (context["appId"], context["appEntitlementId"])


class UsersStream(ProgressReportingStream, SnapshotStream):
    """Users found in automation exclusions, one record per user id per run.

    A top-level stream synced after ``automation_exclusions``: it emits the users that stream
    collected, and reads the exclusion pages not yet read in this run itself (all of them when
    ``automation_exclusions`` is not selected), through that stream's own request loop. See
    excluded_users.py for why no user object travels in an SDK context.
    """

    name = "users"
    primary_keys = ("id",)
    schema = schemas.USER

    def __init__(self, tap: Tap, *, exclusions: AutomationExclusionsStream) -> None:
        super().__init__(tap)
        self.exclusions = exclusions
        self.known_fields = schemas.KnownFields(self.schema, self.logger, "User")
        self.dry_run_limit = DryRunLimit(self)

    @override
    def get_records(self, context: Context | None) -> t.Iterable[dict[str, t.Any]]:
        return self.dry_run_limit.apply(self._excluded_users())

    def _excluded_users(self) -> t.Iterator[dict[str, t.Any]]:
        exclusions = self.exclusions
        excluded_users = exclusions.excluded_users
        emitted = 0
        for partition in exclusions.partitions or []:
            if not excluded_users.was_read(partition_key(partition)):
                for _ in exclusions.get_records(partition):
                    pass  # the exclusion records are not ours to emit; their users are
            users = excluded_users.since(emitted)
            emitted += len(users)
            yield from users

    @override
    def post_process(
        self, row: dict[str, t.Any], context: Context | None = None
    ) -> dict[str, t.Any] | None:
        """Only the User fields the schema knows (see schemas.KnownFields), stamped with the
        run's snapshot."""
        return super().post_process(self.known_fields.apply(row), context)
