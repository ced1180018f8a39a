"""What an audit is scoped by: resource types and resources, owners (v1 and the 2026 v2
list), attributes (risk levels, compliance frameworks), the service's roles and connectors,
each paged through with a plain client and compared with the ground truth; strict (404s,
page tokens), the older-release and forbidden variants, and the rest of the tenant unchanged
by the new data."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

import pytest
import requests

from emulator import Dataset, Emulator
from emulator.__main__ import parse_args
from emulator.catalog import app_entitlement_object, app_object
from emulator.iam import ADMINISTRATORS, ROLES
from emulator.paging import PageTokens
from emulator.service import OWNER_USERS_OPERATION, operation_of
from emulator.tests.conftest import CRED, END, login, small_dataset
from emulator.tests.test_catalog import entries, list_all
from emulator.timefmt import NS, parse_rfc3339

DEPARTED = "DELETED"


def app_url(emu: Emulator, app_id: str, rest: str = "") -> str:
    return f"{emu.url}/api/v1/apps/{app_id}{rest}"


def listed(api: requests.Session, url: str, **params: Any) -> list[dict[str, Any]]:
    return entries(list_all(api, url, **params))


def departed(user: dict[str, Any]) -> bool:
    """Someone who left: deleted in the directory or in the service."""
    return DEPARTED in (user.get("directoryStatus"), user.get("status"))


# ----- resources ---------------------------------------------------------------------------


def test_resource_types_and_resources_page_as_the_truth(api, emu: Emulator, ds: Dataset) -> None:
    types, resources = [], []
    for app in ds.catalog_apps:
        views = listed(api, app_url(emu, app.id, "/resource_types"), page_size=10)
        assert all(v["appPath"] == "" for v in views)
        types += [v["appResourceType"] for v in views]
        for view in views:
            type_id = view["appResourceType"]["id"]
            url = app_url(emu, app.id, f"/resource_types/{type_id}/resources")
            resources += [v["appResource"] for v in listed(api, url)]
    assert types == ds.app_resource_types()
    assert resources == ds.app_resources()
    # a hierarchy: a child's parent is a resource of the same app, of the parent type
    by_id = {r["id"]: r for r in resources}
    children = [r for r in resources if r["parentAppResourceId"]]
    assert len(children) > len(resources) // 3
    for child in children:
        parent = by_id[child["parentAppResourceId"]]
        assert parent["appId"] == child["appId"]
        assert parent["appResourceTypeId"] == child["parentAppResourceTypeId"]
    assert all(r["grantCount"].isdigit() for r in resources)  # an int64 as a string
    # more than a page of types (the large app) and of resources (the app at position 1)
    counts = Counter(t["appId"] for t in types)
    assert max(counts.values()) > 10
    assert max(Counter(r["appResourceTypeId"] for r in resources).values()) > 25
    assert set(counts) < {app.id for app in ds.catalog_apps}  # some apps have none


def test_entitlements_sit_on_resources_of_their_app_and_are_rated(
    api, emu: Emulator, ds: Dataset
) -> None:
    resources = {r["id"]: r for r in ds.app_resources()}
    risk_levels = {v["id"]: v["value"] for v in ds.attribute_values(risk_type(ds))}
    frameworks = {v["id"] for v in ds.attribute_values(framework_type(ds))}
    grants_on: Counter[str] = Counter()
    rows = []
    for app in ds.catalog_apps:
        for view in listed(api, app_url(emu, app.id, "/entitlements"), page_size=100):
            entitlement = view["appEntitlement"]
            rows.append(entitlement)
            if entitlement["appResourceId"]:
                resource = resources[entitlement["appResourceId"]]
                assert resource["appId"] == app.id
                assert resource["appResourceTypeId"] == entitlement["appResourceTypeId"]
                grants_on[resource["id"]] += int(entitlement["grantCount"])
            else:
                assert entitlement["appResourceTypeId"] == ""
            assert entitlement["riskLevelValueId"] in {*risk_levels, ""}
            assert set(entitlement["complianceFrameworkValueIds"]) <= frameworks
            assert len(entitlement["complianceFrameworkValueIds"]) <= 3
    on_resources = sum(1 for e in rows if e["appResourceId"])
    assert len(rows) / 2 < on_resources < len(rows)  # most; app-level ones too
    assert sum(1 for e in rows if e["riskLevelValueId"]) > len(rows) / 2
    assert any(not e["riskLevelValueId"] for e in rows)
    assert any(not e["complianceFrameworkValueIds"] for e in rows)
    assert max(len(e["complianceFrameworkValueIds"]) for e in rows) == 3
    assert set(risk_levels.values()) == {"Low", "Medium", "High", "Critical"}
    # a resource's grant count is its entitlements'
    assert all(int(r["grantCount"]) == grants_on[r["id"]] for r in resources.values())


def searched(
    api: requests.Session, emu: Emulator, what: str, body: dict[str, Any]
) -> list[dict[str, Any]]:
    """Every item of a resource (type) search, following nextPageToken in the body."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        response = api.post(
            f"{emu.url}/api/v1/search/{what}", json=body | {"pageToken": token}, timeout=30
        )
        assert response.status_code == 200, response.text
        page = response.json()
        items += page["list"] or []
        if not (token := page["nextPageToken"]):
            return items


def test_the_cross_app_searches_find_what_the_lists_list(api, emu: Emulator, ds: Dataset) -> None:
    types, resources = ds.app_resource_types(), ds.app_resources()
    assert searched(api, emu, "app_resource_types", {"pageSize": 10}) == types
    views = searched(api, emu, "app_resources", {"pageSize": 100})
    assert [v["appResource"] for v in views] == resources
    two = {ds.apps[1], ds.apps[3]}
    by_type = Counter(r["appResourceTypeId"] for r in resources).most_common(2)
    some = [r["id"] for r in resources[::7]]
    aws_role = next(r for r in resources if r["nhiType"] == "NHI_TYPE_ASSUMABLE_ROLE")
    type_cases: list[tuple[dict[str, Any], Any]] = [
        ({"appIds": sorted(two)}, lambda t: t["appId"] in two),
        ({"resourceTypeIds": [by_type[0][0]]}, lambda t: t["id"] == by_type[0][0]),
        ({"excludeResourceTypeIds": [by_type[0][0]]}, lambda t: t["id"] != by_type[0][0]),
        ({"resourceTypeTraitIds": ["TRAIT_GROUP"]}, lambda t: t["traitIds"] == ["TRAIT_GROUP"]),
        (
            {"excludeResourceTypeTraitIds": ["TRAIT_ROLE"]},
            lambda t: "TRAIT_ROLE" not in t["traitIds"],
        ),
        ({"displayName": "Repository"}, lambda t: t["displayName"] == "Repository"),
        ({"query": "PROJ"}, lambda t: "proj" in t["displayName"].lower()),
        ({"appIds": ["2nosuchapp"]}, lambda t: False),
    ]
    for body, keep in type_cases:
        expected = [t for t in types if keep(t)]
        assert searched(api, emu, "app_resource_types", body) == expected, body
        assert expected or body["appIds"] == ["2nosuchapp"], body
    resource_cases: list[tuple[dict[str, Any], Any]] = [
        ({"appIds": sorted(two)}, lambda r: r["appId"] in two),
        ({"appId": ds.apps[1]}, lambda r: r["appId"] == ds.apps[1]),
        ({"resourceTypeIds": [by_type[1][0]]}, lambda r: r["appResourceTypeId"] == by_type[1][0]),
        ({"resourceIds": some}, lambda r: r["id"] in some),
        ({"excludeResourceIds": some}, lambda r: r["id"] not in some),
        (
            {"refs": [{k: aws_role[k] for k in ("appId", "appResourceTypeId", "id")}]},
            lambda r: r["id"] == aws_role["id"],
        ),
        ({"nhiTypes": ["NHI_TYPE_ASSUMABLE_ROLE"]}, lambda r: r["nhiType"] == aws_role["nhiType"]),
        ({"query": "Payments"}, lambda r: "payments" in r["displayName"]),
        ({"unownedOnly": False, "excludeDeletedApps": True}, lambda r: True),
    ]
    for body, keep in resource_cases:
        expected = [r for r in resources if keep(r)]
        found = searched(api, emu, "app_resources", body | {"pageSize": 100})
        assert [v["appResource"] for v in found] == expected, body
        assert expected, body


@pytest.mark.parametrize(
    ("what", "body", "message"),
    [
        ("app_resource_types", {"appIds": "x"}, "appIds must be an array"),
        (
            "app_resource_types",
            {"appUserIds": ["x"]},
            'field "appUserIds" of the request is not emulated',
        ),
        ("app_resource_types", {"owner": "x"}, 'unknown field "owner" in request'),
        (
            "app_resources",
            {"ownerUserIds": ["u"]},
            'field "ownerUserIds" of the request is not emulated',
        ),
        (
            "app_resources",
            {"unownedOnly": True},
            'field "unownedOnly" of the request is not emulated',
        ),
        (
            "app_resources",
            {"sortField": "APP_RESOURCE_SORT_FIELD_LAST_USED_AT"},
            'field "sortField" of the request is not emulated',
        ),
        (
            "app_resources",
            {"nhiTypes": ["NHI_TYPE_ROBOT"]},
            'nhiTypes: unknown enum value "NHI_TYPE_ROBOT"',
        ),
        (
            "app_resources",
            {"refs": [{"id": "x"}]},
            "refs[0] needs appId and appResourceTypeId and id",
        ),
        ("app_resources", {"pageSize": "many"}, "pageSize must be an int32"),
        ("app_resources", {"pageToken": "forged"}, "invalid page token"),
    ],
)
def test_the_searches_are_strict(
    api, emu: Emulator, what: str, body: dict[str, Any], message: str
) -> None:
    response = api.post(f"{emu.url}/api/v1/search/{what}", json=body, timeout=10)
    assert (response.status_code, response.json()["message"]) == (400, message)


def test_a_search_token_names_its_search(api, emu: Emulator, ds: Dataset) -> None:
    url = f"{emu.url}/api/v1/search/app_resources"
    token = api.post(url, json={"pageSize": 10}, timeout=10).json()["nextPageToken"]
    other = api.post(
        url, json={"pageSize": 10, "pageToken": token, "appIds": ds.apps[:1]}, timeout=10
    )
    assert (other.status_code, other.json()["message"]) == (
        400,
        "page token does not match request",
    )
    types = f"{emu.url}/api/v1/search/app_resource_types"
    assert api.post(types, json={"pageToken": token}, timeout=10).status_code == 400
    assert api.get(url, timeout=10).status_code == 405
    assert operation_of("/api/v1/search/app_resources").endswith("/SearchAppResources")


# ----- attributes --------------------------------------------------------------------------


def risk_type(ds: Dataset) -> str:
    return next(t["id"] for t in ds.attribute_types() if t["name"] == "Risk Level")


def framework_type(ds: Dataset) -> str:
    return next(t["id"] for t in ds.attribute_types() if t["name"] == "Compliance Framework")


def test_attribute_types_and_values_page_as_the_truth(api, emu: Emulator, ds: Dataset) -> None:
    root = f"{emu.url}/api/v1/attributes"
    types = listed(api, f"{root}/types")
    assert types == ds.attribute_types()
    assert len(types) >= 3
    values = []
    for kind in types:
        values += listed(api, f"{root}/types/{kind['id']}/values", page_size=10)
    assert values == ds.attribute_values()
    assert listed(api, f"{root}/risk_levels") == ds.attribute_values(risk_type(ds))
    pages = list_all(api, f"{root}/compliance_frameworks", page_size=10)
    assert len(pages) == 2  # twelve frameworks
    assert entries(pages) == ds.attribute_values(framework_type(ds))
    names = {v["value"] for v in entries(pages)}
    assert {"SOX", "SOC 2", "ISO 27001", "HIPAA", "PCI DSS", "GDPR"} <= names
    missing = api.get(f"{root}/types/2nosuchtype/values", timeout=10)
    assert (missing.status_code, missing.json()["message"]) == (404, "attribute type not found")


# ----- the service's roles -----------------------------------------------------------------


def test_roles_page_as_the_truth_and_users_hold_them(api, emu: Emulator, ds: Dataset) -> None:
    pages = list_all(api, f"{emu.url}/api/v1/iam/roles", page_size=10)
    roles = entries(pages)
    assert len(pages) == 2
    assert roles == ds.iam_roles()
    names = {role["displayName"] for role in roles}
    assert {"Super Admin", "Read-only Admin", "Auditor", "App Admin"} <= names
    assert any(role["systemApiOnly"] for role in roles)
    assert any(not role["systemBuiltin"] for role in roles)
    # every role a user holds is one of them; nobody holds an API-only one
    people = [v["user"] for v in listed(api, f"{emu.url}/api/v1/users", page_size=100)]
    held = Counter(role for user in people for role in user.get("roleIds") or [])
    by_id = {role["id"]: role for role in roles}
    assert set(held) <= set(by_id)
    assert not any(by_id[role]["systemApiOnly"] for role in held)
    # the administrators (the system log's) are Super Admins; some admins are not enabled
    super_admin = next(role["id"] for role in roles if role["name"] == "super_admin")
    assert all(super_admin in people[u]["roleIds"] for u in range(ADMINISTRATORS))
    admin_roles = {ds.iam.ids[n] for n, role in enumerate(ROLES) if role.admin}
    admins = [user for user in people if admin_roles & set(user.get("roleIds") or [])]
    assert any(user.get("directoryStatus") not in (None, "ENABLED") for user in admins)
    assert any(user.get("directoryStatus") == "ENABLED" for user in admins)


# ----- owners ------------------------------------------------------------------------------


def test_owners_page_as_the_truth(api, emu: Emulator, ds: Dataset) -> None:
    app_owners = {
        app.id: listed(api, app_url(emu, app.id, "/owners"), page_size=10)
        for app in ds.catalog_apps
    }
    assert app_owners == ds.app_owners()
    entitlement_owners, owner_users = {}, {}
    for app in ds.catalog_apps:
        for entitlement_id in app.entitlement_ids:
            path = f"/apps/{app.id}/entitlements/{entitlement_id}/owners"
            entitlement_owners[app.id, entitlement_id] = listed(api, f"{emu.url}/api/v1{path}")
            owner_users[app.id, entitlement_id] = listed(api, f"{emu.url}/api/v2{path}/users")
    assert entitlement_owners == ds.entitlement_owners()
    assert owner_users == ds.entitlement_owner_users()
    assert {key: [o["user"] for o in found] for key, found in owner_users.items()} == (
        entitlement_owners
    )
    # about a third of apps and of entitlements own nobody of their own
    for owned in (app_owners, entitlement_owners):
        unowned = sum(1 for users in owned.values() if not users)
        assert 0.2 < unowned / len(owned) < 0.5
    # owners are people of the directory, sent as it sends them; some of them left
    directory = {v["userId"]: v["user"] for v in listed(api, f"{emu.url}/api/v1/users")}
    everyone = [u for found in (*app_owners.values(), *entitlement_owners.values()) for u in found]
    assert all(directory[user["id"]] == user for user in everyone)
    assert sum(1 for user in everyone if departed(user)) > len(everyone) // 20
    assert any(user.get("directoryStatus") == "DISABLED" for user in everyone)
    # by default an app's inline appOwners are empty, as before (see the next test)
    apps = listed(api, f"{emu.url}/api/v1/apps", page_size=100)
    assert all(app["appOwners"] == [] for app in apps)
    # the v2 list's roles, and its role_slug filter
    slugs = Counter(o["roleSlug"] for found in owner_users.values() for o in found)
    assert set(slugs) == {"owner", "backup-owner"}
    key, found = next((k, v) for k, v in owner_users.items() if len(v) == 2)
    url = f"{emu.url}/api/v2/apps/{key[0]}/entitlements/{key[1]}/owners/users"
    for slug in slugs:
        only = listed(api, url, role_slug=slug)
        assert only == [o for o in found if o["roleSlug"] == slug]
    assert listed(api, url, roleSlug="nobody") == []
    twice = api.get(url, params={"role_slug": "owner", "roleSlug": "owner"}, timeout=10)
    assert twice.status_code == 400


def test_apps_carry_their_owners_inline_when_asked(fresh: Emulator) -> None:
    """``inline_app_owners``: an App's ``appOwners`` are the Users its owners endpoint lists,
    in the apps' list and in a grants search's expanded apps, in every field shape."""
    api, ds = login(fresh), fresh.dataset
    control = f"{fresh.url}/_emulator/settings"
    answer = requests.post(control, json={"inline_app_owners": True}, timeout=10)
    assert answer.json()["inline_app_owners"] is True
    apps = listed(api, f"{fresh.url}/api/v1/apps", page_size=100)
    assert {app["id"]: app["appOwners"] for app in apps} == ds.app_owners()
    assert {app["id"]: app["appOwners"] for app in apps} == {
        app.id: listed(api, app_url(fresh, app.id, "/owners")) for app in ds.catalog_apps
    }
    search = {"appIds": ds.apps[:1], "expandMask": {"paths": ["app_id"]}}
    expanded = api.post(f"{fresh.url}/api/v1/search/grants", json=search, timeout=10).json()
    assert expanded["expanded"][0]["appOwners"] == ds.app_owners()[ds.apps[0]]
    fresh.shapes = "older"
    owners = [u for app in listed(api, f"{fresh.url}/api/v1/apps") for u in app["appOwners"]]
    assert owners
    assert not any("origin" in user for user in owners)
    assert requests.post(control, json={"inline_app_owners": 1}, timeout=10).status_code == 400
    assert parse_args(["--inline-app-owners"]).inline_app_owners is True
    assert parse_args([]).inline_app_owners is False


def test_an_owner_removed_from_the_directory_stays_an_owner(fresh: Emulator) -> None:
    api, ds = login(fresh), fresh.dataset
    app_id, owners = next((a, users) for a, users in ds.app_owners().items() if users)
    gone = owners[0]["id"]
    fresh.remove(user_id=gone)
    assert gone not in {u.user_id for u in ds.directory_users()}
    assert listed(api, app_url(fresh, app_id, "/owners")) == owners == ds.app_owners()[app_id]


# ----- connectors --------------------------------------------------------------------------


def test_connectors_page_as_the_truth_in_every_sync_state(api, emu: Emulator, ds: Dataset) -> None:
    connectors = []
    for app in ds.catalog_apps:
        views = listed(api, app_url(emu, app.id, "/connectors"))
        assert all(
            set(v) == {"appPath", "capabilitiesPath", "connector", "usersPath"} for v in views
        )
        connectors += [v["connector"] for v in views]
    assert connectors == ds.connectors()
    assert {c["appId"] for c in connectors} < {app.id for app in ds.catalog_apps}
    end = parse_rfc3339(END)

    def ago(connector: dict[str, Any]) -> int:
        return end - parse_rfc3339(connector["status"]["completedAt"])

    statuses = [c["status"] or {} for c in connectors]
    done = [c for c in connectors if (c["status"] or {}).get("status") == "SYNC_STATUS_DONE"]
    assert any(ago(c) < 12 * 3600 * NS for c in done)  # synced hours ago
    assert any(ago(c) > 2 * 86_400 * NS for c in done)  # synced days ago
    failed = [s for s in statuses if s.get("status") == "SYNC_STATUS_ERROR"]
    assert failed
    assert all(s["lastError"] and s["completedAt"] for s in failed)
    assert all(not s.get("lastError") for s in statuses if s not in failed)
    assert any(c["status"] is None for c in connectors)  # never synced
    running = [s for s in statuses if s.get("status") == "SYNC_STATUS_RUNNING"]
    assert running
    assert not any(s["completedAt"] for s in running)
    disabled = [c for c in connectors if c["syncDisabledAt"]]
    assert disabled
    assert all(c["syncDisabledReason"] for c in disabled)
    assert all(c["status"]["status"] == "SYNC_STATUS_DISABLED" for c in disabled)
    # secrets: in configurations and in signed links, each served, listed by the dataset
    secrets = ds.connector_secrets()
    assert len(set(secrets)) == len(secrets) > len(ds.apps)
    assert any(c["config"] and c["config"].get("apiKey") in secrets for c in connectors)
    links = [c["downloadUrl"] for c in connectors if c["downloadUrl"]]
    assert links
    assert all("token=" in link and "Signature=" in link for link in links)
    served = json.dumps(connectors)
    assert all(secret in served for secret in secrets)
    assert all(
        c["config"]["@type"].startswith("type.googleapis.com/") for c in connectors if c["config"]
    )


# ----- strictness --------------------------------------------------------------------------


def operation_urls(emu: Emulator, ds: Dataset) -> dict[str, str]:
    app = ds.catalog_apps[1]
    entitlement = app.entitlement_ids[0]
    type_id = ds.resources.layout(1).type_ids[-1]
    attribute_type = ds.attribute_types()[0]["id"]
    return {
        "resource_types": app_url(emu, app.id, "/resource_types"),
        "resources": app_url(emu, app.id, f"/resource_types/{type_id}/resources"),
        "app_owners": app_url(emu, app.id, "/owners"),
        "entitlement_owners": app_url(emu, app.id, f"/entitlements/{entitlement}/owners"),
        "owner_users": f"{emu.url}/api/v2/apps/{app.id}/entitlements/{entitlement}/owners/users",
        "attribute_types": f"{emu.url}/api/v1/attributes/types",
        "attribute_values": f"{emu.url}/api/v1/attributes/types/{attribute_type}/values",
        "risk_levels": f"{emu.url}/api/v1/attributes/risk_levels",
        "compliance_frameworks": f"{emu.url}/api/v1/attributes/compliance_frameworks",
        "iam_roles": f"{emu.url}/api/v1/iam/roles",
        "connectors": app_url(emu, app.id, "/connectors"),
    }


def test_unknown_ids_are_404_and_only_get_is_allowed(api, emu: Emulator, ds: Dataset) -> None:
    app = ds.catalog_apps[1]
    entitlement = app.entitlement_ids[0]
    for url, message in (
        (app_url(emu, "2nosuchapp", "/resource_types"), "app not found"),
        (app_url(emu, "2nosuchapp", "/owners"), "app not found"),
        (app_url(emu, "2nosuchapp", "/connectors"), "app not found"),
        (app_url(emu, "2nosuchapp", "/resource_types/x/resources"), "app not found"),
        (
            app_url(emu, app.id, "/resource_types/2nosuchtype/resources"),
            "app resource type not found",
        ),
        (app_url(emu, app.id, "/entitlements/2nosuch/owners"), "app entitlement not found"),
        (
            app_url(emu, "2nosuchapp", f"/entitlements/{entitlement}/owners"),
            "app entitlement not found",
        ),
        (
            f"{emu.url}/api/v2/apps/{app.id}/entitlements/2nosuch/owners/users",
            "app entitlement not found",
        ),
        (app_url(emu, app.id, "/resource_types/x/resources/y"), "not found"),
        (f"{emu.url}/api/v1/iam/roles/x", "not found"),
    ):
        response = api.get(url, timeout=10)
        assert (response.status_code, response.json()["message"]) == (404, message), url
    # another app's resource type is not this app's
    other_type = ds.resources.layout(0).type_ids[0]
    url = app_url(emu, app.id, f"/resource_types/{other_type}/resources")
    assert api.get(url, timeout=10).status_code == 404
    for name, url in operation_urls(emu, ds).items():
        response = api.post(url, json={}, timeout=10)
        assert (response.status_code, response.headers.get("Allow")) == (405, "GET"), name
        assert requests.get(url, timeout=10).status_code == 401, name


def test_paging_is_strict(api, emu: Emulator, ds: Dataset) -> None:
    urls = operation_urls(emu, ds)
    wide = urls["resources"]
    sizes = [
        len(api.get(wide, params={"page_size": size}, timeout=10).json()["list"])
        for size in (1, 0, 1000)
    ]
    assert sizes[0] == 10
    assert sizes[1] == 25
    assert 25 < sizes[2] <= 100
    token = api.get(wide, timeout=10).json()["nextPageToken"]
    for bad, message in (
        ({"page_token": token[:-2]}, "invalid page token"),
        ({"page_token": "not-a-token"}, "invalid page token"),
        ({"filter": "x"}, 'unknown query parameter "filter"'),
        ({"page_size": "ten"}, "page_size must be an integer"),
    ):
        response = api.get(wide, params=bad, timeout=10)
        assert (response.status_code, response.json()["message"]) == (400, message), bad
    # a token names its own list: another list's is refused
    for name, url in urls.items():
        if url != wide:
            response = api.get(url, params={"page_token": token}, timeout=10)
            assert (response.status_code, response.json()["message"]) == (
                400,
                "page token does not match request",
            ), name
        assert api.get(url, params={"sort": "x"}, timeout=10).status_code == 400, name
    # the last page's token is "" (sent empty by default, like the catalog's lists)
    assert all(list_all(api, url)[-1]["nextPageToken"] == "" for url in urls.values())


def test_removed_apps_and_entitlements_answer_404(fresh: Emulator) -> None:
    api, ds = login(fresh), fresh.dataset
    urls = operation_urls(fresh, ds)
    app = ds.catalog_apps[1]
    fresh.remove(app_id=app.id, app_entitlement_id=app.entitlement_ids[0])
    assert api.get(urls["entitlement_owners"], timeout=10).status_code == 404
    assert api.get(urls["owner_users"], timeout=10).status_code == 404
    assert (app.id, app.entitlement_ids[0]) not in ds.entitlement_owners()
    fresh.remove(app_id=app.id)
    for name in ("resource_types", "resources", "app_owners", "connectors"):
        assert api.get(urls[name], timeout=10).status_code == 404, name
    assert app.id not in ds.app_owners()
    assert app.id not in {c["appId"] for c in ds.connectors()}
    assert app.id not in {t["appId"] for t in ds.app_resource_types()}
    found = api.post(f"{fresh.url}/api/v1/search/app_resources", json={"appIds": [app.id]})
    assert found.json()["list"] == []
    fresh.restore(app_id=app.id)
    assert api.get(urls["connectors"], timeout=10).status_code == 200


# ----- variants ----------------------------------------------------------------------------


def test_an_older_release_answers_the_v2_owner_list_as_an_unknown_route(fresh: Emulator) -> None:
    api, ds = login(fresh), fresh.dataset
    url = operation_urls(fresh, ds)["owner_users"]
    unknown = api.get(f"{fresh.url}/api/v2/no/such/route", timeout=10)
    assert (unknown.status_code, unknown.json()) == (
        404,
        {"code": 5, "message": "not found", "details": []},
    )
    assert api.get(url, timeout=10).status_code == 200
    fresh.absent_operations = [OWNER_USERS_OPERATION]
    answer = api.get(url, timeout=10)
    assert (answer.status_code, answer.content) == (404, unknown.content)
    # over HTTP, by path template, and the older shapes lack it anyway
    control = f"{fresh.url}/_emulator/settings"
    template = "/api/v2/apps/{app_id}/entitlements/{entitlement_id}/owners/users"
    settings = requests.post(control, json={"absent_operations": [template]}, timeout=10).json()
    assert settings["absent_operations"] == [template]
    assert api.get(url, timeout=10).status_code == 404
    requests.post(control, json={"absent_operations": []}, timeout=10)
    assert api.get(url, timeout=10).status_code == 200
    fresh.shapes = "older"
    assert api.get(url, timeout=10).content == unknown.content
    assert api.get(url.removesuffix("/users").replace("/v2/", "/v1/"), timeout=10).ok


def test_a_client_without_the_permission_is_refused_403(fresh: Emulator) -> None:
    api, ds = login(fresh), fresh.dataset
    urls = operation_urls(fresh, ds)
    fresh.forbidden_operations = ["/api/v1/iam/roles"]
    refused = api.get(urls["iam_roles"], timeout=10)
    assert (refused.status_code, refused.json()) == (
        403,
        {
            "code": 7,
            "message": "permission denied: the API key's scope does not allow this call",
            "details": [],
        },
    )
    assert all(api.get(u, timeout=10).ok for name, u in urls.items() if name != "iam_roles")
    # by the operation's name, by a path template, over HTTP; the refusal is logged
    fresh.forbidden_operations = ["c1.api.app.v1.ConnectorService/List"]
    assert api.get(urls["connectors"], timeout=10).status_code == 403
    assert api.get(urls["iam_roles"], timeout=10).ok
    control = f"{fresh.url}/_emulator/settings"
    answer = requests.post(
        control,
        json={"forbidden_operations": ["/api/v1/apps/{app_id}/owners", "/api/v1/users"]},
        timeout=10,
    )
    assert answer.json()["forbidden_operations"] == [
        "/api/v1/apps/{app_id}/owners",
        "/api/v1/users",
    ]
    assert api.get(urls["app_owners"], timeout=10).status_code == 403
    assert api.get(f"{fresh.url}/api/v1/users", timeout=10).status_code == 403
    assert api.get(urls["entitlement_owners"], timeout=10).ok
    for wrong in (["c1.api.NoSuch/List"], "/api/v1/iam/roles", [5]):
        bad = requests.post(control, json={"forbidden_operations": wrong}, timeout=10)
        assert bad.status_code == 400, wrong
    refusals = [
        event
        for event in ds.system_log_objects()
        if event.get("api", {}).get("operation") == "c1.api.app.v1.AppOwners/List"
    ]
    assert refusals
    assert refusals[-1]["status_id"] != 1


def test_the_variants_are_options_of_the_command_line() -> None:
    args = parse_args(
        [
            "--forbid-operation",
            "/api/v1/iam/roles",
            "--forbid-operation",
            "/api/v1/users",
            "--absent-operation",
            OWNER_USERS_OPERATION,
        ]
    )
    assert args.forbidden_operations == ["/api/v1/iam/roles", "/api/v1/users"]
    assert args.absent_operations == [OWNER_USERS_OPERATION]
    assert parse_args([]).forbidden_operations == []
    with Emulator(
        small_dataset(events=50), credential=CRED, forbidden_operations=["/api/v1/iam/roles"]
    ) as emu:
        assert login(emu).get(f"{emu.url}/api/v1/iam/roles", timeout=10).status_code == 403
    with pytest.raises(ValueError, match="unknown operation"):
        Emulator(small_dataset(events=50), credential=CRED, absent_operations=["roles"])


def test_operations_are_named_counted_and_faulted(fresh: Emulator) -> None:
    api, ds = login(fresh), fresh.dataset
    urls = operation_urls(fresh, ds)
    names = {name: operation_of(url.removeprefix(fresh.url)) for name, url in urls.items()}
    assert all(name.startswith("c1.api.") for name in names.values())
    assert len(set(names.values())) == len(names)
    assert names["iam_roles"] == "c1.api.iam.v1.Roles/List"
    fresh.reset_stats()
    for url in urls.values():
        assert api.get(url, timeout=10).ok
    paths = fresh.stats["api_requests_by_path"]
    assert paths == {url.removeprefix(fresh.url): 1 for url in urls.values()}
    logged = {e["api"]["operation"] for e in ds.system_log_objects() if "api" in e}
    assert set(names.values()) <= logged
    roles = urls["iam_roles"].removeprefix(fresh.url)
    fresh.faults.add(kind="503", path=roles)
    assert api.get(urls["iam_roles"], timeout=10).status_code == 503
    assert api.get(urls["iam_roles"], timeout=10).ok


def test_a_frozen_emulator_keeps_the_answers_and_still_applies_the_variants() -> None:
    with Emulator(small_dataset(events=200), credential=CRED, log_calls=False, frozen=True) as emu:
        api, urls = login(emu), operation_urls(emu, emu.dataset)
        first = [api.get(url, timeout=10).content for url in urls.values()]
        built = emu.service.frozen.built  # type: ignore[union-attr]
        assert [api.get(url, timeout=10).content for url in urls.values()] == first
        assert emu.service.frozen.built == built  # type: ignore[union-attr]
        emu.forbidden_operations = ["/api/v1/iam/roles"]
        assert api.get(urls["iam_roles"], timeout=10).status_code == 403
        emu.absent_operations = [OWNER_USERS_OPERATION]
        assert api.get(urls["owner_users"], timeout=10).status_code == 404


@pytest.mark.parametrize("emit", [None, True, False], ids=["default", "emitted", "omitted"])
def test_unset_fields_are_sent_empty_or_omitted(emit: bool | None) -> None:
    with Emulator(
        small_dataset(events=200), credential=CRED, emit_unpopulated=emit, inline_app_owners=True
    ) as emu:
        api, ds = login(emu), emu.dataset
        urls = operation_urls(emu, ds)
        pages = {name: api.get(url, timeout=10).json() for name, url in urls.items()}
        connectors = [
            v["connector"]
            for app in ds.catalog_apps[: len(ds.apps)]
            for v in listed(api, app_url(emu, app.id, "/connectors"))
        ]
        owners = {app_id: listed(api, app_url(emu, app_id, "/owners")) for app_id in ds.apps}
        apps = listed(api, f"{emu.url}/api/v1/apps", page_size=100)
    resources = [v["appResource"] for v in pages["resources"]["list"]]
    roles = pages["iam_roles"]["list"]
    everyone = [user for users in owners.values() for user in users]
    if emit is False:
        assert all("deletedAt" not in r and "agentTrait" not in r for r in resources)
        assert not any("objectPermissions" in v for v in pages["resources"]["list"])
        assert not any("systemApiOnly" in role for role in roles if not role.get("systemApiOnly"))
        assert all(
            "lastError" not in (c.get("status") or {}) or c["status"]["lastError"]
            for c in connectors
        )
        assert any("status" not in c for c in connectors)  # never synced
        assert all("expanded" not in page for page in pages.values())
        raw = {u: ds.directory.record(u) for u in range(ds.directory.people)}
        assert all(user in raw.values() for user in everyone)
        assert {a["id"]: a.get("appOwners", []) for a in apps if a["id"] in owners} == owners
    else:
        assert all(r["deletedAt"] is None and r["agentTrait"] is None for r in resources)
        assert all(v["objectPermissions"] is None for v in pages["resources"]["list"])
        assert all("lastError" in c["status"] for c in connectors if c["status"])
        assert all("deletedAt" in u and "roleIds" in u for u in everyone)
        assert pages["resource_types"]["expanded"] == []
        assert "expanded" not in pages["app_owners"]  # ListAppOwnersResponse has none
        assert {a["id"]: a["appOwners"] for a in apps if a["id"] in owners} == owners


def test_older_and_changed_shapes_of_the_new_objects() -> None:
    with Emulator(small_dataset(events=200), credential=CRED, shapes="older") as emu:
        api, urls = login(emu), operation_urls(emu, emu.dataset)
        older = {
            name: api.get(url, timeout=10).json()
            for name, url in urls.items()
            if name != "owner_users"
        }
        emu.shapes = "changed"
        changed = {name: api.get(url, timeout=10).json() for name, url in urls.items()}
    resources = [v["appResource"] for v in older["resources"]["list"]]
    assert not any("nhiType" in r or "annotations" in r or "profile" in r for r in resources)
    assert not any("objectPermissions" in v for v in older["resources"]["list"])
    connector = older["connectors"]["list"][0]["connector"]
    assert "connectorApiVersion" not in connector
    assert "configUpdatedAt" not in connector
    assert not any("origin" in user for user in older["app_owners"]["list"])
    resources = [v["appResource"] for v in changed["resources"]["list"]]
    assert all(isinstance(r["grantCount"], int) for r in resources)
    assert isinstance(changed["connectors"]["list"][0]["connector"]["status"]["status"], int)
    assert all(isinstance(role["createdAt"], int) for role in changed["iam_roles"]["list"])
    assert all(isinstance(t["name"], dict) for t in changed["attribute_types"]["list"])
    assert all(isinstance(o["createdAt"], int) for o in changed["owner_users"]["list"])


# ----- the rest of the tenant --------------------------------------------------------------

SCOPED_FIELDS = (
    "appResourceId",
    "appResourceTypeId",
    "riskLevelValueId",
    "complianceFrameworkValueIds",
)


def _without(obj: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key not in names}


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def unchanged_digests(ds: Dataset) -> dict[str, str]:
    """Digests of everything the tenant held before the new concerns, but the fields they
    fill: entitlements' resource and rating fields, apps' owners, users' roleIds (and which
    users hold roles among the administrators). The log's addresses are left out: they hash
    an id with Python's per-process string hash."""

    def user(obj: dict[str, Any]) -> dict[str, Any]:
        return _without(obj, ("roleIds",))

    people = [ds.directory.record(u) for u in ds.directory.listed()]
    return {
        "feed": _digest(ds.feed_entries()),
        "current_grants": _digest([list(g) for g in ds.current_grants()]),
        "past_grants": _digest([list(p) for p in ds.past_grants()]),
        "system_log": _digest([{**e, "src_endpoint": None} for e in ds.system_log_objects()]),
        "tasks": _digest(ds.tasks()),
        "access_reviews": _digest(ds.access_reviews()),
        "app_users": _digest([list(a) for a in ds.app_users()]),
        "directory": _digest([user(u) for u in people]),
        "role_holders": _digest([u["id"] for u in people[ADMINISTRATORS:] if "roleIds" in u]),
        "exclusions": _digest(
            [
                {**entry, "user": user(entry["user"])}
                for key in ds.exclusion_entitlements
                for entry in ds.exclusion_entries(*key)
            ]
        ),
        "apps": _digest(
            [_without(app_object(ds, p), ("appOwners",)) for p in range(len(ds.catalog_apps))]
        ),
        "entitlements": _digest(
            [
                _without(app_entitlement_object(ds, p, k), SCOPED_FIELDS)
                for p, app in enumerate(ds.catalog_apps)
                for k in range(len(app.entitlement_ids))
            ]
        ),
    }


def unchanged_bodies(emu: Emulator) -> str:
    """A digest of the bytes of the answers no new field reaches (one process's page
    tokens are another's with the same key; the system log's addresses differ by process,
    its events are in ``unchanged_digests``)."""
    emu.service.page_tokens = PageTokens(key=b"scoping" * 4)
    api, ds = login(emu), emu.dataset
    bodies = []
    body: dict[str, Any] = {"pageSize": 500}
    while True:
        page = api.post(f"{emu.url}/api/v1/grants/feed", json=body, timeout=30)
        bodies.append(page.content)
        if not (token := page.json()["nextPageToken"]):
            break
        body["pageToken"] = token
    for path, search in (
        ("/api/v1/search/tasks", {"pageSize": 100}),
        ("/api/v1/search/past-grants", {"pageSize": 100}),
    ):
        bodies.append(api.post(emu.url + path, json=search, timeout=30).content)
    bodies.append(api.get(f"{emu.url}/api/v1/access_reviews", timeout=10).content)
    query: dict[str, Any] = {"page_size": 100}  # apps: appOwners stay [] by default
    while True:
        apps = api.get(f"{emu.url}/api/v1/apps", params=query, timeout=10)
        bodies.append(apps.content)
        if not (token := apps.json()["nextPageToken"]):
            break
        query["page_token"] = token
    bodies.append(api.get(app_url(emu, ds.apps[0], "/app_users"), timeout=10).content)
    return hashlib.sha256(b"".join(bodies)).hexdigest()[:16]


# Computed on the emulator before it served resources, owners, attributes, roles and
# connectors (the commit before this file's): the new data draws from generators of its own.
BEFORE = {
    "feed": "bc24bb28c1e7110c",
    "current_grants": "bc17094feceb1b8c",
    "past_grants": "f81b36a9383b3d9b",
    "system_log": "7e045f1f74f40645",
    "tasks": "3d66428fcc59dc02",
    "access_reviews": "799e71469d9791e3",
    "app_users": "c438341d677e9013",
    "directory": "9cc160b1cf6e9e76",
    "role_holders": "a8f47997d2fa5ac5",
    "exclusions": "649db642ce54670c",
    "apps": "f441430bb1a3b4c8",
    "entitlements": "55862f3c229c6f8a",
}
BODIES_BEFORE = "fd9328cadbd971e0"


def test_the_rest_of_the_tenant_is_unchanged_by_the_new_data() -> None:
    ds = small_dataset()
    assert unchanged_digests(ds) == BEFORE
    with Emulator(ds, credential=CRED, log_calls=False) as emu:
        assert unchanged_bodies(emu) == BODIES_BEFORE
