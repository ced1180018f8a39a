"""``apps``: every app of the tenant, read once per run, and the base of the streams read app
by app (``app_entitlements``, ``app_users``, ``grants``: one partition per app, whether or not
``apps`` is selected)."""

from __future__ import annotations

import functools
import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.partitions import ConcurrentPartitionsStream
from tap_accessgov.engine.read_once import ReadOnce
from tap_accessgov.engine.stream import AccessGovStream
from tap_accessgov.paging import QueryPaging, page_body

if t.TYPE_CHECKING:
    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.stream import ApiConnection

Record = dict[str, t.Any]
V = t.TypeVar("V")


class AppsStream(QueryPaging, AccessGovStream):
    """``GET /api/v1/apps``: every app of the tenant, every field the service sends."""

    name = "apps"
    path = "/api/v1/apps"
    primary_keys = ("id",)
    schema = schemas.APP

    def __init__(self, tap: Tap, *, connection: ApiConnection) -> None:
        super().__init__(tap, connection=connection)
        self._apps: ReadOnce[None, Record] = ReadOnce(lambda app: app)

    @override
    def records(self, context: Context | None) -> t.Iterator[Record]:
        """Every app, kept once the list is complete: the SDK syncs ``app_entitlements``
        before ``apps`` (by name), and its ``app_ids`` read the list first."""
        kept = self._apps.kept(None)
        yield from kept if kept is not None else self._apps.noting(None, self.request_records(None))

    def app_ids(self) -> list[str]:
        """The ids of every app, in the service's order: read once per run."""
        return [app["id"] for app in self._apps.of(None, lambda: self.records(None))]

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """Apps of ``list``; one without an id cannot be keyed and is skipped, with a warning."""
        for app in page_body(response).get("list") or []:
            if app.get("id"):
                yield app
            else:
                self.logger.warning("Skipping an app without an id (%s)", app.get("displayName"))


class PerAppStream(ConcurrentPartitionsStream):
    """A stream read app by app: one partition per app of the catalog (named like the record
    field ``appId``), fetched ahead within ``max_concurrency`` (partitions.py)."""

    reads = {"apps": AppsStream}

    def __init__(self, tap: Tap, *, connection: ApiConnection, apps: AppsStream) -> None:
        super().__init__(tap, connection=connection)
        self.apps = apps

    @override
    def list_partitions(self) -> list[dict[str, t.Any]]:
        return [{"appId": app_id} for app_id in self.apps.app_ids()]

    @override
    def describe(self, context: Context) -> str:
        return f"app {context['appId']}"

    def kept_by_app(self, kept: ReadOnce[str, V]) -> t.Iterator[tuple[str, V]]:
        """(app id, what ``kept`` noted of a record) for every record of every app, in
        catalog order: what the streams built on this one read of it. The apps this run has
        not read in full are read now (``records``, which notes into ``kept``), unemitted."""
        for partition in self.partitions:
            app_id = partition["appId"]
            for noted in kept.of(app_id, functools.partial(self.records, partition)):
                yield app_id, noted
