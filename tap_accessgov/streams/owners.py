"""``app_owners`` and ``entitlement_owners``: who is accountable for an app and for an app
entitlement (the reviewers of an access review). The service answers whole directory users,
an owner who has left the directory among them; a record is the owner's user fields, its id
as ``userId``, beside the app (and entitlement) it owns: the partition's ids, which
``ConcurrentPartitionsStream.post_process`` adds to every record."""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.refused import RefusablePartitionsStream
from tap_accessgov.paging import QueryPaging, page_body
from tap_accessgov.streams.app_entitlements import PerEntitlementStream
from tap_accessgov.streams.apps import PerAppStream

if t.TYPE_CHECKING:
    import requests

    from tap_accessgov.engine.stream import TapStream

Record = dict[str, t.Any]


def owners(response: requests.Response, stream: TapStream) -> t.Iterator[Record]:
    """The users of a page, each its id as ``userId`` (one without an id is skipped, said
    once a run naming the stream: an owner list per entitlement; never the user's values)."""
    for user in page_body(response).get("list") or []:
        user = dict(user or {})
        if user_id := user.pop("id", None):
            yield {"userId": user_id, **user}
        else:
            stream.warn_once(f"Skipping an owner without an id ({stream.name})")


class AppOwnersStream(QueryPaging, RefusablePartitionsStream, PerAppStream):
    """``GET /api/v1/apps/{app_id}/owners`` for every app."""

    name = "app_owners"
    path = "/api/v1/apps/{appId}/owners"
    primary_keys = ("appId", "userId")
    schema = schemas.APP_OWNER

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        return owners(response, self)


class EntitlementOwnersStream(QueryPaging, RefusablePartitionsStream, PerEntitlementStream):
    """``GET /api/v1/apps/{app_id}/entitlements/{entitlement_id}/owners`` for every app
    entitlement (the v1 list: every release has it; the v2 lists only 2026 releases)."""

    name = "entitlement_owners"
    path = "/api/v1/apps/{appId}/entitlements/{appEntitlementId}/owners"
    primary_keys = ("appId", "appEntitlementId", "userId")
    schema = schemas.ENTITLEMENT_OWNER

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        return owners(response, self)
