"""A plain singer-sdk tap of the grant feed: the plainest tap the SDK makes of the endpoint,
with nothing of this tap's (no time windows, no retries of ours, no conformance, no
snapshots, none of its savings in the SDK's per-record path), beside which the ratios
benchmark puts the tap: what the SDK gives a tap that does nothing more.

    python -m benchmarks.plain_sdk_tap --config CONFIG --catalog CATALOG   # as the tap is run

One ``RESTStream``: ``POST /api/v1/grants/feed`` with ``pageSize`` 100 and the page token in
the body (the SDK's ``BaseAPIPaginator``), a bearer token from the secret, the records as
raw_loop.py builds its rows (the keys lifted to the top, the entry's ``feed`` and paths),
the grant feed's schema, replication on ``date``, the SDK's msgspec writer. It reads the
catalog and config Meltano would pass, and writes RECORD and STATE messages to stdout as
every SDK tap does: what is left is the SDK's per-record path (record messages, stream maps,
the bookmark, metrics) and the HTTP client's.

    python -m benchmarks.plain_sdk_tap --floor --config CONFIG --catalog CATALOG

``--floor``: the floor of any SDK tap of the feed (``FloorStream``): each entry written as the
raw loop writes it (decoded, not reshaped), with no replication key and without the SDK's
selection pass (the tap skips it too where every property is selected), so nothing but the
SDK's record path (the message, stream maps, the writer, the record counter) stands between
the decoded page and stdout. A tap of the feed does this and more; a ratio it cannot reach, no
tap on the SDK's record path reaches (docs/performance.md).

Run from the repository's root, as a module: the token request is the raw loop's, imported
from the package.
"""

from __future__ import annotations

import sys
import typing as t
from functools import cached_property

import requests
from singer_sdk import Tap
from singer_sdk.authenticators import BearerTokenAuthenticator
from singer_sdk.contrib.msgspec import MsgSpecWriter
from singer_sdk.helpers.conform import TypeConformanceLevel
from singer_sdk.pagination import BaseAPIPaginator
from singer_sdk.singerlib import Catalog, RecordMessage
from singer_sdk.streams import RESTStream
from typing_extensions import override

from benchmarks import raw_loop  # the baseline client's token request
from tap_accessgov import schemas
from tap_accessgov.output import record_messages


class TokenInBody(BaseAPIPaginator[str | None]):
    """The feed's next page token, from the page ``parse_response`` decoded (each page is
    decoded once, as the tap does)."""

    def __init__(self, stream: FeedStream) -> None:
        super().__init__(None)
        self._stream = stream

    @override
    def get_next(self, response: requests.Response) -> str | None:
        return self._stream.page.get("nextPageToken") or None


class FeedStream(RESTStream[str | None]):
    name = "grant_feed"
    path = "/api/v1/grants/feed"
    http_method = "POST"
    primary_keys = ("appId", "appEntitlementId", "appUserId", "eventType", "date")
    replication_key: str | None = "date"
    is_sorted = False
    schema = schemas.GRANT_FEED
    TYPE_CONFORMANCE_LEVEL = TypeConformanceLevel.NONE
    page: dict[str, t.Any] = {}  # the page parse_response decoded last

    @property
    @override
    def url_base(self) -> str:
        return str(self.config["api_url"])

    @cached_property
    @override
    def authenticator(self) -> BearerTokenAuthenticator:
        """One token for the run (the SDK asks for the authenticator at every request)."""
        return BearerTokenAuthenticator(token=raw_loop.token(dict(self.config)))

    @override
    def get_new_paginator(self) -> TokenInBody:
        return TokenInBody(self)

    @override
    def prepare_request_payload(
        self, context: t.Mapping[str, t.Any] | None, next_page_token: str | None
    ) -> dict[str, t.Any]:
        body: dict[str, t.Any] = {"pageSize": 100}
        if next_page_token:
            body["pageToken"] = next_page_token
        return body

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[dict[str, t.Any]]:
        self.page = response.json()
        for entry in self.page.get("list") or []:
            feed = entry["feed"]
            yield {
                "date": feed["date"],
                "appId": feed.get("appId"),
                "appEntitlementId": feed.get("appEntitlementId"),
                "appUserId": feed.get("appUserId"),
                "eventType": feed.get("eventType") or "GRANT_EVENT_TYPE_UNSPECIFIED",
                "feed": feed,
                "appPath": entry.get("appPath"),
                "appUserPath": entry.get("appUserPath"),
                "entitlementPath": entry.get("entitlementPath"),
                "ticketPath": entry.get("ticketPath"),
            }


class FloorStream(FeedStream):
    """The feed's entries as decoded, one RECORD each, without a bookmark or the selection
    pass (``--floor``)."""

    @override
    def apply_catalog(self, catalog: Catalog) -> None:
        super().apply_catalog(catalog)
        # the catalog names the feed's key and method: no bookmark here
        self.replication_key = None
        self.forced_replication_method = None

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[dict[str, t.Any]]:
        self.page = response.json()
        return self.page.get("list") or []

    @override
    def _generate_record_messages(
        self, record: dict[str, t.Any]
    ) -> t.Generator[RecordMessage, None, None]:
        """The SDK's RECORD messages without its selection pass, which the tap skips too
        where every property is selected (the same function): a floor that kept it would
        hold the tap to a cost the tap does not pay. The catalog here selects all."""
        return record_messages(self, record)


class PlainSdkTap(Tap):
    name = "plain-sdk-tap"
    message_writer_class = MsgSpecWriter
    config_jsonschema: t.ClassVar[dict[str, t.Any]] = {"type": "object", "properties": {}}

    @override
    def discover_streams(self) -> list[FeedStream]:
        return [FeedStream(self)]


class SdkFloorTap(PlainSdkTap):
    name = "sdk-floor-tap"

    @override
    def discover_streams(self) -> list[FeedStream]:
        return [FloorStream(self)]


if __name__ == "__main__":
    if "--floor" in sys.argv:
        sys.argv.remove("--floor")
        SdkFloorTap.cli()
    else:
        PlainSdkTap.cli()
