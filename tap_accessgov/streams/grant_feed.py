"""The grant feed: ``POST /api/v1/grants/feed``, incremental on ``feed.date``."""

from __future__ import annotations

import hashlib
import json
import re
import typing as t
from functools import cached_property

from singer_sdk.exceptions import FatalAPIError
from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.windowed import WindowedStream
from tap_accessgov.paging import BodyPaging, page_body
from tap_accessgov.timestamps import normalize_timestamp

if t.TYPE_CHECKING:
    from collections.abc import Mapping

    import requests
    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.time_ranges import Key


UNSPECIFIED_EVENT = "GRANT_EVENT_TYPE_UNSPECIFIED"
# Which record field each `$.expanded[N]` path of a feed entry fills.
EXPANDED_FIELDS = {
    "appPath": "app",
    "appUserPath": "appUser",
    "entitlementPath": "entitlement",
    "ticketPath": "ticket",
}
_EXPANDED_PATH = re.compile(r"^\$\.expanded\[(\d+)\]$")


class GrantFeedStream(BodyPaging, WindowedStream):
    """Grant events from ``POST /api/v1/grants/feed``, incremental on ``feed.date``.

    The feed is not documented as sorted, so the stream is unsorted: the bookmark (the latest
    date seen) is only committed when a sync completes. The feed is read in time windows
    (engine/time_ranges.py) whose completion is saved in the state as they complete, so an
    interrupted sync resumes from its last STATE. ``after`` is inclusive, so each run re-reads
    the events at the bookmark instant: targets dedupe on the primary key.
    """

    name = "grant_feed"
    path = "/api/v1/grants/feed"
    http_method = "POST"
    replication_key = "date"
    is_sorted = False
    primary_keys = ("appId", "appEntitlementId", "appUserId", "eventType", "date")

    @cached_property
    def expands(self) -> bool:
        """Whether entries carry expanded objects: only where ``expand_mask`` asks for some."""
        return bool(self.config.get("expand_mask"))

    @cached_property
    def schema(self) -> dict[str, t.Any]:
        """Without ``expand_mask`` no entry has an expanded object, and the schema declares
        none: each would be a column of nulls that a loader writes on every row (for
        target-postgres, four JSON ``null`` serialized per event: 28% of its CPU loading
        the feed, docs/performance.md)."""
        if self.expands:
            return schemas.GRANT_FEED
        expansions = {*EXPANDED_FIELDS, *EXPANDED_FIELDS.values()}
        properties = schemas.GRANT_FEED["properties"].items()
        return {
            **schemas.GRANT_FEED,
            "properties": {k: v for k, v in properties if k not in expansions},
        }

    @override
    def windows_of(self) -> str:
        return filters_digest(self.config)

    @override
    def window_key(self, record: dict[str, t.Any]) -> Key:
        return key(record)  # its ``date`` normalized by parse_response

    @override
    def search_filters(self, context: Context | None) -> dict[str, t.Any]:
        """A window's or a probe's bounds (a probe: a small page); the settings' filters and
        expand mask."""
        config = self.config
        body = self.window_filters(context)
        if app_ids := config.get("app_ids"):
            body["appRefs"] = [{"id": app_id} for app_id in app_ids]
        if refs := config.get("app_entitlement_refs"):
            body["appEntitlementRefs"] = [
                {"appId": r["app_id"], "id": r["app_entitlement_id"]} for r in refs
            ]
        if refs := config.get("app_user_refs"):
            body["appUserRefs"] = [{"appId": r["app_id"], "id": r["id"]} for r in refs]
        if user_ids := config.get("user_ids"):
            body["userRefs"] = [{"id": user_id} for user_id in user_ids]
        if paths := config.get("expand_mask"):
            body["expandMask"] = {"paths": list(paths)}
        return body

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[dict[str, t.Any]]:
        """Feed entries with their keys lifted to the top and expanded objects resolved."""
        page = page_body(response)
        # without a mask the schema declares no expanded object: none is resolved nor missed
        paths = EXPANDED_FIELDS.items() if self.expands else ()
        expanded = (page.get("expanded") or []) if self.expands else []
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
            for path_field, object_field in paths:
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


def key(record: dict[str, t.Any]) -> Key:
    """A grant event's primary key (``date`` last)."""
    return (
        record["appId"],
        record["appEntitlementId"],
        record["appUserId"],
        record["eventType"],
        record["date"],
    )


def filters_digest(config: Mapping[str, t.Any]) -> str:
    """Which events and fields a window holds: completed windows count only for the same."""
    names = ("app_ids", "app_entitlement_refs", "app_user_refs", "user_ids", "expand_mask")
    text = json.dumps({name: config.get(name) for name in names}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
