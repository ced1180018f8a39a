"""The grants the service holds now, and the two ways it lists them:
``GET /api/v1/apps/{app_id}/entitlements/{app_entitlement_id}/users`` (one entitlement) and
``POST /api/v1/search/grants`` (a search, e.g. one app).

What is held now agrees with the grant feed: every grant the feed's history holds now (the
rules of emulator/lifecycle.py), with its start and originating ticket from the ADDED that
opened it; plus grants the feed never names because they were made before it began (on a
real tenant the feed began in October 2024 and reaches back no further): ``before_feed``
grants of users' accounts the lifecycle plan leaves untouched, and the grants of the accounts
nobody owns. A grant made before the feed and removed in it later shows in the feed as a
REMOVED with no ADDED (the plan's grants "held since before the feed") and is not held now.
Grants of a removed account, entitlement or app are not held either; the feed, being
history, keeps their events (so the feed then holds what the service does not).

Shapes from the vendor's published OpenAPI: ``AppEntitlementUserView = {appId,
appEntitlementId, appUserId, appUser (an AppUserView), appEntitlementUserBindingCreatedAt,
appEntitlementUserBindingDeprovisionAt, grantSources [{appId, id}], originatingTicketId}``;
the search answers ``{appEntitlementUserBinding, entitlement (an AppEntitlementView)}`` per
grant and reads its filters and paging from a strict protobuf-JSON body.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from typing import Any, NamedTuple

from emulator import protojson, unpopulated
from emulator.accounts import Accounts
from emulator.catalog import PURPOSES, app_entitlement_object, app_object
from emulator.errors import NOT_FOUND, ApiError, bad_request
from emulator.feed import TYPE_PREFIX, GrantFeed
from emulator.lifecycle import LifecyclePlan
from emulator.paging import PageTokens, clamp_page_size, digest_of, list_page, page_range
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise

DAY = 86_400 * NS


def drawn_before(draw: int, before: int) -> int:
    """An instant 1 to 901 days before ``before`` (ns), drawn from ``draw``, in one of the
    four timestamp precisions: the start the service kept of a grant made before the feed
    (here, and the start of an ended period in past_grants.py)."""
    back = DAY + draw % (900 * DAY // NS) * NS
    return precise(before - back, (0, 3, 6, 9)[draw % 4])


class CurrentGrant(NamedTuple):
    """Ground truth of one grant held now. ``feed_knows``: the feed's history holds it (its
    start is then the feed's ADDED); otherwise it is older than the feed."""

    app_id: str
    app_entitlement_id: str
    app_user_id: str
    created_at: int  # ns since the epoch: the binding's start
    deprovision_at: int | None  # scheduled end, None: none
    sources: tuple[tuple[str, str], ...]  # (app id, entitlement id) it comes through; () direct
    originating_ticket_id: str | None
    feed_knows: bool


Row = tuple[int, int, int, CurrentGrant]  # app index, entitlement index, account number, grant


class CurrentGrants:
    """The current grants by entitlement, computed from the feed when it has grown (events
    added at run time change what is held) and filtered by what was removed when read."""

    def __init__(
        self,
        seed: Seed,
        accounts: Accounts,
        feed: GrantFeed,
        plan: LifecyclePlan,
        *,
        before_feed: int,
    ) -> None:
        self.seed = seed
        self.accounts = accounts
        self.catalog = accounts.catalog
        self.feed = feed
        self._plan, self._before_feed = plan, before_feed
        self._lock = threading.Lock()
        self._computed_at = -1  # the feed's event total the rows were computed at
        self._rows: dict[tuple[int, int], list[Row]] = {}

    def _older_than_feed(self) -> list[tuple[int, int, int]]:
        """(app, entitlement, account) of the grants made before the feed: users' accounts
        the feed never names, and one to three grants of each account nobody owns."""
        older = list(self._plan.untouched(self._before_feed))
        for a, app in enumerate(self.catalog.feed_apps):
            entitlements = len(app.entitlement_ids)
            for n in self.accounts.unowned(a):
                for j in range(1 + self.seed.mix(21, a * 4096 + n) % 3):
                    older.append((a, (self.seed.mix(22, n * 8 + j) + j) % entitlements, n))
        return sorted(set(older))

    def made_before_feed(self) -> list[CurrentGrant]:
        """Every grant made before the feed began (``feed_knows`` False), before removals: no
        feed event names them, then or at run time, so the list never changes."""
        return [self._grant(a, k, n, None, None) for a, k, n in self._older_than_feed()]

    # ----- the grants -------------------------------------------------------------------------

    def _grant(self, a: int, k: int, n: int, start: int | None, ticket: str | None) -> CurrentGrant:
        """A held grant's record; ``start`` and ``ticket`` from the feed's ADDED, or (None)
        drawn before the feed began."""
        app = self.catalog.feed_apps[a]
        draw = self.seed.mix(23, (a * 4096 + k) * 1_000_003 + n)
        feed_knows = start is not None
        if start is None:
            start = drawn_before(draw, self.feed.first_date)
            ticket = self.seed.id("ticket-before-feed", a, k, n) if draw % 5 < 2 else None
        end = None
        if draw % 100 < 10:
            end = precise(self.catalog.end_ns + DAY + (draw >> 8) % (90 * DAY // NS) * NS, 0)
        sources: tuple[tuple[str, str], ...] = ()
        entitlements = len(app.entitlement_ids)
        if (draw >> 4) % 100 < 15 and entitlements > 1:
            other = (k + 1 + (draw >> 12) % (entitlements - 1)) % entitlements
            sources = ((app.id, app.entitlement_ids[other]),)
        return CurrentGrant(
            app.id,
            app.entitlement_ids[k],
            self.accounts.app_user_id(a, n),
            start,
            end,
            sources,
            ticket,
            feed_knows,
        )

    def _all_rows(self) -> dict[tuple[int, int], list[Row]]:
        """Every grant held now by (app, entitlement), in server order (by app user id),
        before removals: computed when first asked (a tenant that is never asked pays
        nothing), again when the feed has grown."""
        with self._lock:
            total = self.feed.total
            if total == self._computed_at:
                return self._rows
            rows: dict[tuple[int, int], list[Row]] = {}
            seen: set[tuple[int, int, int]] = set()
            for interval in self.feed.grants_at(None):
                ent = self.catalog.entitlement_index(interval.app_id, interval.app_entitlement_id)
                account = self.accounts.find(interval.app_id, interval.app_user_id)
                if ent is None or account is None:
                    continue
                (a, k), n = ent, account[1]
                grant = self._grant(a, k, n, interval.granted_at, interval.granted_ticket_id)
                rows.setdefault((a, k), []).append((a, k, n, grant))
                seen.add((a, k, n))
            for a, k, n in self._older_than_feed():
                if (a, k, n) not in seen:
                    rows.setdefault((a, k), []).append((a, k, n, self._grant(a, k, n, None, None)))
            for listed in rows.values():
                listed.sort(key=lambda row: row[3].app_user_id)
            self._rows, self._computed_at = rows, total
            return rows

    def rows(self, a: int, k: int) -> list[Row]:
        """The grants of entitlement (a, k) held now, removals applied, in server order."""
        if not self.catalog.entitlement_exists(a, k):
            return []
        listed = self._all_rows().get((a, k), [])
        if not self.accounts.any_removed:
            return listed
        return [row for row in listed if not self.accounts.is_removed(a, row[2])]

    def current(self) -> list[CurrentGrant]:
        """Ground truth: every grant held now, by app, entitlement and app user."""
        return [
            row[3]
            for a, app in enumerate(self.catalog.feed_apps)
            for k in range(len(app.entitlement_ids))
            for row in self.rows(a, k)
        ]

    # ----- answers ----------------------------------------------------------------------------

    def binding_view(self, row: Row, emit_unpopulated: bool) -> dict[str, Any]:
        """The AppEntitlementUserView of a grant."""
        a, _, n, grant = row
        view = {
            "appEntitlementId": grant.app_entitlement_id,
            "appEntitlementUserBindingCreatedAt": format_ns(grant.created_at),
            "appEntitlementUserBindingDeprovisionAt": (
                None if grant.deprovision_at is None else format_ns(grant.deprovision_at)
            ),
            "appId": grant.app_id,
            "appUser": self.accounts.view(a, n, emit_unpopulated),
            "appUserId": grant.app_user_id,
            "grantSources": [{"appId": app, "id": ent} for app, ent in grant.sources],
            "originatingTicketId": grant.originating_ticket_id or "",
        }
        return view if emit_unpopulated else unpopulated.stripped(view)


def list_entitlement_users(
    grants: CurrentGrants,
    tokens: PageTokens,
    app_id: str,
    entitlement_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps/{app_id}/entitlements/{app_entitlement_id}/users``: 404
    for an unknown or removed entitlement, an empty list for one nobody holds."""
    if not grants.catalog.has_entitlement(app_id, entitlement_id):
        raise ApiError(404, NOT_FOUND, "app entitlement not found")
    index = grants.catalog.entitlement_index(app_id, entitlement_id)
    rows = grants.rows(*index) if index is not None else []
    digest = digest_of(["entitlement_users", app_id, entitlement_id])
    positions, next_token = page_range(tokens, digest, query, len(rows))
    views = [grants.binding_view(rows[p], emit_unpopulated) for p in positions]
    return list_page(views, next_token, emit_unpopulated)


# ----- POST /api/v1/search/grants -----------------------------------------------------------

# JSON name -> proto name (AppEntitlementSearchServiceSearchGrantsRequest).
SEARCH_FIELDS = {
    "appIds": "app_ids",
    "appUserIds": "app_user_ids",
    "entitlementRefs": "entitlement_refs",
    "entitlementSlugs": "entitlement_slugs",
    "expandMask": "expand_mask",
    "pageSize": "page_size",
    "pageToken": "page_token",
    "purpose": "purpose",
    "resourceIds": "resource_ids",
    "resourceTypeIds": "resource_type_ids",
    "userId": "user_id",
}
ENTITLEMENT_REF = {"appId": "app_id", "id": "id"}
# expandMask.paths of an entitlement search: the id fields of what an AppEntitlementView
# points at (only apps have objects here: no entitlement has a resource).
EXPAND_PATHS = ("app_id", "app_resource_type_id", "app_resource_id")


class _Search(NamedTuple):
    """A grant search's filters; an empty list filters nothing (protobuf)."""

    app_ids: list[str]
    app_user_ids: list[str]
    entitlement_refs: list[tuple[str, ...]]
    slugs: list[str]
    purposes: list[str]
    resource_ids: list[str]
    resource_type_ids: list[str]
    user_id: str
    expand: list[str]


def _parse_search(body: bytes) -> tuple[_Search, int, str]:
    """The search, its page size and its page token; 400 for anything the service refuses."""
    req = protojson.fields(protojson.body_object(body), SEARCH_FIELDS, "request")
    purposes = protojson.strings(req.get("purpose", []), "purpose")
    for value in purposes:
        if value not in PURPOSES:
            raise bad_request(f'purpose: unknown enum value "{value}"')
    expand: list[str] = []
    if "expandMask" in req:
        mask = protojson.fields(req["expandMask"], {"paths": "paths"}, "expandMask")
        expand = protojson.strings(mask.get("paths", []), "expandMask.paths")
        for path in expand:
            if path != "*" and path not in EXPAND_PATHS:
                raise bad_request(f'unknown expandMask path "{path}"')
        expand = list(EXPAND_PATHS) if "*" in expand else sorted(set(expand))
    search = _Search(
        sorted(set(protojson.strings(req.get("appIds", []), "appIds"))),
        sorted(set(protojson.strings(req.get("appUserIds", []), "appUserIds"))),
        sorted(
            set(protojson.refs(req.get("entitlementRefs", []), "entitlementRefs", ENTITLEMENT_REF))
        ),
        sorted(set(protojson.strings(req.get("entitlementSlugs", []), "entitlementSlugs"))),
        sorted(set(purposes)),
        sorted(set(protojson.strings(req.get("resourceIds", []), "resourceIds"))),
        sorted(set(protojson.strings(req.get("resourceTypeIds", []), "resourceTypeIds"))),
        protojson.string(req.get("userId", ""), "userId"),
        expand,
    )
    page_size = clamp_page_size(protojson.int32(req.get("pageSize", 0), "pageSize"))
    return search, page_size, protojson.string(req.get("pageToken", ""), "pageToken")


def _matching(grants: CurrentGrants, search: _Search) -> Iterable[Row]:
    """The grants a search finds, in server order (by app, entitlement, app user)."""
    catalog = grants.catalog
    apps = range(len(catalog.feed_apps))
    if search.app_ids:
        found = (catalog.feed_app_index(app_id) for app_id in search.app_ids)
        apps = sorted(a for a in found if a is not None)  # type: ignore[assignment]
    refs = set(search.entitlement_refs)
    app_users = set(search.app_user_ids)
    owner = grants.accounts.users.index(search.user_id) if search.user_id else None
    by_entitlement = bool(
        search.slugs or search.purposes or search.resource_ids or search.resource_type_ids
    )
    for a in apps:
        app = catalog.feed_apps[a]
        for k, entitlement_id in enumerate(app.entitlement_ids):
            if refs and (app.id, entitlement_id) not in refs:
                continue
            if by_entitlement and not _entitlement_matches(grants, search, a, k):
                continue
            for row in grants.rows(a, k):
                if app_users and row[3].app_user_id not in app_users:
                    continue
                if search.user_id and (owner is None or grants.accounts.owner(row[2]) != owner):
                    continue
                yield row


def _entitlement_matches(grants: CurrentGrants, search: _Search, a: int, k: int) -> bool:
    entitlement = app_entitlement_object(grants.catalog, a, k)
    return (
        (not search.slugs or entitlement["slug"] in search.slugs)
        and (not search.purposes or entitlement["purpose"] in search.purposes)
        and (not search.resource_ids or entitlement["appResourceId"] in search.resource_ids)
        and (
            not search.resource_type_ids
            or entitlement["appResourceTypeId"] in search.resource_type_ids
        )
    )


def search_grants(
    grants: CurrentGrants,
    tokens: PageTokens,
    body: bytes,
    emit_unpopulated: bool,
    inline_owners: bool = False,
) -> dict[str, Any]:
    """One page of ``POST /api/v1/search/grants`` (an expanded App's ``appOwners`` as
    ``GET /api/v1/apps`` sends them, see catalog.app_object)."""
    search, page_size, page_token = _parse_search(body)
    digest = digest_of(["search_grants", *search])
    start = tokens.decode(page_token, digest) if page_token else 0
    # The page and one more grant, which says whether there is a next page.
    page_rows = list(itertools.islice(_matching(grants, search), start, start + page_size + 1))
    end = start + min(page_size, len(page_rows))
    next_token = tokens.encode(end, digest) if len(page_rows) > page_size else ""
    expanded: list[dict[str, Any]] = []
    app_paths: dict[int, str] = {}
    entitlements: dict[tuple[int, int], dict[str, Any]] = {}
    items = []
    for row in page_rows[:page_size]:
        a, k = row[0], row[1]
        if (a, k) not in entitlements:
            entitlements[(a, k)] = app_entitlement_object(grants.catalog, a, k)
        app_path = ""
        if "app_id" in search.expand:
            if a not in app_paths:
                app_paths[a] = f"$.expanded[{len(expanded)}]"
                expanded.append(
                    {
                        "@type": TYPE_PREFIX + "app.v1.App",
                        **app_object(grants.catalog, a, inline_owners=inline_owners),
                    }
                )
            app_path = app_paths[a]
        items.append(
            {
                "appEntitlementUserBinding": grants.binding_view(row, emit_unpopulated),
                "entitlement": _entitlement_view(entitlements[(a, k)], app_path, emit_unpopulated),
            }
        )
    if emit_unpopulated:
        return {"list": items, "expanded": expanded, "nextPageToken": next_token}
    page: dict[str, Any] = {"list": items or None, "expanded": expanded or None}
    if next_token:
        page["nextPageToken"] = next_token
    return page


def _entitlement_view(
    entitlement: dict[str, Any], app_path: str, emit_unpopulated: bool
) -> dict[str, Any]:
    """An AppEntitlementView as the catalog's entitlements endpoint writes it."""
    view: dict[str, Any] = {
        "appEntitlement": entitlement,
        "appPath": app_path,
        "appResourcePath": "",
        "appResourceTypePath": "",
    }
    if emit_unpopulated:
        return view
    view = unpopulated.stripped(view)
    view["appEntitlement"] = unpopulated.stripped(
        entitlement, oneof_members=("durationGrant", "durationUnset")
    )
    return view
