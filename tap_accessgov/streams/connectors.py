"""``connectors``: how each app's data reaches the service, and whether it is fresh (each
connector's last sync: when it completed, its error). A review run on a connector that stopped
syncing reviews stale access.

A connector's ``config`` holds the credentials the service uses to reach the app, and its
``downloadUrl`` is a signed link: both are dropped as the page is read, before anything else
sees the connector (records, logs, STATE), whatever the settings, stream maps or log level."""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.refused import RefusablePartitionsStream
from tap_accessgov.paging import QueryPaging, viewed_objects
from tap_accessgov.streams.apps import PerAppStream

if t.TYPE_CHECKING:
    import requests

Record = dict[str, t.Any]

NEVER_READ = frozenset({"config", "downloadUrl"})  # a credential, a signed link


class ConnectorsStream(QueryPaging, RefusablePartitionsStream, PerAppStream):
    """``GET /api/v1/apps/{app_id}/connectors`` for every app: the ``connector`` of each view,
    without ``NEVER_READ``."""

    name = "connectors"
    path = "/api/v1/apps/{appId}/connectors"
    primary_keys = ("appId", "id")
    schema = schemas.CONNECTOR

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        for connector in viewed_objects(response, "connector", self.logger):
            yield {key: value for key, value in connector.items() if key not in NEVER_READ}
