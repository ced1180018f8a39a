"""The grant feed: ``POST /api/v1/grants/feed``, incremental on ``feed.date``."""

from __future__ import annotations

import datetime
import re
import typing as t

from singer_sdk.exceptions import FatalAPIError
from singer_sdk.helpers.conform import TypeConformanceLevel
from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.client import AccessGovStream
from tap_accessgov.paging import page_body
from tap_accessgov.timestamps import normalize_timestamp

if t.TYPE_CHECKING:
    import requests
    from singer_sdk.helpers.types import Context

UNSPECIFIED_EVENT = "GRANT_EVENT_TYPE_UNSPECIFIED"
# Which record field each `$.expanded[N]` path of a feed entry fills.
EXPANDED_FIELDS = {
    "appPath": "app",
    "appUserPath": "appUser",
    "entitlementPath": "entitlement",
    "ticketPath": "ticket",
}
_EXPANDED_PATH = re.compile(r"^\$\.expanded\[(\d+)\]$")


class GrantFeedStream(AccessGovStream):
    """Grant events from ``POST /api/v1/grants/feed``, incremental on ``feed.date``.

    The feed is not documented as sorted, so the stream is unsorted: the bookmark (the latest
    date seen) is only committed when a sync completes; an interrupted sync starts again from
    the previous bookmark. ``after`` is inclusive, so each run re-reads the events at the
    bookmark instant: targets dedupe on the primary key.
    """

    name = "grant_feed"
    path = "/api/v1/grants/feed"
    http_method = "POST"
    replication_key = "date"
    is_sorted = False
    primary_keys = ("appId", "appEntitlementId", "appUserId", "eventType", "date")
    schema = schemas.GRANT_FEED
    # parse_response builds every record from JSON strings and objects that already match the
    # schema; re-checking each value was the largest cost in a profile (see README).
    TYPE_CONFORMANCE_LEVEL = TypeConformanceLevel.NONE

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, **kwargs)
        started = datetime.datetime.now(datetime.UTC)
        self._signpost = normalize_timestamp(started.isoformat())

    @override
    def get_replication_key_signpost(self, context: Context | None = None) -> str:
        """Sync start in the bookmark's own format (bookmarks compare as strings)."""
        return self._signpost

    @override
    def prepare_request_payload(
        self, context: Context | None, next_page_token: str | None
    ) -> dict[str, t.Any]:
        config = self.config
        body: dict[str, t.Any] = {"pageSize": self.page_size}
        if after := self.get_starting_replication_key_value(context):
            body["after"] = normalize_timestamp(after)
        if before := config.get("end_date"):
            body["before"] = normalize_timestamp(before)
        if app_ids := config.get("app_ids"):
            body["appRefs"] = [{"id": app_id} for app_id in app_ids]
        if refs := config.get("app_entitlement_refs"):
            body["appEntitlementRefs"] = [{"appId": r["app_id"], "id": r["id"]} for r in refs]
        if refs := config.get("app_user_refs"):
            body["appUserRefs"] = [{"appId": r["app_id"], "id": r["id"]} for r in refs]
        if user_ids := config.get("user_ids"):
            body["userRefs"] = [{"id": user_id} for user_id in user_ids]
        if paths := config.get("expand_mask"):
            body["expandMask"] = {"paths": list(paths)}
        if next_page_token:
            body["pageToken"] = next_page_token
        return body

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[dict[str, t.Any]]:
        """Feed entries with their keys lifted to the top and expanded objects resolved."""
        page = page_body(response)
        expanded = page.get("expanded") or []
        referenced: set[int] = set()
        for entry in page.get("list") or []:
            feed = entry.get("feed") or {}
            try:
                date = normalize_timestamp(feed["date"])
            except (KeyError, TypeError, ValueError):
                msg = f"a grant feed entry has no readable feed.date: {entry!r}"
                raise FatalAPIError(msg) from None
            record: dict[str, t.Any] = {
                "date": date,
                "appId": feed.get("appId"),
                "appEntitlementId": feed.get("appEntitlementId"),
                "appUserId": feed.get("appUserId"),
                "eventType": feed.get("eventType") or UNSPECIFIED_EVENT,
                "feed": feed,
            }
            for path_field, object_field in EXPANDED_FIELDS.items():
                if path := entry.get(path_field):
                    record[path_field] = path
                    record[object_field] = self._resolve(path, expanded, referenced)
            yield record
        if len(referenced) < len(expanded):
            self.logger.warning(
                "%d expanded object(s) on a grant feed page are referenced by no entry",
                len(expanded) - len(referenced),
            )

    def _resolve(
        self, path: str, expanded: list[dict[str, t.Any]], referenced: set[int]
    ) -> dict[str, t.Any] | None:
        match = _EXPANDED_PATH.match(path)
        if match is None or int(match[1]) >= len(expanded):
            self.logger.warning("Grant feed path %r does not point into the page's expanded", path)
            return None
        referenced.add(int(match[1]))
        return expanded[int(match[1])]
