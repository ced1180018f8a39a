"""``app_users``: the accounts of every app of the catalog, each with its owner
(``identityUserId``, a user of the directory; empty for accounts nobody owns), the only link
from a grant's ``appUserId`` to a person. One partition per app (apps.py)."""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.paging import QueryPaging, viewed_objects
from tap_accessgov.streams.apps import PerAppStream

if t.TYPE_CHECKING:
    import requests

Record = dict[str, t.Any]


class AppUsersStream(QueryPaging, PerAppStream):
    """``GET /api/v1/apps/{app_id}/app_users`` for every app: the ``appUser`` of each view,
    its fields at the top level (the view's paths point into an expansion nobody asked for)."""

    name = "app_users"
    path = "/api/v1/apps/{appId}/app_users"
    primary_keys = ("appId", "id")
    schema = schemas.APP_USER

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``appUser`` of each view (a warning, never the account's names, for one
        without an id)."""
        return viewed_objects(response, "appUser", self.logger)
