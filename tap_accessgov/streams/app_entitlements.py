"""``app_entitlements``: one partition per app (apps.py; partitions.py: fetched ahead, concurrently),
and the app entitlements whose automation exclusions the run reads.

Why partitions computed from the apps and not SDK child streams: the SDK syncs a child
once per parent record, inside the parent's record loop, one at a time; with the whole list of
apps known first, the next apps' entitlement pages are fetched ahead within
``max_concurrency`` (partitions.py), as the exclusions of the next entitlements are. A child
stream would also lose the children of parent records a stream map filters out. The catalog
is read once per run whether or not ``apps`` and ``app_entitlements`` are selected: when one
is not, the stream that needs its records reads them through its request loop, unemitted.
Contexts hold ids only (the SDK writes them into logs and state).
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.partitions import ConcurrentPartitionsStream
from tap_accessgov.engine.read_once import ReadOnce
from tap_accessgov.paging import QueryPaging, viewed_objects
from tap_accessgov.streams.apps import AppsStream, PerAppStream

if t.TYPE_CHECKING:
    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.stream import ApiConnection

Record = dict[str, t.Any]


def _automation(entitlement: Record) -> tuple[str, bool]:
    return entitlement["id"], entitlement.get("isAutomationEnabled") is True


class AppEntitlementsStream(QueryPaging, PerAppStream):
    """``GET /api/v1/apps/{app_id}/entitlements`` for every app, one partition each: the
    ``AppEntitlement`` of each view, its fields at the top level."""

    name = "app_entitlements"
    path = "/api/v1/apps/{appId}/entitlements"
    primary_keys = ("appId", "id")
    schema = schemas.APP_ENTITLEMENT

    def __init__(self, tap: Tap, *, connection: ApiConnection, apps: AppsStream) -> None:
        super().__init__(tap, connection=connection, apps=apps)
        # By app id: (entitlement id, whether its automation is on) of each entitlement.
        self._automated: ReadOnce[str, tuple[str, bool]] = ReadOnce(_automation)

    @override
    def records(self, context: Context | None) -> t.Iterator[Record]:
        """One app's entitlements; once all are read, which of them have automation on."""
        if context:
            yield from self._automated.noting(context["appId"], self.partition_records(context))

    def entitlements(self, *, automated_only: bool = False) -> list[tuple[str, str]]:
        """(app id, entitlement id) of every app entitlement with automation on (or of all),
        in catalog order; the apps not read yet in this run are read now, concurrently."""
        return [
            (app_id, entitlement_id)
            for app_id, (entitlement_id, automated) in self.kept_by_app(self._automated)
            if automated or not automated_only
        ]

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``appEntitlement`` of each view; one without an id is skipped, with a warning."""
        return viewed_objects(response, "appEntitlement", self.logger)


class PerEntitlementStream(ConcurrentPartitionsStream):
    """A stream read app entitlement by app entitlement: one partition per entitlement of the
    catalog (named like the record fields ``appId`` and ``appEntitlementId``; its path names
    them too), fetched ahead as the run's concurrency allows (engine/partitions.py). A stream
    of this kind declares its name, path, keys, schema and how a page reads."""

    reads = {"catalog": AppEntitlementsStream}

    def __init__(
        self, tap: Tap, *, connection: ApiConnection, catalog: AppEntitlementsStream
    ) -> None:
        super().__init__(tap, connection=connection)
        self.catalog = catalog

    @override
    def list_partitions(self) -> list[dict[str, t.Any]]:
        return [
            {"appId": app_id, "appEntitlementId": entitlement_id}
            for app_id, entitlement_id in self.catalog.entitlements()
        ]

    @override
    def describe(self, context: Context) -> str:
        return f"app entitlement {context['appEntitlementId']} of app {context['appId']}"
