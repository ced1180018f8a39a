"""The cross-app searches of resource types and resources, ``POST
/api/v1/search/app_resource_types`` and ``POST /api/v1/search/app_resources``: one request
series for the whole catalog instead of one per app (and type).

They find what the per-app lists list (emulator/resources.py), apps in catalog order (removed
ones left out), filtered by the request's ids, traits, names and NHI types; every other field
of the vendor's request (``ownerUserIds``, ``unownedOnly``: resources have no owners here,
``appUserIds``, sorting, secrets' ages, ...) is refused as not emulated rather than answered
as if unset. Bodies are read as protobuf JSON (emulator/protojson.py); page tokens are bound
to the filters. Shapes from the vendor's published OpenAPI
(``SearchAppResourceTypesResponse``: bare AppResourceTypes; ``SearchAppResourcesResponse``:
AppResourceViews).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from emulator import protojson, unpopulated
from emulator.errors import bad_request
from emulator.paging import PageTokens, clamp_page_size, digest_of
from emulator.resources import NHI_TYPES as NHI_BY_TYPE
from emulator.resources import Resources, resource_view

# JSON name -> proto name: the fields emulated, then those refused.
TYPE_FIELDS = {
    "appIds": "app_ids",
    "displayName": "display_name",
    "excludeResourceTypeIds": "exclude_resource_type_ids",
    "excludeResourceTypeTraitIds": "exclude_resource_type_trait_ids",
    "pageSize": "page_size",
    "pageToken": "page_token",
    "query": "query",
    "resourceTypeIds": "resource_type_ids",
    "resourceTypeTraitIds": "resource_type_trait_ids",
}
TYPE_FIELDS_NOT_EMULATED = {"appUserIds": "app_user_ids"}
RESOURCE_FIELDS = {
    "appId": "app_id",
    "appIds": "app_ids",
    "excludeDeletedApps": "exclude_deleted_apps",
    "excludeDeletedResourceBindings": "exclude_deleted_resource_bindings",
    "excludeResourceIds": "exclude_resource_ids",
    "excludeResourceTypeTraitIds": "exclude_resource_type_trait_ids",
    "nhiTypes": "nhi_types",
    "pageSize": "page_size",
    "pageToken": "page_token",
    "query": "query",
    "refs": "refs",
    "resourceIds": "resource_ids",
    "resourceTypeIds": "resource_type_ids",
    "resourceTypeTraitIds": "resource_type_trait_ids",
}
RESOURCE_FIELDS_NOT_EMULATED = {
    "agentStatuses": "agent_statuses",
    "appUserIds": "app_user_ids",
    "credentialTypes": "credential_types",
    "direction": "direction",
    "ownerUserIds": "owner_user_ids",
    "secretAging": "secret_aging",
    "sortField": "sort_field",
    "unownedOnly": "unowned_only",
    "withOpenFindings": "with_open_findings",
}
NHI_TYPES = (
    "NHI_TYPE_UNSPECIFIED",
    "NHI_TYPE_APP_REGISTRATION",
    "NHI_TYPE_ASSUMABLE_ROLE",
    "NHI_TYPE_MANAGED_IDENTITY",
)
RESOURCE_REF = {"appId": "app_id", "appResourceTypeId": "app_resource_type_id", "id": "id"}


def _request(
    body: bytes, emulated: dict[str, str], refused: dict[str, str]
) -> tuple[dict[str, Any], int, str]:
    """The request's emulated fields, its page size and token; 400 for a field the service
    refuses, and for one it accepts that is set but not emulated."""
    req = protojson.fields(protojson.body_object(body), emulated | refused, "request")
    for name in refused:
        if req.get(name) not in (None, [], "", False, 0, {}) and not str(req.get(name)).endswith(
            "_UNSPECIFIED"
        ):
            raise bad_request(f'field "{name}" of the request is not emulated')
    page_size = clamp_page_size(protojson.int32(req.pop("pageSize", 0), "pageSize"))
    token = protojson.string(req.pop("pageToken", ""), "pageToken")
    return {name: req[name] for name in emulated if name in req}, page_size, token


def _ids(req: dict[str, Any], name: str) -> set[str]:
    return set(protojson.strings(req.get(name, []), name))


def _apps(resources: Resources, app_ids: set[str]) -> list[int]:
    """The positions of the apps searched: those named (all if none), listed now."""
    current = resources.catalog.current_apps()
    if not app_ids:
        return current
    return [p for p in current if resources.catalog.apps[p].id in app_ids]


def _page(
    found: Iterator[Any], tokens: PageTokens, shape: list[Any], page_size: int, token: str
) -> tuple[list[Any], str]:
    digest = digest_of(shape)
    start = tokens.decode(token, digest) if token else 0
    rows = list(itertools.islice(found, start, start + page_size + 1))
    end = start + min(page_size, len(rows))
    return rows[:page_size], tokens.encode(end, digest) if len(rows) > page_size else ""


def search_resource_types(
    resources: Resources, tokens: PageTokens, body: bytes, emit_unpopulated: bool
) -> dict[str, Any]:
    """One page of ``POST /api/v1/search/app_resource_types``."""
    req, page_size, token = _request(body, TYPE_FIELDS, TYPE_FIELDS_NOT_EMULATED)
    app_ids, type_ids = _ids(req, "appIds"), _ids(req, "resourceTypeIds")
    excluded = _ids(req, "excludeResourceTypeIds")
    traits, excluded_traits = (
        _ids(req, "resourceTypeTraitIds"),
        _ids(req, "excludeResourceTypeTraitIds"),
    )
    name = protojson.string(req.get("displayName", ""), "displayName")
    query = protojson.string(req.get("query", ""), "query").lower()

    def found() -> Iterator[tuple[int, int]]:
        for p in _apps(resources, app_ids):
            layout = resources.layout(p)
            for t, (display_name, _, trait) in enumerate(layout.types):
                type_id = layout.type_ids[t]
                if (
                    (not type_ids or type_id in type_ids)
                    and type_id not in excluded
                    and (not traits or trait in traits)
                    and trait not in excluded_traits
                    and (not name or display_name == name)
                    and query in display_name.lower()
                ):
                    yield p, t

    shape = ["search_resource_types", *(sorted(v) for v in (app_ids, type_ids, excluded))]
    shape += [sorted(traits), sorted(excluded_traits), name, query]
    rows, next_token = _page(found(), tokens, shape, page_size, token)
    items = [resources.type_object(p, t) for p, t in rows]
    if not emit_unpopulated:
        items = [unpopulated.stripped(item) for item in items]
        page: dict[str, Any] = {"list": items or None}
        if next_token:
            page["nextPageToken"] = next_token
        return page
    return {"list": items, "nextPageToken": next_token}


def search_resources(
    resources: Resources, tokens: PageTokens, body: bytes, emit_unpopulated: bool
) -> dict[str, Any]:
    """One page of ``POST /api/v1/search/app_resources``."""
    req, page_size, token = _request(body, RESOURCE_FIELDS, RESOURCE_FIELDS_NOT_EMULATED)
    app_ids = _ids(req, "appIds")
    if one := protojson.string(req.get("appId", ""), "appId"):
        app_ids.add(one)
    type_ids, resource_ids = _ids(req, "resourceTypeIds"), _ids(req, "resourceIds")
    excluded = _ids(req, "excludeResourceIds")
    traits, excluded_traits = (
        _ids(req, "resourceTypeTraitIds"),
        _ids(req, "excludeResourceTypeTraitIds"),
    )
    nhi_types = _ids(req, "nhiTypes")
    for value in nhi_types:
        if value not in NHI_TYPES:
            raise bad_request(f'nhiTypes: unknown enum value "{value}"')
    for flag in ("excludeDeletedApps", "excludeDeletedResourceBindings"):
        if not isinstance(req.get(flag, False), bool):  # nothing deleted is ever found
            raise bad_request(f"{flag} must be a boolean")
    refs = set(protojson.refs(req.get("refs", []), "refs", RESOURCE_REF))
    query = protojson.string(req.get("query", ""), "query").lower()

    def found() -> Iterator[tuple[int, int, int]]:
        for p in _apps(resources, app_ids):
            layout = resources.layout(p)
            app_id = resources.catalog.apps[p].id
            for t, listed in enumerate(layout.resources):
                type_id, (type_name, _, trait) = layout.type_ids[t], layout.types[t]
                nhi = NHI_BY_TYPE.get(type_name, NHI_TYPES[0])
                if (
                    (type_ids and type_id not in type_ids)
                    or (traits and trait not in traits)
                    or trait in excluded_traits
                    or (nhi_types and nhi not in nhi_types)
                ):
                    continue
                for r, resource in enumerate(listed):
                    if (
                        (not resource_ids or resource.id in resource_ids)
                        and resource.id not in excluded
                        and (not refs or (app_id, type_id, resource.id) in refs)
                        and query in resource.name.lower()
                    ):
                        yield p, t, r

    shape: list[Any] = ["search_resources"]
    shape += [sorted(v) for v in (app_ids, type_ids, resource_ids, excluded, traits)]
    shape += [sorted(excluded_traits), sorted(nhi_types), sorted(refs), query]
    rows, next_token = _page(found(), tokens, shape, page_size, token)
    views = [resource_view(resources, p, t, r, emit_unpopulated) for p, t, r in rows]
    if emit_unpopulated:
        return {"list": views, "expanded": [], "nextPageToken": next_token}
    page: dict[str, Any] = {"list": views or None}
    if next_token:
        page["nextPageToken"] = next_token
    return page
