"""App resources: what an app's entitlements sit on (a repository, a channel, an AWS
account), grouped by resource type, and their endpoints
``GET /api/v1/apps/{app_id}/resource_types`` and
``GET /api/v1/apps/{app_id}/resource_types/{app_resource_type_id}/resources``.

Each of the feed's apps has the resource types of its kind (GitHub: organizations, teams and
repositories; AWS: accounts, permission sets and IAM roles, ...), some of them children of
another (``parentAppResourceTypeId``): a child type's resources each sit in a resource of its
parent type (``parentAppResourceId``), as a repository sits in an organization. The catalog's
other apps have generic types, or none (the first, which has no entitlement, and one in five
of the rest); the second of them has fourteen types, more than a page. The feed's second
app (GitHub 1, at catalog position 1) has at least thirty repositories, more than a page.

Most app entitlements sit on one resource of their app (``appResourceId``,
``appResourceTypeId``); one in five, and every entitlement of an app without types, is an
app-level entitlement with both empty. A resource's ``grantCount`` is the sum of its
entitlements'. Everything here draws from generators of its own (``{seed}-scoping:...``):
the catalog's other fields keep their values. Shapes from the vendor's published OpenAPI
(``AppResourceTypeView``, ``AppResourceView``); an unknown or removed app and an unknown type
are 404.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from emulator import unpopulated
from emulator.catalog import Catalog, app_entitlement_object
from emulator.errors import NOT_FOUND, ApiError
from emulator.paging import PageTokens, digest_of, list_page, page_range
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise

DAY = 86_400 * NS
TypeSpec = tuple[str, int | None, str]  # (display name, parent type index, trait)
GENERIC: tuple[TypeSpec, ...] = (
    ("Workspace", None, ""),
    ("Project", 0, ""),
    ("Group", None, "TRAIT_GROUP"),
    ("Role", None, "TRAIT_ROLE"),
)
FAMILIES: dict[str, tuple[TypeSpec, ...]] = {
    "Okta": (
        ("Group", None, "TRAIT_GROUP"),
        ("Role", None, "TRAIT_ROLE"),
        ("App", None, "TRAIT_APP"),
    ),
    "GitHub": (("Organization", None, ""), ("Team", 0, "TRAIT_GROUP"), ("Repository", 0, "")),
    "Salesforce": (
        ("Profile", None, "TRAIT_ROLE"),
        ("Permission Set", None, "TRAIT_ROLE"),
        ("Public Group", None, "TRAIT_GROUP"),
    ),
    "AWS": (
        ("Account", None, ""),
        ("Permission Set", 0, "TRAIT_ROLE"),
        ("IAM Role", 0, "TRAIT_ROLE"),
    ),
    "Slack": (("Workspace", None, ""), ("Channel", 0, ""), ("User Group", 0, "TRAIT_GROUP")),
    "Jira": (("Site", None, ""), ("Project", 0, ""), ("Group", None, "TRAIT_GROUP")),
    "Snowflake": (("Account", None, ""), ("Database", 0, ""), ("Role", None, "TRAIT_ROLE")),
    "Zoom": (("Account", None, ""), ("Group", 0, "TRAIT_GROUP")),
}
# A large app's types (a cloud platform's): more than a page of them.
LARGE: tuple[TypeSpec, ...] = (
    *GENERIC,
    ("Folder", 0, ""),
    ("Dataset", 1, ""),
    ("Bucket", 1, ""),
    ("Service Account", 1, "TRAIT_USER"),
    ("Cluster", 1, ""),
    ("Namespace", 8, ""),
    ("Secret", 1, ""),
    ("Database", 1, ""),
    ("Network", 0, ""),
    ("Billing Account", None, ""),
)
WORDS = (
    "payments",
    "billing",
    "platform",
    "infra",
    "data",
    "web",
    "mobile",
    "search",
    "identity",
    "growth",
    "ledger",
    "analytics",
    "support",
    "security",
    "ml",
    "edge",
)
NHI_TYPES = {"IAM Role": "NHI_TYPE_ASSUMABLE_ROLE", "Service Account": "NHI_TYPE_APP_REGISTRATION"}


class Resource(NamedTuple):
    id: str
    name: str
    parent: int | None  # index among the parent type's resources


class Layout(NamedTuple):
    """One app's resource types, the resources of each, and where each entitlement sits
    ((type, resource) indexes, or None for an app-level entitlement)."""

    types: list[TypeSpec]
    type_ids: list[str]
    resources: list[list[Resource]]
    placements: list[tuple[int, int] | None]


class Resources:
    """The resource types and resources of every app of the catalog, laid out per app on
    first use."""

    def __init__(self, seed: Seed, catalog: Catalog) -> None:
        self.seed = seed
        self.catalog = catalog
        self._layouts: dict[int, Layout] = {}
        self._grant_counts: dict[int, dict[tuple[int, int], int]] = {}

    def _specs(self, position: int, rng: random.Random) -> tuple[TypeSpec, ...]:
        catalog = self.catalog
        first_other = len(catalog.feed_apps)
        if position < first_other:
            noun = catalog.apps[position].display_name.split()[0]
            return FAMILIES.get(noun, GENERIC)
        if position == first_other:
            return ()
        if position == first_other + 1:
            return LARGE
        return () if rng.random() < 0.2 else GENERIC[: rng.randint(1, len(GENERIC))]

    def layout(self, position: int) -> Layout:
        """The resource types, resources and entitlement placements of the catalog's app at
        ``position`` (built once)."""
        if (found := self._layouts.get(position)) is not None:
            return found
        rng = random.Random(f"{self.seed.value}-scoping:resources:{position}")
        specs = list(self._specs(position, rng))
        type_ids = [self.seed.id("app-resource-type", position, t) for t in range(len(specs))]
        resources: list[list[Resource]] = []
        for t, (name, parent, _) in enumerate(specs):
            made: list[Resource] = []
            if parent is None:
                for _ in range(rng.randint(1, 3)):
                    made.append(Resource("", f"{rng.choice(WORDS)}-{name.lower()}", None))
            else:
                wide = position == 1 and t == len(specs) - 1
                for p in range(len(resources[parent])):
                    for _ in range(30 if wide else rng.randint(1, 6)):
                        made.append(Resource("", f"{rng.choice(WORDS)}-{len(made) + 1}", p))
            ids = (self.seed.id("app-resource", position, t, r) for r in range(len(made)))
            resources.append([r._replace(id=rid) for r, rid in zip(made, ids, strict=True)])
        placements: list[tuple[int, int] | None] = []
        for _ in self.catalog.apps[position].entitlement_ids:
            if not specs or rng.random() < 0.2:
                placements.append(None)
            else:
                t = rng.randrange(len(specs))
                placements.append((t, rng.randrange(len(resources[t]))))
        layout = Layout(specs, type_ids, resources, placements)
        self._layouts[position] = layout
        return layout

    def placement(self, position: int, k: int) -> dict[str, str]:
        """Where entitlement ``k`` of the app at ``position`` sits: its ``appResourceTypeId``
        and ``appResourceId`` (both empty for an app-level entitlement)."""
        layout = self.layout(position)
        placed = layout.placements[k]
        if placed is None:
            return {"appResourceId": "", "appResourceTypeId": ""}
        t, r = placed
        return {"appResourceId": layout.resources[t][r].id, "appResourceTypeId": layout.type_ids[t]}

    def type_index(self, position: int, type_id: str) -> int | None:
        type_ids = self.layout(position).type_ids
        return type_ids.index(type_id) if type_id in type_ids else None

    def _grants_on(self, position: int) -> dict[tuple[int, int], int]:
        """Each resource's grant count: the sum of its entitlements' (built once per app)."""
        if (found := self._grant_counts.get(position)) is not None:
            return found
        counts: dict[tuple[int, int], int] = {}
        for k, placed in enumerate(self.layout(position).placements):
            if placed is not None:
                grants = int(app_entitlement_object(self.catalog, position, k)["grantCount"])
                counts[placed] = counts.get(placed, 0) + grants
        self._grant_counts[position] = counts
        return counts

    # ----- objects ------------------------------------------------------------------------------

    def _when(self, rng: random.Random, back_days: int, after: int | None = None) -> str:
        start = self.catalog.end_ns - back_days * DAY if after is None else after
        ns = start + rng.randrange(max(1, self.catalog.end_ns - start))
        return format_ns(precise(ns, rng.choice((0, 3, 6, 9))))

    def type_object(self, position: int, t: int) -> dict[str, Any]:
        """Resource type ``t`` of the app at ``position``, every field present."""
        layout = self.layout(position)
        name, _, trait = layout.types[t]
        rng = random.Random(f"{self.seed.value}-scoping:resource-type:{position}:{t}")
        return {
            "appId": self.catalog.apps[position].id,
            "createdAt": self._when(rng, 900),
            "deletedAt": None,
            "displayName": name,
            "id": layout.type_ids[t],
            "traitIds": [trait] if trait else [],
            "updatedAt": self._when(rng, 90),
        }

    def resource_object(self, position: int, t: int, r: int) -> dict[str, Any]:
        """Resource ``r`` of type ``t`` of the app at ``position``, every field present."""
        layout = self.layout(position)
        resource = layout.resources[t][r]
        type_name, parent_type, _ = layout.types[t]
        rng = random.Random(f"{self.seed.value}-scoping:resource:{position}:{t}:{r}")
        annotations: dict[str, str] = {}
        if rng.random() < 0.3:
            annotations["managed_by"] = rng.choice(("terraform", "console", "connector"))
        profile: dict[str, Any] | None = None
        if rng.random() < 0.7:
            profile = {"visibility": rng.choice(("private", "internal", "public"))}
            if rng.random() < 0.5:
                profile["memberCount"] = rng.randrange(1, 500)
            if rng.random() < 0.3:
                profile["archived"] = rng.random() < 0.2
        nhi = NHI_TYPES.get(type_name, "NHI_TYPE_UNSPECIFIED")
        parent = (
            layout.resources[parent_type][resource.parent]
            if parent_type is not None and resource.parent is not None
            else None
        )
        return {
            "accessConfigId": "",
            "agentTrait": None,
            "annotations": annotations,
            "appId": self.catalog.apps[position].id,
            "appResourceTypeId": layout.type_ids[t],
            "createdAt": self._when(rng, 700),
            "customDescription": f"{type_name} {resource.name}" if rng.random() < 0.3 else "",
            "deletedAt": None,
            "displayName": resource.name,
            "externalId": f"{type_name.lower().replace(' ', '-')}/{rng.randrange(10**8):08d}",
            "grantCount": str(self._grants_on(position).get((t, r), 0)),
            "id": resource.id,
            "matchBatonId": "",
            "nhiDetail": f"arn:aws:iam::{rng.randrange(10**12):012d}:role/{resource.name}"
            if nhi == "NHI_TYPE_ASSUMABLE_ROLE"
            else "",
            "nhiType": nhi,
            "parentAppResourceId": "" if parent is None else parent.id,
            "parentAppResourceTypeId": "" if parent_type is None else layout.type_ids[parent_type],
            "profile": profile,
            "secretTrait": None,
            "updatedAt": self._when(rng, 60),
        }

    # ----- ground truth -------------------------------------------------------------------------

    def types_truth(self) -> list[dict[str, Any]]:
        """Every resource type of the apps listed now, app by app in catalog order."""
        return [
            self.type_object(p, t)
            for p in self.catalog.current_apps()
            for t in range(len(self.layout(p).types))
        ]

    def resources_truth(self) -> list[dict[str, Any]]:
        """Every resource of the apps listed now, app by app, type by type."""
        return [
            self.resource_object(p, t, r)
            for p in self.catalog.current_apps()
            for t, listed in enumerate(self.layout(p).resources)
            for r in range(len(listed))
        ]


def _listed_app(resources: Resources, app_id: str) -> int:
    position = resources.catalog.current_position(app_id)
    if position is None:
        raise ApiError(404, NOT_FOUND, "app not found")
    return position


def list_resource_types(
    resources: Resources,
    tokens: PageTokens,
    app_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps/{app_id}/resource_types``: AppResourceTypeViews
    (nothing expanded, so ``appPath`` is empty)."""
    position = _listed_app(resources, app_id)
    count = len(resources.layout(position).types)
    digest = digest_of(["resource_types", app_id])
    positions, next_token = page_range(tokens, digest, query, count)
    views = []
    for t in positions:
        view: dict[str, Any] = {
            "appPath": "",
            "appResourceType": resources.type_object(position, t),
        }
        if not emit_unpopulated:
            view = unpopulated.stripped(view)
            view["appResourceType"] = unpopulated.stripped(view["appResourceType"])
        views.append(view)
    return list_page(views, next_token, emit_unpopulated)


def list_resources(
    resources: Resources,
    tokens: PageTokens,
    app_id: str,
    type_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps/{app_id}/resource_types/{id}/resources``:
    AppResourceViews (nothing expanded, so the paths are empty)."""
    position = _listed_app(resources, app_id)
    t = resources.type_index(position, type_id)
    if t is None:
        raise ApiError(404, NOT_FOUND, "app resource type not found")
    count = len(resources.layout(position).resources[t])
    digest = digest_of(["resources", app_id, type_id])
    positions, next_token = page_range(tokens, digest, query, count)
    views = [resource_view(resources, position, t, r, emit_unpopulated) for r in positions]
    return list_page(views, next_token, emit_unpopulated)


def resource_view(
    resources: Resources, position: int, t: int, r: int, emit_unpopulated: bool
) -> dict[str, Any]:
    """An AppResourceView of a resource (nothing expanded, so the paths are empty), as the
    list and the search send it."""
    view: dict[str, Any] = {
        "appPath": "",
        "appResource": resources.resource_object(position, t, r),
        "objectPermissions": None,
        "parentResourcePath": "",
        "parentResourceTypePath": "",
        "resourceTypePath": "",
    }
    if not emit_unpopulated:
        view = unpopulated.stripped(view)
        view["appResource"] = unpopulated.stripped(view["appResource"])
    return view
