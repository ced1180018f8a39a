"""``past_grants``: every grant period that ended, ``POST /api/v1/search/past-grants``. With
the grants held now (``grants``, their start included), what reaches back before the grant
feed began (October 2024 on a real tenant).

The search has no time filter and no order. A first sync reads every app's ended grants, one
search series per app of the catalog, fetched ahead within ``max_concurrency``. A period that
ended never changes, so a later sync asks only for the grants that can have ended since: the
grant feed's REMOVED events since the bookmark name them (one read of the feed from the
bookmark, the size of the grant_feed stream's own nightly read), and past grants are searched
for those only: each app entitlement with the accounts removed from it (``appEntitlementRefs``
and ``appUserRefs``, up to 100 accounts a search). Requests then grow with the removals since
the last run, not with the history. The bookmark (``revokedAt``) is the latest end delivered,
never later than the run's start (what ends while a run reads is read by the next); an
incremental sync delivers no period that ended before it.

The key is the grant and its start, not ``history.id``: releases before August 2026 send no
id, and a key that changed with the service's release would load every period twice across
the upgrade. The id is kept as a column where sent.

A grant that ends without a REMOVED event (its account or entitlement deleted from the
service) is read by the next full read: ``--full-refresh``, or a state without this stream.
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.stream import ApiConnection
from tap_accessgov.engine.windowed import RunCappedStream
from tap_accessgov.paging import BodyPaging, page_body
from tap_accessgov.streams.apps import AppsStream
from tap_accessgov.streams.grant_feed import GrantFeedStream
from tap_accessgov.timestamps import normalize_timestamp

if t.TYPE_CHECKING:
    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

Record = dict[str, t.Any]
Search = dict[str, t.Any]
REMOVED = "GRANT_EVENT_TYPE_REMOVED"
ACCOUNTS_PER_SEARCH = 100
KEYS = ("appId", "appEntitlementId", "appUserId")


class PastGrantsStream(BodyPaging, RunCappedStream):
    """Ended grant periods: every app's on a first sync, then those the feed says ended since
    the bookmark (module docstring)."""

    name = "past_grants"
    path = "/api/v1/search/past-grants"
    http_method = "POST"
    replication_key = "revokedAt"
    is_sorted = False
    primary_keys = ("appId", "appEntitlementId", "appUserId", "grantedAt")
    schema = schemas.PAST_GRANT
    reads = {"apps": AppsStream, "feed": GrantFeedStream}

    def __init__(
        self, tap: Tap, *, connection: ApiConnection, apps: AppsStream, feed: GrantFeedStream
    ) -> None:
        super().__init__(tap, connection=connection)
        self.apps = apps
        self.feed = feed
        # An incremental sync's accounts removed per app entitlement, sorted: what its
        # searches ask for (``search_filters``), set before they are sent.
        self._removed: dict[tuple[str, str], list[str]] = {}

    @override
    def records(self, context: Context | None) -> t.Iterable[Record]:
        # The state's bookmark only: ``start_date`` bounds the grant feed, not the history
        # (a first sync reads every ended grant, as the tasks stream reads every task).
        bookmark = self.stream_state.get("replication_key_value")
        if not bookmark:
            return self._read([{"appId": app_id} for app_id in self.apps.app_ids()])
        since = normalize_timestamp(bookmark)
        searches = self._searches_for_removals(since)
        return (r for r in self._read(searches) if r["revokedAt"] >= since)

    def _searches_for_removals(self, since: str) -> list[Search]:
        """The searches for the grants the feed removed at or after ``since``: one per app
        entitlement and ACCOUNTS_PER_SEARCH of its accounts (``search_filters`` names them;
        a search's context holds ids of the entitlement only, since the SDK logs contexts)."""
        removed: dict[tuple[str, str], set[str]] = {}
        for event in self.feed.request_records({"after": since, "before": None}):
            if event.get("eventType") == REMOVED and all(event.get(k) for k in KEYS):
                entitlement = (event["appId"], event["appEntitlementId"])
                removed.setdefault(entitlement, set()).add(event["appUserId"])
        self._removed = {entitlement: sorted(users) for entitlement, users in removed.items()}
        searches = [
            {"appId": app_id, "appEntitlementId": entitlement_id, "accountsFrom": start}
            for (app_id, entitlement_id), users in sorted(self._removed.items())
            for start in range(0, len(users), ACCOUNTS_PER_SEARCH)
        ]
        self.logger.info(
            "past_grants: the feed removed grants of %d app entitlement(s) since %s: %d search(es)",
            len(removed),
            since,
            len(searches),
        )
        return searches

    def _read(self, searches: list[Search]) -> t.Iterator[Record]:
        """Every period the searches find, in their order, as many at once as the run's
        concurrency allows."""
        in_order = self.concurrency.in_order(
            self,
            "past grants",
            searches,
            lambda search, _stopped: self.request_records(dict(search)),
        )
        try:
            for search in searches:
                yield from in_order.take(search)
        finally:
            in_order.close()

    @override
    def search_filters(self, context: Context | None) -> dict[str, t.Any]:
        """A first sync's app, or an app entitlement with a batch of the accounts the feed
        removed from it."""
        if not context:
            return {}
        if "appEntitlementId" not in context:
            return {"appIds": [context["appId"]]}
        app_id, entitlement_id = context["appId"], context["appEntitlementId"]
        start = context["accountsFrom"]
        users = self._removed[(app_id, entitlement_id)][start : start + ACCOUNTS_PER_SEARCH]
        return {
            "appEntitlementRefs": [{"appId": app_id, "id": entitlement_id}],
            "appUserRefs": [{"appId": app_id, "id": user} for user in users],
        }

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``history`` of each view; one that cannot be keyed (an id or a date missing or
        unreadable) is skipped, with one warning per kind and run (never its values)."""
        for view in page_body(response).get("list") or []:
            history = view.get("history") if isinstance(view, dict) else None
            if not isinstance(history, dict):
                self.warn_once("Skipping a past grant without its history object")
                continue
            if not all(isinstance(history.get(k), str) and history[k] for k in KEYS):
                self.warn_once(
                    "Skipping a past grant without an app, app entitlement or app user id"
                )
                continue
            if not (history.get("grantedAt") and history.get("revokedAt")):
                self.warn_once("Skipping a past grant without a grantedAt or a revokedAt")
                continue
            try:
                granted = normalize_timestamp(history["grantedAt"])
                revoked = normalize_timestamp(history["revokedAt"])
            except (TypeError, ValueError):
                self.warn_once(
                    "Skipping a past grant whose grantedAt or revokedAt is not a date-time"
                )
                continue
            yield {
                **{k: history[k] for k in KEYS},
                "grantedAt": granted,
                "revokedAt": revoked,
                "id": history.get("id") or None,
            }
