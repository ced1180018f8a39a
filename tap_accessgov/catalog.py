"""The tenant's catalog: ``apps`` and ``app_entitlements`` (one partition per app, fetched
concurrently), and the app entitlements whose automation exclusions the run reads.

Why partitions computed from the catalog and not SDK child streams: the SDK syncs a child
once per parent record, inside the parent's record loop, one at a time; with the whole list of
apps known first, the next apps' entitlement pages are fetched ahead within
``max_concurrency`` (prefetch.py), as the exclusions of the next entitlements are. A child
stream would also lose the children of parent records a stream map filters out. The catalog
is read once per run whether or not ``apps`` and ``app_entitlements`` are selected: when one
is not, the stream that needs its records reads them through its request loop, unemitted.
Contexts hold ids only (the SDK writes them into logs and state).
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.client import AccessGovStream
from tap_accessgov.paging import page_body
from tap_accessgov.prefetch import ConcurrentPartitionsStream

if t.TYPE_CHECKING:
    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.client import ApiConnection

Record = dict[str, t.Any]


class QueryPaging:
    """``page_size`` on every request and ``page_token`` after the first, in the query string:
    how the service's GET lists page."""

    page_size: int

    def get_url_params(self, context: Context | None, next_page_token: str | None) -> Record:
        params: Record = {"page_size": self.page_size}
        if next_page_token:
            params["page_token"] = next_page_token
        return params


class AppsStream(QueryPaging, AccessGovStream):
    """``GET /api/v1/apps``: every app of the tenant, every field the service sends."""

    name = "apps"
    path = "/api/v1/apps"
    primary_keys = ("id",)
    schema = schemas.APP

    def __init__(self, tap: Tap, *, connection: ApiConnection) -> None:
        super().__init__(tap, connection=connection)
        self._app_ids: list[str] | None = None

    @override
    def get_records(self, context: Context | None) -> t.Iterable[Record]:
        return self.dry_run_limit.apply(self._listed())

    def _listed(self) -> t.Iterator[Record]:
        """Every app, keeping their ids once the list is complete."""
        app_ids = []
        for record in self.request_records(None):
            app_ids.append(record["id"])
            yield record
        self._app_ids = app_ids

    def app_ids(self) -> list[str]:
        """The ids of every app, in the service's order: read once per run."""
        if self._app_ids is None:
            for _ in self._listed():
                pass
        return self._app_ids or []

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """Apps of ``list``; one without an id cannot be keyed and is skipped, with a warning."""
        for app in page_body(response).get("list") or []:
            if app.get("id"):
                yield app
            else:
                self.logger.warning("Skipping an app without an id (%s)", app.get("displayName"))


class AppEntitlementsStream(QueryPaging, ConcurrentPartitionsStream):
    """``GET /api/v1/apps/{app_id}/entitlements`` for every app, one partition each: the
    ``AppEntitlement`` of each view, its fields at the top level."""

    name = "app_entitlements"
    path = "/api/v1/apps/{appId}/entitlements"
    primary_keys = ("appId", "id")
    schema = schemas.APP_ENTITLEMENT

    def __init__(self, tap: Tap, *, connection: ApiConnection, apps: AppsStream) -> None:
        super().__init__(tap, connection=connection)
        self.apps = apps
        self._partitions: list[dict[str, t.Any]] | None = None
        self._read: dict[str, list[tuple[str, bool]]] = {}  # app id -> (id, automated)

    @property
    @override
    def partitions(self) -> list[dict[str, t.Any]] | None:
        """One context per app of the catalog (named like the record field ``appId``)."""
        if self._partitions is None:
            self._partitions = [{"appId": app_id} for app_id in self.apps.app_ids()]
        return self._partitions

    @override
    def describe(self, context: Context) -> str:
        return f"app {context['appId']}"

    @override
    def get_records(self, context: Context | None) -> t.Iterable[Record]:
        return self.dry_run_limit.apply(self._entitlements_of(context)) if context else ()

    def _entitlements_of(self, context: Context) -> t.Iterator[Record]:
        """One app's entitlements; once all are read, which of them have automation on."""
        read = []
        for record in self.partition_records(context):
            read.append((record["id"], record.get("isAutomationEnabled") is True))
            yield record
        self._read[context["appId"]] = read

    def entitlements_for_exclusions(self, *, automated_only: bool) -> list[tuple[str, str]]:
        """(app id, entitlement id) of every app entitlement with automation on (or of all),
        in catalog order; the apps not read yet in this run are read now, concurrently."""
        found = []
        for partition in self.partitions or []:
            if partition["appId"] not in self._read:
                for _ in self._entitlements_of(partition):
                    pass
            found += [
                (partition["appId"], entitlement_id)
                for entitlement_id, automated in self._read.get(partition["appId"], [])
                if automated or not automated_only
            ]
        return found

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``appEntitlement`` of each view; one without an id is skipped, with a warning."""
        for view in page_body(response).get("list") or []:
            entitlement = (view or {}).get("appEntitlement") or {}
            if entitlement.get("id"):
                yield entitlement
            else:
                self.logger.warning(
                    "Skipping an app entitlement without an id (%s)", response.request.path_url
                )
