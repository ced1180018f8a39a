"""``app_resource_types`` and ``app_resources``: what an entitlement is on. Every app
entitlement names a resource (``appResourceId``: the group, role, repository or license it
grants) and its type (``appResourceTypeId``); these streams resolve both, app by app (the
types: one partition per app) and type by type (the resources: one partition per resource
type of an app, the types read once per run whether or not ``app_resource_types`` is
selected). A resource may sit in another (``parentAppResourceId``)."""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.read_once import ReadOnce
from tap_accessgov.engine.refused import RefusablePartitionsStream
from tap_accessgov.paging import QueryPaging, viewed_objects
from tap_accessgov.streams.apps import AppsStream, PerAppStream

if t.TYPE_CHECKING:
    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.stream import ApiConnection

Record = dict[str, t.Any]


class AppResourceTypesStream(QueryPaging, RefusablePartitionsStream, PerAppStream):
    """``GET /api/v1/apps/{app_id}/resource_types`` for every app: the ``appResourceType`` of
    each view."""

    name = "app_resource_types"
    path = "/api/v1/apps/{appId}/resource_types"
    primary_keys = ("appId", "id")
    schema = schemas.APP_RESOURCE_TYPE

    def __init__(self, tap: Tap, *, connection: ApiConnection, apps: AppsStream) -> None:
        super().__init__(tap, connection=connection, apps=apps)
        self._ids: ReadOnce[str, str] = ReadOnce(lambda resource_type: resource_type["id"])

    @override
    def records(self, context: Context | None) -> t.Iterator[Record]:
        if context:
            yield from self._ids.noting(context["appId"], self.partition_records(context))

    def resource_types(self) -> list[tuple[str, str]]:
        """(app id, resource type id) of every resource type, in catalog order; the apps not
        read yet in this run are read now. Refused by the service (this run), the refusal."""
        if self.refusal is not None:
            raise self.refusal
        return list(self.kept_by_app(self._ids))

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        return viewed_objects(response, "appResourceType", self.logger)


class AppResourcesStream(QueryPaging, RefusablePartitionsStream):
    """``GET /api/v1/apps/{app_id}/resource_types/{id}/resources`` for every resource type of
    every app: the ``appResource`` of each view."""

    name = "app_resources"
    path = "/api/v1/apps/{appId}/resource_types/{appResourceTypeId}/resources"
    primary_keys = ("appId", "appResourceTypeId", "id")
    schema = schemas.APP_RESOURCE
    reads = {"resource_types": AppResourceTypesStream}

    def __init__(
        self, tap: Tap, *, connection: ApiConnection, resource_types: AppResourceTypesStream
    ) -> None:
        super().__init__(tap, connection=connection)
        self.resource_types = resource_types

    @override
    def list_partitions(self) -> list[dict[str, t.Any]]:
        return [
            {"appId": app_id, "appResourceTypeId": type_id}
            for app_id, type_id in self.resource_types.resource_types()
        ]

    @override
    def describe(self, context: Context) -> str:
        return f"resource type {context['appResourceTypeId']} of app {context['appId']}"

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        return viewed_objects(response, "appResource", self.logger)
