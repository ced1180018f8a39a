"""The tenant's catalog: ``GET /api/v1/apps`` and ``GET /api/v1/apps/{app_id}/entitlements``.

Shapes from the vendor's published OpenAPI: an App and an AppEntitlement with every field
(int64 values as strings, uint32/int32 as numbers, enums as names with values newer than the
description now and then), entitlements wrapped in an AppEntitlementView, paging in the query
string (``page_size``, ``page_token``), 404 for an unknown app. The catalog agrees with the
feed (the same ids and display names as its expanded objects) and with the exclusions
(``isAutomationEnabled`` is on for every entitlement that has exclusions). An app or app
entitlement removed (``Dataset.remove``) leaves the lists; a removed app answers 404.
"""

from __future__ import annotations

import random
from typing import Any

from emulator import unpopulated
from emulator.dataset import Dataset
from emulator.errors import NOT_FOUND, ApiError
from emulator.paging import PageTokens, clamp_page_size, digest_of, paging_params
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


def _when(ds: Dataset, rng: random.Random, back_days: int) -> str:
    offset = rng.randrange(back_days * 86_400) * NS
    return format_ns(precise(ds.end_ns - offset, rng.choice((0, 3, 6, 9))))


def _policy_id(rng: random.Random, kind: str) -> str:
    return f"{kind}-policy-{rng.randrange(4)}" if rng.random() < 0.8 else ""


def app_object(ds: Dataset, position: int) -> dict[str, Any]:
    """The App at ``position`` of the catalog, every field present (EmitUnpopulated)."""
    app = ds.catalog_apps[position]
    rng = random.Random(f"{ds.seed}:catalog-app:{position}")
    in_feed = position < len(ds.apps)
    return {
        "accessModel": rng.choice(ACCESS_MODELS),
        "annotations": [],
        "appAccountId": f"acct-{rng.randrange(10**6):06d}" if rng.random() < 0.7 else "",
        "appAccountName": f"{app.display_name} production" if rng.random() < 0.7 else "",
        "appOwners": [],
        "certifyPolicyId": _policy_id(rng, "certify"),
        "connectorVersion": rng.choice((0, 1, 2, 3)),
        "createdAt": _when(ds, rng, 900),
        "updatedAt": _when(ds, rng, 60),
        "deletedAt": None,
        "defaultRequestCatalogId": "",
        "description": f"{app.display_name}, connected to the access-governance service",
        "displayName": app.display_name,
        "grantPolicyId": _policy_id(rng, "grant"),
        "iconUrl": "",
        "id": app.id,
        "identityMatching": "APP_USER_IDENTITY_MATCHING_UNSPECIFIED",
        "instructions": "",
        "isDirectory": position == 0,
        "isManuallyManaged": not in_feed and rng.random() < 0.3,
        "logoUri": "",
        "monthlyCostUsd": rng.choice((0, 0, 12, 45, 300)),
        "parentAppId": "",
        "revokePolicyId": _policy_id(rng, "revoke"),
        "strictAccessEntitlementProvisioning": rng.random() < 0.2,
        "userCount": str(len(ds.user_ids) if in_feed else rng.randrange(0, 40)),
    }


def app_entitlement_object(ds: Dataset, position: int, k: int) -> dict[str, Any]:
    """Entitlement ``k`` of the catalog's app at ``position``, every field present; the same
    id and display name as the feed's expanded entitlement."""
    app = ds.catalog_apps[position]
    rng = random.Random(f"{ds.seed}:catalog-entitlement:{position}:{k}")
    name = app.entitlement_names[k]
    entitlement: dict[str, Any] = {
        "alias": "",
        "annotations": [],
        "appId": app.id,
        "appResourceId": "",
        "appResourceTypeId": "",
        "certifyPolicyId": _policy_id(rng, "certify"),
        "complianceFrameworkValueIds": [],
        "createdAt": _when(ds, rng, 900),
        "updatedAt": _when(ds, rng, 60),
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
        "isAutomationEnabled": ds.is_automated(position, k),
        "isManuallyManaged": False,
        "matchBatonId": "",
        "purpose": PURPOSES[rng.randrange(len(PURPOSES))],
        "requestSchemaId": "",
        "revokePolicyId": _policy_id(rng, "revoke"),
        "riskLevelValueId": "",
        "slug": name.replace(" ", "-"),
        "sourceConnectorIds": {},
        "systemBuiltin": False,
    }
    # The oneof max_grant_duration: exactly one member is set.
    if rng.random() < 0.3:
        entitlement["durationGrant"] = f"{rng.choice((3600, 86_400, 604_800))}s"
    else:
        entitlement["durationUnset"] = {}
    return entitlement


def _page(
    tokens: PageTokens, digest: str, query: dict[str, list[str]], total: int
) -> tuple[range, str]:
    """The positions of one page and the next page token ("" on the last page)."""
    params = paging_params(query)
    start = tokens.decode(params.page_token, digest) if params.page_token else 0
    end = min(start + clamp_page_size(params.page_size), total)
    return range(start, end), tokens.encode(end, digest) if end < total else ""


def list_apps(
    ds: Dataset, tokens: PageTokens, query: dict[str, list[str]], emit_unpopulated: bool
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps``."""
    listed = ds.current_apps()
    page_range, next_token = _page(tokens, digest_of(["apps"]), query, len(listed))
    apps = [app_object(ds, listed[n]) for n in page_range]
    if emit_unpopulated:
        return {"list": apps, "nextPageToken": next_token}
    page: dict[str, Any] = {"list": [unpopulated.stripped(app) for app in apps] or None}
    if next_token:
        page["nextPageToken"] = next_token
    return page


def list_app_entitlements(
    ds: Dataset,
    tokens: PageTokens,
    app_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps/{app_id}/entitlements``: AppEntitlementViews (nothing is
    expanded, so the view's paths are empty)."""
    found = ds.catalog_app(app_id)
    if found is None or found[0] not in ds.current_apps():
        raise ApiError(404, NOT_FOUND, "app not found")
    position = found[0]
    listed = ds.current_entitlements(position)
    digest = digest_of(["app_entitlements", app_id])
    page_range, next_token = _page(tokens, digest, query, len(listed))
    views = []
    for k in (listed[n] for n in page_range):
        entitlement = app_entitlement_object(ds, position, k)
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
    if emit_unpopulated:
        return {"list": views, "expanded": [], "nextPageToken": next_token}
    page: dict[str, Any] = {"list": views or None}
    if next_token:
        page["nextPageToken"] = next_token
    return page
