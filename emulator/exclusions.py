"""Automation exclusions: who is excluded from each app entitlement's automation, and the
endpoint that lists them,
GET /api/v1/apps/{app_id}/entitlements/{app_entitlement_id}/automation/exclusions.

The lists have deliberately varied sizes (see ``Exclusions``). Unlike the feed, the last page
omits `nextPageToken` (protobuf drops empty strings), so clients must treat "absent" and ""
alike.
"""

from __future__ import annotations

import random
from typing import Any

from emulator import unpopulated
from emulator.catalog import AppEntitlementKey, Catalog
from emulator.errors import NOT_FOUND, ApiError
from emulator.lifecycle import Grant
from emulator.paging import PAGING_QUERY, PageTokens, clamp_page_size, digest_of, paging_params
from emulator.seed import Seed
from emulator.users import Users


class Exclusions:
    """The exclusion lists of the catalog's ``excludable`` entitlements, in server order, and
    the exclusions removed since (``Dataset.remove``)."""

    def __init__(self, seed: Seed, catalog: Catalog, users: Users, max_size: int) -> None:
        self.catalog = catalog
        self.users = users
        self._lists = self._build(seed, max_size)
        self._removed: set[tuple[int, int, int]] = set()

    def _build(self, seed: Seed, max_size: int) -> dict[AppEntitlementKey, list[int]]:
        """User indexes excluded on each excludable entitlement, with deliberately varied sizes.

        The first has as many exclusions as allowed (multi-page at page size 100 when the
        limits allow), the second none, the fourth exactly one default page (25); all
        non-empty lists share one user, so the same user is excluded on several entitlements.
        """
        rng = random.Random(f"{seed.value}:exclusions")
        n_users = len(self.users.ids)
        cap = min(max_size, n_users)
        shared = rng.randrange(n_users)
        lists: dict[AppEntitlementKey, list[int]] = {}
        for n, key in enumerate(self.catalog.excludable):
            size = {0: cap, 1: 0, 2: min(3, cap), 3: min(25, cap)}.get(n, rng.randint(0, cap))
            members = rng.sample(range(n_users), size)
            if members and shared not in members:
                members[rng.randrange(size)] = shared
            lists[key] = members
        return lists

    @property
    def entitlements(self) -> list[tuple[str, str]]:
        """The app entitlements chosen to have exclusions (removed ones included: a client
        configured with them meets the 404)."""
        apps = self.catalog.feed_apps
        return [(apps[a].id, apps[a].entitlement_ids[k]) for a, k in self._lists]

    def first_members(self, count: int) -> list[tuple[int, int, int]]:
        """(app, entitlement, user) of the first ``count`` users of each list as built: the
        grants the lifecycles make end held, so "excluded yet holding" has answers."""
        return [(a, k, u) for (a, k), members in self._lists.items() for u in members[:count]]

    def members(self, a: int, k: int) -> list[int]:
        """User indexes excluded on entitlement (a, k) in server order; [] if none/unknown or
        removed (see Dataset.remove)."""
        if not self.catalog.entitlement_exists(a, k):
            return []
        members = self._lists.get((a, k), [])
        if not (self.users.any_removed or self._removed):
            return members
        return [
            u for u in members if not self.users.is_removed(u) and (a, k, u) not in self._removed
        ]

    def entry(self, a: int, k: int, u: int) -> dict[str, Any]:
        app = self.catalog.feed_apps[a]
        return {
            "appEntitlementId": app.entitlement_ids[k],
            "appId": app.id,
            "appUserId": self.users.app_user_id(a, u),
            "user": self.users.record(u),
        }

    def entries(self, app_id: str, entitlement_id: str) -> list[dict[str, Any]]:
        """Ground truth: the raw exclusion entries of one app entitlement, in server order
        (none for an entitlement of an app no grant event names)."""
        if not self.catalog.has_entitlement(app_id, entitlement_id):
            raise KeyError((app_id, entitlement_id))
        index = self.catalog.entitlement_index(app_id, entitlement_id)
        if index is None:
            return []
        return [self.entry(*index, u) for u in self.members(*index)]

    def excluded_users(self, held: set[Grant]) -> list[dict[str, Any]]:
        """One row per automation exclusion: who, and whether they hold that entitlement
        (``held``: the grants held at the instant asked about)."""
        rows = []
        for a, k in self._lists:
            app = self.catalog.feed_apps[a]
            for u in self.members(a, k):
                user = self.users.record(u)
                app_user = self.users.app_user_id(a, u)
                rows.append(
                    {
                        "app_id": app.id,
                        "app_entitlement_id": app.entitlement_ids[k],
                        "app_user_id": app_user,
                        "user_id": user["id"],
                        "display_name": user.get("displayName"),
                        "email": user.get("email"),
                        "status": user.get("status"),
                        "directory_status": user.get("directoryStatus"),
                        "holds_entitlement": (app.id, app.entitlement_ids[k], app_user) in held,
                    }
                )
        return rows

    def set_removed(self, app_id: str, entitlement_id: str, user_id: str, removed: bool) -> None:
        """Remove one automation exclusion or bring it back. A single set operation needs no
        lock: readers only test membership."""
        if (index := self.catalog.catalog_entitlement(app_id, entitlement_id)) is None:
            raise ValueError(f"no app entitlement {entitlement_id!r} in app {app_id!r}")
        if (u := self.users.index(user_id)) is None:
            raise ValueError(f"no user {user_id!r}")
        if u not in self._lists.get(index, []):
            raise ValueError(f"user {user_id!r} is not excluded on {entitlement_id!r}")
        if removed:
            self._removed.add((*index, u))
        else:
            self._removed.discard((*index, u))


def list_automation_exclusions(
    exclusions: Exclusions,
    tokens: PageTokens,
    app_id: str,
    entitlement_id: str,
    query: dict[str, list[str]],
    *,
    ignore_paging: bool = False,
    emit_unpopulated: bool = False,
) -> dict[str, Any]:
    """One page of exclusions. With ``ignore_paging`` the paging parameters are ignored, as a
    gateway does with query parameters the operation does not declare (the published
    description of this operation declares none): every request gets the first page and the
    same ``nextPageToken``. With ``emit_unpopulated`` unset fields are sent empty."""
    if ignore_paging:
        query = {key: values for key, values in query.items() if key not in PAGING_QUERY}
    params = paging_params(query)
    if not exclusions.catalog.has_entitlement(app_id, entitlement_id):
        raise ApiError(404, NOT_FOUND, "app entitlement not found")
    index = exclusions.catalog.entitlement_index(app_id, entitlement_id)
    page_size = clamp_page_size(params.page_size)
    digest = digest_of(["exclusions", app_id, entitlement_id])
    start = tokens.decode(params.page_token, digest) if params.page_token else 0
    members = exclusions.members(*index) if index is not None else []
    end = start + page_size
    page = [exclusions.entry(*index, u) for u in members[start:end]] if index is not None else []
    response: dict[str, Any] = {"list": page or None}
    if end < len(members):
        response["nextPageToken"] = tokens.encode(end, digest)
    return unpopulated.exclusions_page(response) if emit_unpopulated else response
