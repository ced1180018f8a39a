"""Owners: the people who answer for an app or an app entitlement, and their endpoints
``GET /api/v1/apps/{app_id}/owners``, ``GET /api/v1/apps/{app_id}/entitlements/{id}/owners``
and the 2026 releases' ``GET /api/v2/apps/{app_id}/entitlements/{id}/owners/users``.

About a third of the catalog's apps have no owner and about a third of the entitlements none
of their own; the others have one to three (apps) or one or two (entitlements), people of the
whole directory (emulator/directory.py). Owners are named once and kept, whatever becomes of
them: some are people who left, which the directory says as it says it of anyone
(``directoryStatus`` DELETED or DISABLED, or ``status`` DELETED with ``deletedAt``; they are
still listed by ``GET /api/v1/users``), and a person removed from the directory between runs
(``Dataset.remove(user_id=...)``) stays the owner of what they owned, as the accounts they
owned keep naming them. The owner lists send the whole User, as the directory does (the same
code: unset fields sent empty by default, omitted when told). The v2 list adds each owner's
role (``roleSlug``: ``owner`` or ``backup-owner``, which its ``role_slug`` parameter filters
on) and since when (``createdAt``).

Owners draw from generators of their own (``{seed}-scoping:...``). Shapes from the vendor's
published OpenAPI (``ListAppOwnersResponse``, ``ListAppEntitlementOwnersResponse``: a list of
User; ``c1.api.app.v2.AppEntitlementOwnerUser``); an unknown or removed app or entitlement is
404.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from emulator import unpopulated
from emulator.catalog import Catalog
from emulator.directory import Directory
from emulator.errors import NOT_FOUND, ApiError, bad_request
from emulator.paging import PageTokens, digest_of, list_page, page_range
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise

DAY = 86_400 * NS
ROLE_SLUGS = ("owner", "backup-owner")
ROLE_SLUG_QUERY = ("role_slug", "roleSlug")  # gRPC-gateway takes the proto or JSON name


class Owner(NamedTuple):
    """One owner of an app entitlement: the person (a directory index), the role and since
    when (the v2 list's fields)."""

    user: int
    role_slug: str
    since_ns: int


class AppOwners(NamedTuple):
    app: list[int]  # directory indexes of the app's owners
    entitlements: list[list[Owner]]  # each entitlement's own owners


class Owners:
    """Who owns each app of the catalog and each of its entitlements (drawn per app on first
    use)."""

    def __init__(self, seed: Seed, catalog: Catalog, directory: Directory) -> None:
        self.seed = seed
        self.catalog = catalog
        self.directory = directory
        self._owners: dict[int, AppOwners] = {}

    def of_app(self, position: int) -> AppOwners:
        if (found := self._owners.get(position)) is not None:
            return found
        rng = random.Random(f"{self.seed.value}-scoping:owners:{position}")
        people = range(self.directory.people)
        app = [] if rng.random() < 1 / 3 else rng.sample(people, rng.randint(1, 3))
        entitlements = []
        for _ in self.catalog.apps[position].entitlement_ids:
            chosen = [] if rng.random() < 1 / 3 else rng.sample(people, rng.randint(1, 2))
            owners = []
            for n, user in enumerate(chosen):
                role = ROLE_SLUGS[0] if n == 0 else rng.choice(ROLE_SLUGS)
                since = self.catalog.end_ns - rng.randrange(700 * DAY)
                owners.append(Owner(user, role, precise(since, rng.choice((0, 3, 6, 9)))))
            entitlements.append(owners)
        found = self._owners[position] = AppOwners(app, entitlements)
        return found

    def user(self, index: int, emit_unpopulated: bool) -> dict[str, Any]:
        """An owner's User as the directory sends it."""
        user = self.directory.record(index)
        return unpopulated.filled(user, unpopulated.USER) if emit_unpopulated else user

    def owner_user(
        self, position: int, k: int, owner: Owner, emit_unpopulated: bool
    ) -> dict[str, Any]:
        """An AppEntitlementOwnerUser of the v2 list."""
        app = self.catalog.apps[position]
        return {
            "appId": app.id,
            "createdAt": format_ns(owner.since_ns),
            "entitlementId": app.entitlement_ids[k],
            "roleSlug": owner.role_slug,
            "user": self.user(owner.user, emit_unpopulated),
        }

    def app_users(self, position: int) -> list[dict[str, Any]]:
        """The Users who own the app at ``position`` (unset fields omitted): its inline
        ``appOwners``."""
        return [self.user(u, False) for u in self.of_app(position).app]

    # ----- ground truth: as the lists send them by default (unset fields empty) ---------------

    def apps_truth(self) -> dict[str, list[dict[str, Any]]]:
        """Each app listed now, its owners."""
        apps = self.catalog.apps
        return {
            apps[p].id: [self.user(u, True) for u in self.of_app(p).app]
            for p in self.catalog.current_apps()
        }

    def _current_entitlements(self) -> list[tuple[int, int]]:
        return [
            (p, k)
            for p in self.catalog.current_apps()
            for k in self.catalog.current_entitlements(p)
        ]

    def entitlements_truth(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Each app entitlement listed now, its own owners."""
        apps = self.catalog.apps
        return {
            (apps[p].id, apps[p].entitlement_ids[k]): [
                self.user(owner.user, True) for owner in self.of_app(p).entitlements[k]
            ]
            for p, k in self._current_entitlements()
        }

    def owner_users_truth(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Each app entitlement listed now, its owners as the v2 list sends them."""
        apps = self.catalog.apps
        return {
            (apps[p].id, apps[p].entitlement_ids[k]): [
                self.owner_user(p, k, owner, True) for owner in self.of_app(p).entitlements[k]
            ]
            for p, k in self._current_entitlements()
        }


def list_app_owners(
    owners: Owners,
    tokens: PageTokens,
    app_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps/{app_id}/owners``."""
    position = owners.catalog.current_position(app_id)
    if position is None:
        raise ApiError(404, NOT_FOUND, "app not found")
    listed = owners.of_app(position).app
    digest = digest_of(["app_owners", app_id])
    positions, next_token = page_range(tokens, digest, query, len(listed))
    users = [owners.user(listed[n], emit_unpopulated) for n in positions]
    return list_page(users, next_token, emit_unpopulated, expanded=False)


def _entitlement(owners: Owners, app_id: str, entitlement_id: str) -> tuple[int, int]:
    index = owners.catalog.catalog_entitlement(app_id, entitlement_id)
    if index is None or not owners.catalog.entitlement_exists(*index):
        raise ApiError(404, NOT_FOUND, "app entitlement not found")
    return index


def list_entitlement_owners(
    owners: Owners,
    tokens: PageTokens,
    app_id: str,
    entitlement_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps/{app_id}/entitlements/{entitlement_id}/owners``."""
    position, k = _entitlement(owners, app_id, entitlement_id)
    listed = owners.of_app(position).entitlements[k]
    digest = digest_of(["entitlement_owners", app_id, entitlement_id])
    positions, next_token = page_range(tokens, digest, query, len(listed))
    users = [owners.user(listed[n].user, emit_unpopulated) for n in positions]
    return list_page(users, next_token, emit_unpopulated, expanded=False)


def list_entitlement_owner_users(
    owners: Owners,
    tokens: PageTokens,
    app_id: str,
    entitlement_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v2/apps/{app_id}/entitlements/{entitlement_id}/owners/users``
    (2026 releases): the owners with their role, those of one role with ``role_slug``."""
    slugs = [value for name in ROLE_SLUG_QUERY for value in query.get(name, [])]
    if len(slugs) > 1:
        raise bad_request('query parameter "role_slug" given more than once')
    paging = {name: values for name, values in query.items() if name not in ROLE_SLUG_QUERY}
    position, k = _entitlement(owners, app_id, entitlement_id)
    listed = [
        owner
        for owner in owners.of_app(position).entitlements[k]
        if not slugs or not slugs[0] or owner.role_slug == slugs[0]
    ]
    digest = digest_of(["entitlement_owner_users", app_id, entitlement_id, slugs])
    positions, next_token = page_range(tokens, digest, paging, len(listed))
    items = [owners.owner_user(position, k, listed[n], emit_unpopulated) for n in positions]
    if not emit_unpopulated:
        items = [unpopulated.stripped(item) for item in items]
    return list_page(items, next_token, emit_unpopulated, expanded=False)
