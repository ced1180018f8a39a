"""The tenant's catalog: its apps and app entitlements, and the endpoints that list them,
``GET /api/v1/apps`` and ``GET /api/v1/apps/{app_id}/entitlements``.

The catalog holds the apps the grant feed names (3-12 entitlements each; one entitlement id is
shared by the first two apps, since ids are unique only within their app), then apps no grant
event names (a real tenant has many). It decides where automation is on, which includes every
app entitlement chosen to have automation exclusions, and remembers what was removed.

Shapes from the vendor's newest published OpenAPI (docs/vendor-openapi/): an App and an
AppEntitlement with every field (int64 values as strings, uint32/int32 as numbers, enums as
names with values newer than the description now and then, ``annotations`` a key/value map;
emulator/shapes.py serves older and changed shapes instead on request), entitlements wrapped in an AppEntitlementView, paging in the query
string (``page_size``, ``page_token``), 404 for an unknown app. The catalog agrees with the
feed (the same ids and display names as its expanded objects) and with the exclusions
(``isAutomationEnabled`` is on for every entitlement that has exclusions). An app or app
entitlement removed (``Dataset.remove``) leaves the lists; a removed app answers 404.

What other concerns say of these objects comes through the scope the dataset attaches
(``CatalogScope``): an entitlement's resource (emulator/resources.py), risk level and
compliance frameworks (attributes.py), an app's owners (``appOwners``, owners.py; only when
asked, ``Emulator(inline_app_owners=True)``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol

from emulator import unpopulated
from emulator.errors import NOT_FOUND, ApiError
from emulator.paging import PageTokens, digest_of, list_page, page_range
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise

ACCESS_MODELS = (
    "APP_ACCESS_MODEL_UNSPECIFIED",
    "APP_ACCESS_MODEL_CLASSIC",
    "APP_ACCESS_MODEL_HYBRID",
    "APP_ACCESS_MODEL_SPARSE",
)
PURPOSES = (
    "APP_ENTITLEMENT_PURPOSE_VALUE_UNSPECIFIED",
    "APP_ENTITLEMENT_PURPOSE_VALUE_ASSIGNMENT",
    "APP_ENTITLEMENT_PURPOSE_VALUE_ASSIGNMENT",
    "APP_ENTITLEMENT_PURPOSE_VALUE_PERMISSION",
    "APP_ENTITLEMENT_PURPOSE_VALUE_OWNERSHIP",
    "APP_ENTITLEMENT_PURPOSE_VALUE_DELEGATION",  # newer than the description: pass it through
)
AppEntitlementKey = tuple[int, int]  # (position in the catalog, entitlement index)


class CatalogScope(Protocol):
    """What the tenant's other concerns say of the catalog's objects: where an entitlement
    sits and how it is rated (resources, attributes) and who owns an app (owners). The
    dataset attaches it (``Catalog.attach_scope``); without it those fields stay empty."""

    def entitlement_fields(self, position: int, k: int) -> dict[str, Any]: ...

    def app_owners(self, position: int) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class App:
    id: str
    display_name: str
    entitlement_ids: tuple[str, ...]
    entitlement_names: tuple[str, ...]


class Catalog:
    """Apps and app entitlements by position: the feed's apps first (``feed_apps``), then the
    catalog-only ones; ``apps`` is every app in the order the service lists them."""

    def __init__(
        self,
        seed: Seed,
        *,
        feed_apps: int,
        users: int,
        exclusion_entitlements: int,
        total_apps: int,
        total_entitlements: int | None,
        end_ns: int,
    ) -> None:
        self.seed = seed
        self.users = users  # how many users the feed's apps have (their userCount)
        self.end_ns = end_ns
        self.feed_apps = self._build_feed_apps(feed_apps)
        self.apps = self.feed_apps + self._build_catalog_only_apps(total_apps, total_entitlements)
        self._feed_app_index = {app.id: a for a, app in enumerate(self.feed_apps)}
        self._feed_entitlement_index = {
            (app.id, ent): (a, k)
            for a, app in enumerate(self.feed_apps)
            for k, ent in enumerate(app.entitlement_ids)
        }
        self._position = {app.id: a for a, app in enumerate(self.apps)}
        self.excludable = self._choose_excludable(exclusion_entitlements)
        self._excludable = set(self.excludable)
        # What remove() deleted on the service since (restore() brings it back).
        self._removed_apps: set[int] = set()
        self._removed_entitlements: set[AppEntitlementKey] = set()
        self.scope: CatalogScope | None = None

    def attach_scope(self, scope: CatalogScope) -> None:
        """The concerns that fill the entitlements' resource and rating fields and the apps'
        owners (built after the catalog, from it)."""
        self.scope = scope

    def _build_feed_apps(self, count: int) -> list[App]:
        rng = random.Random(f"{self.seed.value}:catalog")
        nouns = ("Okta", "GitHub", "Salesforce", "AWS", "Slack", "Jira", "Snowflake", "Zoom")
        roles = ("admin", "read-only", "billing", "developer", "owner", "auditor", "support")
        apps: list[App] = []
        for a in range(count):
            n_entitlements = rng.randint(3, 12)
            ent_ids = [self.seed.id("entitlement", a, k) for k in range(n_entitlements)]
            if a == 1:
                # Entitlement ids are unique only within their app: make one collide.
                ent_ids[0] = apps[0].entitlement_ids[0]
            names = tuple(
                f"{roles[k % len(roles)]} {k // len(roles) + 1}" for k in range(n_entitlements)
            )
            name = f"{nouns[a % len(nouns)]} {a // len(nouns) + 1}"
            apps.append(App(self.seed.id("app", a), name, tuple(ent_ids), names))
        return apps

    def _build_catalog_only_apps(
        self, total_apps: int, total_entitlements: int | None
    ) -> list[App]:
        """Apps of the tenant's catalog that no grant event names (a real tenant has many):
        the catalog then holds ``total_apps`` apps. The first has no entitlement, the second
        several pages of them (230); with ``total_entitlements`` the others share what makes
        the catalog's entitlements add up to it, else each has one to five. Every tenth of
        their entitlements has automation on (and no exclusion)."""
        extra = max(0, total_apps - len(self.feed_apps))
        rng = random.Random(f"{self.seed.value}:catalog-only")
        counts = [0, 230][:extra]
        rest = extra - len(counts)
        if total_entitlements is not None and rest:
            in_feed = sum(len(a.entitlement_ids) for a in self.feed_apps)
            left = max(0, total_entitlements - in_feed)
            left = max(0, left - sum(counts))
            counts += [left // rest + (1 if n < left % rest else 0) for n in range(rest)]
        else:
            counts += [rng.randint(1, 5) for _ in range(rest)]
        roles = ("admin", "member", "viewer", "editor", "billing")
        apps: list[App] = []
        for n, count in enumerate(counts):
            a = len(self.feed_apps) + n
            ids = tuple(self.seed.id("catalog-entitlement", a, k) for k in range(count))
            names = tuple(f"{roles[k % len(roles)]} {k // len(roles) + 1}" for k in range(count))
            apps.append(App(self.seed.id("app", a), f"Catalog app {n + 1}", ids, names))
        return apps

    def _choose_excludable(self, wanted: int) -> list[AppEntitlementKey]:
        """The feed's app entitlements that get automation exclusions (some none), picked
        round-robin over the apps so that every app has some."""
        per_app = [range(len(app.entitlement_ids)) for app in self.feed_apps]
        chosen: list[AppEntitlementKey] = []
        depth = 0
        while len(chosen) < wanted and depth < 12:
            for a, ents in enumerate(per_app):
                if depth < len(ents) and len(chosen) < wanted:
                    chosen.append((a, ents[depth]))
            depth += 1
        return chosen

    @property
    def feed_entitlements(self) -> list[AppEntitlementKey]:
        """(app, entitlement) of every entitlement of the feed's apps, in catalog order."""
        return [
            (a, k) for a, app in enumerate(self.feed_apps) for k in range(len(app.entitlement_ids))
        ]

    # ----- lookups ----------------------------------------------------------------------------

    def app(self, app_id: str) -> tuple[int, App] | None:
        """(position in the catalog, app) of an app id; None if the tenant has no such app."""
        position = self._position.get(app_id)
        return None if position is None else (position, self.apps[position])

    def feed_app_index(self, app_id: str) -> int | None:
        """The index of one of the feed's apps."""
        return self._feed_app_index.get(app_id)

    def entitlement_index(self, app_id: str, entitlement_id: str) -> AppEntitlementKey | None:
        """(app, entitlement) indexes of an entitlement of the feed's apps."""
        return self._feed_entitlement_index.get((app_id, entitlement_id))

    def catalog_entitlement(self, app_id: str, entitlement_id: str) -> AppEntitlementKey | None:
        """(position in the catalog, entitlement index) of an app entitlement of the catalog,
        removed or not (ids are per app); for the feed's apps the same as entitlement_index."""
        found = self.app(app_id)
        if found is None or entitlement_id not in found[1].entitlement_ids:
            return None
        return found[0], found[1].entitlement_ids.index(entitlement_id)

    def is_automated(self, position: int, k: int) -> bool:
        """Whether automation is on for entitlement ``k`` of the catalog's app ``position``:
        every entitlement chosen for exclusions (with or without any), every tenth of the
        others."""
        if position < len(self.feed_apps):
            return (position, k) in self._excludable or (position + k) % 10 == 3
        return (7 * position + k) % 10 == 0

    @property
    def automated_entitlements(self) -> list[tuple[str, str]]:
        """Every (app id, entitlement id) with automation on, in catalog order (removed ones
        left out)."""
        return [
            (app.id, ent)
            for position, app in enumerate(self.apps)
            for k, ent in enumerate(app.entitlement_ids)
            if self.is_automated(position, k) and self.entitlement_exists(position, k)
        ]

    # ----- removals between runs --------------------------------------------------------------

    def entitlement_exists(self, a: int, k: int) -> bool:
        """False once the app or the entitlement was removed (its endpoints answer 404)."""
        return a not in self._removed_apps and (a, k) not in self._removed_entitlements

    def has_entitlement(self, app_id: str, entitlement_id: str) -> bool:
        """Whether the tenant's catalog has this app entitlement now (not removed)."""
        index = self.catalog_entitlement(app_id, entitlement_id)
        return index is not None and self.entitlement_exists(*index)

    def current_position(self, app_id: str) -> int | None:
        """The catalog position of an app the service lists now (None: unknown or removed)."""
        position = self._position.get(app_id)
        return None if position is None or position in self._removed_apps else position

    def current_apps(self) -> list[int]:
        """Catalog positions of the apps the service lists now (removed ones left out)."""
        return [p for p in range(len(self.apps)) if p not in self._removed_apps]

    def current_entitlements(self, position: int) -> list[int]:
        """Indexes of the entitlements the catalog's app at ``position`` lists now."""
        count = len(self.apps[position].entitlement_ids)
        return [k for k in range(count) if self.entitlement_exists(position, k)]

    def set_app_removed(self, app_id: str, removed: bool) -> None:
        """Remove an app (every entitlement of it answers 404) or bring it back. A single set
        operation needs no lock: readers only test membership."""
        if (found := self.app(app_id)) is None:
            raise ValueError(f"no app {app_id!r}")
        if removed:
            self._removed_apps.add(found[0])
        else:
            self._removed_apps.discard(found[0])

    def set_entitlement_removed(self, app_id: str, entitlement_id: str, removed: bool) -> None:
        """Remove an app entitlement (its exclusions endpoint answers 404) or bring it back."""
        if (index := self.catalog_entitlement(app_id, entitlement_id)) is None:
            raise ValueError(f"no app entitlement {entitlement_id!r} in app {app_id!r}")
        if removed:
            self._removed_entitlements.add(index)
        else:
            self._removed_entitlements.discard(index)


class HasCatalog(Protocol):
    """A whole tenant (``Dataset``), which the object builders accept for its catalog."""

    @property
    def catalog(self) -> Catalog: ...


def _catalog_of(tenant: Catalog | HasCatalog) -> Catalog:
    return tenant if isinstance(tenant, Catalog) else tenant.catalog


def _when(catalog: Catalog, rng: random.Random, back_days: int) -> str:
    offset = rng.randrange(back_days * 86_400) * NS
    return format_ns(precise(catalog.end_ns - offset, rng.choice((0, 3, 6, 9))))


def _policy_id(rng: random.Random, kind: str) -> str:
    return f"{kind}-policy-{rng.randrange(4)}" if rng.random() < 0.8 else ""


def _annotations(rng: random.Random) -> dict[str, str]:
    """A key/value map (the newest shape; older releases sent a list, see shapes.py)."""
    if rng.random() < 0.6:
        return {}
    annotations = {"managed_by": rng.choice(("terraform", "console", "scim"))}
    if rng.random() < 0.4:
        annotations["cost_center"] = f"cc-{rng.randrange(100, 999)}"
    return annotations


def app_object(
    tenant: Catalog | HasCatalog,
    position: int,
    *,
    emit_unpopulated: bool = True,
    inline_owners: bool = False,
) -> dict[str, Any]:
    """The App at ``position`` of the catalog in the service's newest shape, every field
    present (EmitUnpopulated). ``appOwners`` is ``[]`` unless ``inline_owners``: then the
    Users its owners endpoint lists, with every field too or, with ``emit_unpopulated``
    False, as the directory sends them when it omits unset fields. (Whether the list fills
    this read-only field is not documented; filled, it carries people's personal data.)"""
    catalog = _catalog_of(tenant)
    owners = []
    if inline_owners and catalog.scope is not None:
        owners = catalog.scope.app_owners(position)
        if emit_unpopulated:
            owners = [unpopulated.filled(user, unpopulated.USER) for user in owners]
    app = catalog.apps[position]
    rng = random.Random(f"{catalog.seed.value}:catalog-app:{position}")
    # The fields of the newest release draw from their own sequence: the others keep their
    # values from before those fields existed.
    newest = random.Random(f"{catalog.seed.value}:catalog-app-newest:{position}")
    in_feed = position < len(catalog.feed_apps)
    matched = newest.random() < 0.3
    return {
        "accessModel": rng.choice(ACCESS_MODELS),
        "annotations": _annotations(newest),
        "appAccountId": f"acct-{rng.randrange(10**6):06d}" if rng.random() < 0.7 else "",
        "appAccountName": f"{app.display_name} production" if rng.random() < 0.7 else "",
        "appOwners": owners,
        "appUserMapper": {"appId": app.id, "mappingCases": []} if matched else None,
        "certifyPolicyId": _policy_id(rng, "certify"),
        "connectorVersion": rng.choice((0, 1, 2, 3)),
        "createdAt": _when(catalog, rng, 900),
        "updatedAt": _when(catalog, rng, 60),
        "deletedAt": None,
        "defaultRequestCatalogId": "",
        "description": f"{app.display_name}, connected to the access-governance service",
        "displayName": app.display_name,
        "enableConnectorSourcedOwnership": newest.random() < 0.3,
        "fieldMask": None,
        "grantPolicyId": _policy_id(rng, "grant"),
        "iconUrl": "",
        "id": app.id,
        "identityMatching": "APP_USER_IDENTITY_MATCHING_UNSPECIFIED",
        "instructions": "",
        "isDirectory": position == 0,
        "isManuallyManaged": not in_feed and rng.random() < 0.3,
        "logoUri": "",
        "matchBatonRef": (
            {"appId": app.id, "connectorId": f"conn-{position}", "externalId": f"ext-{position}"}
            if matched
            else None
        ),
        "monthlyCostUsd": rng.choice((0, 0, 12, 45, 300)),
        "parentAppId": "",
        "revokeGrantSources": newest.random() < 0.5,
        "revokePolicyId": _policy_id(rng, "revoke"),
        "strictAccessEntitlementProvisioning": rng.random() < 0.2,
        "userCount": str(catalog.users if in_feed else rng.randrange(0, 40)),
    }


def app_entitlement_object(tenant: Catalog | HasCatalog, position: int, k: int) -> dict[str, Any]:
    """Entitlement ``k`` of the catalog's app at ``position`` in the service's newest shape,
    every field present; the same id and display name as the feed's expanded entitlement."""
    catalog = _catalog_of(tenant)
    app = catalog.apps[position]
    rng = random.Random(f"{catalog.seed.value}:catalog-entitlement:{position}:{k}")
    newest = random.Random(f"{catalog.seed.value}:catalog-entitlement-newest:{position}:{k}")
    name = app.entitlement_names[k]
    entitlement: dict[str, Any] = {
        "alias": "",
        "annotations": _annotations(newest),
        "appId": app.id,
        "appResourceId": "",
        "appResourceTypeId": "",
        "certifyPolicyId": _policy_id(rng, "certify"),
        "complianceFrameworkValueIds": [],
        "createdAt": _when(catalog, rng, 900),
        "updatedAt": _when(catalog, rng, 60),
        "deletedAt": None,
        "defaultValuesApplied": rng.random() < 0.5,
        "deprovisionerPolicy": None,
        "provisionerPolicy": None,
        "description": f"{name} in {app.display_name}",
        "displayName": name,
        "emergencyGrantEnabled": False,
        "emergencyGrantPolicyId": "",
        "externalId": "",
        "grantCount": str(rng.randrange(0, 400) if rng.random() < 0.8 else 0),
        "grantPolicyId": _policy_id(rng, "grant"),
        "id": app.entitlement_ids[k],
        "isAutomationEnabled": catalog.is_automated(position, k),
        "isManuallyManaged": False,
        "matchBatonId": "",
        "overrideAccessRequestsDefaults": newest.random() < 0.2,
        "purpose": PURPOSES[rng.randrange(len(PURPOSES))],
        "requestSchemaId": "",
        "revokePolicyId": _policy_id(rng, "revoke"),
        "riskLevelValueId": "",
        "slug": name.replace(" ", "-"),
        "sourceConnectorIds": {},
        "systemBuiltin": False,
        "userEditedMask": "displayName,description" if newest.random() < 0.1 else None,
    }
    if catalog.scope is not None:  # its resource, risk level and frameworks
        entitlement.update(catalog.scope.entitlement_fields(position, k))
    # The oneof max_grant_duration: exactly one member is set.
    if rng.random() < 0.3:
        entitlement["durationGrant"] = f"{rng.choice((3600, 86_400, 604_800))}s"
    else:
        entitlement["durationUnset"] = {}
    return entitlement


def list_apps(
    catalog: Catalog,
    tokens: PageTokens,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
    inline_owners: bool = False,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps`` (``inline_owners``: see ``app_object``)."""
    listed = catalog.current_apps()
    positions, next_token = page_range(tokens, digest_of(["apps"]), query, len(listed))
    apps = [
        app_object(
            catalog, listed[n], emit_unpopulated=emit_unpopulated, inline_owners=inline_owners
        )
        for n in positions
    ]
    if not emit_unpopulated:
        apps = [unpopulated.stripped(app) for app in apps]
    return list_page(apps, next_token, emit_unpopulated, expanded=False)


def list_app_entitlements(
    catalog: Catalog,
    tokens: PageTokens,
    app_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps/{app_id}/entitlements``: AppEntitlementViews (nothing is
    expanded, so the view's paths are empty)."""
    found = catalog.app(app_id)
    if found is None or found[0] not in catalog.current_apps():
        raise ApiError(404, NOT_FOUND, "app not found")
    position = found[0]
    listed = catalog.current_entitlements(position)
    digest = digest_of(["app_entitlements", app_id])
    positions, next_token = page_range(tokens, digest, query, len(listed))
    views = []
    for k in (listed[n] for n in positions):
        entitlement = app_entitlement_object(catalog, position, k)
        view: dict[str, Any] = {
            "appEntitlement": entitlement,
            "appPath": "",
            "appResourcePath": "",
            "appResourceTypePath": "",
        }
        if not emit_unpopulated:
            view = unpopulated.stripped(view)
            view["appEntitlement"] = unpopulated.stripped(
                entitlement, oneof_members=("durationGrant", "durationUnset")
            )
        views.append(view)
    return list_page(views, next_token, emit_unpopulated)
