"""The grants that ended, and how the service lists them: ``POST /api/v1/search/past-grants``.

What ended agrees with the grant feed and reaches back before it: every interval of the feed's
history that closed (emulator/lifecycle.py's rules), its start from the ADDED that opened it or,
for a grant held since before the feed (a REMOVED with no ADDED), the start the service kept
from before the feed began; and ``ended_before_feed`` grants that began and ended before the
feed (on a real tenant the feed began in October 2024; the service's own grant history is
older). Some of those are grants of the same account and entitlement the feed names later: a
second period of one grant. Grants held now are not here (they are in search/grants).

Shapes from the vendor's published OpenAPI: a ``SearchPastGrantsRequest`` (``appIds``,
``appEntitlementRefs``, ``appUserRefs``, ``expandMask``, paging) answered with ``list`` of
``{history: {id, appId, appEntitlementId, appUserId, grantedAt, revokedAt}, appPath,
appUserPath, entitlementPath}``; ``history.id`` is new in August 2026 (emulator/shapes.py
drops it for older releases). No time filter and no documented order: the answer is sorted by
its history id, which orders nothing a client could use.
"""

from __future__ import annotations

import threading
import zlib
from typing import Any, NamedTuple

from emulator import protojson
from emulator.errors import bad_request
from emulator.grants import CurrentGrants, drawn_before
from emulator.paging import PageTokens, clamp_page_size, digest_of
from emulator.seed import Seed
from emulator.timefmt import format_ns

FIELDS = {
    "appIds": "appIds",
    "appEntitlementRefs": "appEntitlementRefs",
    "appUserRefs": "appUserRefs",
    "expandMask": "expandMask",
    "pageSize": "pageSize",
    "pageToken": "pageToken",
}


class PastGrant(NamedTuple):
    """Ground truth of one ended grant period (times in ns since the epoch)."""

    id: str
    app_id: str
    app_entitlement_id: str
    app_user_id: str
    granted_at: int
    revoked_at: int
    feed_knows: bool  # the feed's history holds its end


class PastGrants:
    """Every ended grant period, computed when first asked and again when the feed grew."""

    def __init__(self, seed: Seed, grants: CurrentGrants, *, ended_before_feed: int) -> None:
        self.seed = seed
        self.grants = grants
        self.accounts = accounts = grants.accounts
        self.catalog = accounts.catalog
        self.feed = grants.feed
        self._before_feed = ended_before_feed
        self._lock = threading.Lock()
        self._computed_at = -1
        self._ended: list[PastGrant] = []
        self._by_app: dict[str, list[PastGrant]] = {}

    def _id(self, app_id: str, entitlement_id: str, app_user_id: str, granted_at: int) -> str:
        return self.seed.id("grant-history", app_id, entitlement_id, app_user_id, granted_at)

    def _older(self) -> list[PastGrant]:
        """The periods that began and ended before the feed, drawn over the catalog's grants
        (so some are earlier periods of grants the feed names)."""
        apps = self.catalog.feed_apps
        out = []
        for j in range(self._before_feed):
            draw = self.seed.mix(31, j)
            a = draw % len(apps)
            k = (draw >> 8) % len(apps[a].entitlement_ids)
            n = (draw >> 20) % max(1, self.accounts.count(a))
            revoked = drawn_before(draw >> 5, self.feed.first_date)
            granted = drawn_before(draw >> 13, revoked)
            app_user = self.accounts.app_user_id(a, n)
            entitlement = apps[a].entitlement_ids[k]
            ident = self._id(apps[a].id, entitlement, app_user, granted)
            out.append(PastGrant(ident, apps[a].id, entitlement, app_user, granted, revoked, False))
        return out

    def ended(self) -> list[PastGrant]:
        """Ground truth: every ended grant period, sorted by its id (the server's order). A
        grant's periods never overlap: a period drawn before the feed that would reach past
        the start of the grant's next one (its start kept from before the feed, or a grant
        held now since before it) is not part of the history."""
        with self._lock:
            if self._computed_at == self.feed.total:
                return self._ended
            found: list[PastGrant] = []
            later: dict[tuple[str, str, str], int] = {  # a grant's first start the feed knows not
                (g.app_id, g.app_entitlement_id, g.app_user_id): g.created_at
                for g in self.grants.made_before_feed()
            }
            for interval in self.feed.intervals():
                grant = (interval.app_id, interval.app_entitlement_id, interval.app_user_id)
                if interval.revoked_at is None:
                    continue
                granted = interval.granted_at
                if granted is None:  # held since before the feed: the service knows when
                    draw = self.seed.mix(32, zlib.crc32("|".join(grant).encode()))
                    granted = drawn_before(draw, self.feed.first_date)
                    later[grant] = min(granted, later.get(grant, granted))
                found.append(
                    PastGrant(self._id(*grant, granted), *grant, granted, interval.revoked_at, True)
                )
            for period in sorted(self._older(), key=lambda p: -p.granted_at):
                grant = (period.app_id, period.app_entitlement_id, period.app_user_id)
                if period.revoked_at < later.get(grant, self.feed.first_date):
                    found.append(period)
                    later[grant] = period.granted_at
            self._ended = sorted(found)
            self._by_app = {}
            for period in self._ended:
                self._by_app.setdefault(period.app_id, []).append(period)
            self._computed_at = self.feed.total
            return self._ended

    def of_apps(self, apps: set[str]) -> list[PastGrant]:
        """The ended periods of ``apps`` (every one when empty), in the server's order: what
        a search reads before its other filters, so that one app's search does not scan
        every app's history."""
        ended = self.ended()
        if not apps:
            return ended
        with self._lock:
            lists = [self._by_app.get(app, []) for app in apps]
        # one app's list is in the server's order already (ended() made it so)
        return lists[0] if len(lists) == 1 else sorted(p for found in lists for p in found)


def history_view(past: PastGrant) -> dict[str, Any]:
    """An AppEntitlementUserBindingHistoryView, in the newest release's shape."""
    return {
        "history": {
            "id": past.id,
            "appId": past.app_id,
            "appEntitlementId": past.app_entitlement_id,
            "appUserId": past.app_user_id,
            "grantedAt": format_ns(past.granted_at),
            "revokedAt": format_ns(past.revoked_at),
        },
        "appPath": "",
        "appUserPath": "",
        "entitlementPath": "",
    }


REF = {"appId": "app_id", "id": "id"}  # an AppEntitlementRef or AppUserRef: both required


def search_past_grants(past: PastGrants, tokens: PageTokens, body: bytes) -> dict[str, Any]:
    """One page of ended grants matching every filter given (an empty filter matches all)."""
    request = protojson.fields(protojson.body_object(body), FIELDS, "request")
    apps = set(protojson.strings(request.get("appIds") or [], "appIds"))
    entitlements = set(
        protojson.refs(request.get("appEntitlementRefs") or [], "appEntitlementRefs", REF)
    )
    app_users = set(protojson.refs(request.get("appUserRefs") or [], "appUserRefs", REF))
    if request.get("expandMask") not in (None, {}, {"paths": []}):
        raise bad_request('field "expandMask" of the request is not emulated')
    page_size = clamp_page_size(protojson.int32(request.get("pageSize", 0), "pageSize"))
    page_token = protojson.string(request.get("pageToken", ""), "pageToken")
    digest = digest_of(["past-grants", sorted(apps), sorted(entitlements), sorted(app_users)])
    start = tokens.decode(page_token, digest) if page_token else 0
    # Where to look: the apps named by the search (any filter names its app).
    named = apps or {app for app, _ in entitlements} or {app for app, _ in app_users}
    # Every period of the named apps matches appIds; the other filters are checked one by
    # one. A search of one whole app (the usual one) pages through that app's periods as
    # kept, without a copy per page (benchmarks/past_grants_benchmark.py: 200,000 periods).
    matching = past.of_apps(named)
    if entitlements or app_users:
        matching = [
            p
            for p in matching
            if (not entitlements or (p.app_id, p.app_entitlement_id) in entitlements)
            and (not app_users or (p.app_id, p.app_user_id) in app_users)
        ]
    listed = matching[start : start + page_size]
    end = start + len(listed)
    return {
        "list": [history_view(p) for p in listed],
        "expanded": [],
        "nextPageToken": tokens.encode(end, digest) if end < len(matching) else "",
    }
