"""``grants``: the grants the service holds now, one record per (app, entitlement, app user),
with the grant's start, scheduled end, sources and originating ticket. The grant feed does
not reach back to every grant held today (it began in October 2024, and has a retention), so
this snapshot, not the feed, is the warehouse's truth for "now" (docs/models.md).

Read with ``POST /api/v1/search/grants`` filtered to one app per partition (apps.py), not
one ``GET .../entitlements/{id}/users`` series per entitlement: about a quarter of the
requests and half the time or less on both tenants measured (docs/decisions.md, "Current
grants"; benchmarks/grants_ways_benchmark.py).
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.paging import BodyPaging, page_body
from tap_accessgov.streams.apps import PerAppStream

if t.TYPE_CHECKING:
    import requests
    from singer_sdk.helpers.types import Context

Record = dict[str, t.Any]
# The fields of an AppEntitlementUserView a record keeps: all but the account (``appUser``,
# a record of app_users, the same object again for each of its grants).
GRANT_FIELDS = tuple(schemas.GRANT["properties"])


class GrantsStream(BodyPaging, PerAppStream):
    """``POST /api/v1/search/grants`` with ``appIds: [app]`` for every app of the catalog."""

    name = "grants"
    path = "/api/v1/search/grants"
    http_method = "POST"
    primary_keys = ("appId", "appEntitlementId", "appUserId")
    schema = schemas.GRANT

    @override
    def search_filters(self, context: Context | None) -> dict[str, t.Any]:
        """The partition's app."""
        return {"appIds": [context["appId"]] if context else []}

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``appEntitlementUserBinding`` of each result (its entitlement is a record of
        app_entitlements); one without its three ids cannot be keyed and is skipped, with a
        warning naming the ids it has."""
        for item in page_body(response).get("list") or []:
            binding = (item or {}).get("appEntitlementUserBinding") or {}
            if (
                binding.get("appId")
                and binding.get("appEntitlementId")
                and binding.get("appUserId")
            ):
                yield {key: binding[key] for key in GRANT_FIELDS if key in binding}
            else:
                self.logger.warning(
                    "Skipping a grant without an app, app entitlement or app user id (app %s, "
                    "app entitlement %s)",
                    binding.get("appId"),
                    binding.get("appEntitlementId"),
                )
