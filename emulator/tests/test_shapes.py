"""Field shapes on every endpoint: the newest ones are the vendor's published response schemas
(docs/vendor-openapi/components.json), whether unset fields are omitted or sent empty; the
older and changed ones differ from them where emulator/shapes.py says, on every endpoint."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
import requests
from jsonschema import Draft202012Validator

from emulator import Emulator, server
from emulator.shapes import SHAPES
from emulator.tests.conftest import CRED, ROOT, login, small_dataset

DOCUMENT = ROOT / "docs" / "vendor-openapi" / "components.json"
RESPONSES = {
    "feed": "c1.api.app.v1.SearchGrantFeedResponse",
    "apps": "c1.api.app.v1.ListAppsResponse",
    "entitlements": "c1.api.app.v1.ListAppEntitlementsResponse",
    "exclusions": "c1.api.app.v1.ListAutomationExclusionsResponse",
    "resource_types": "c1.api.app.v1.AppResourceTypeServiceListResponse",
    "resources": "c1.api.app.v1.AppResourceServiceListResponse",
    "app_owners": "c1.api.app.v1.ListAppOwnersResponse",
    "entitlement_owners": "c1.api.app.v1.ListAppEntitlementOwnersResponse",
    "owner_users": "c1.api.app.v2.SearchAppEntitlementUserOwnersResponse",
    "attribute_types": "c1.api.attribute.v1.ListAttributeTypesResponse",
    "attribute_values": "c1.api.attribute.v1.ListAttributeValuesResponse",
    "risk_levels": "c1.api.attribute.v1.ListRiskLevelsResponse",
    "compliance_frameworks": "c1.api.attribute.v1.ListComplianceFrameworksResponse",
    "iam_roles": "c1.api.iam.v1.ListRolesResponse",
    "connectors": "c1.api.app.v1.ConnectorServiceListResponse",
    "search_resource_types": "c1.api.app.v1.SearchAppResourceTypesResponse",
    "search_resources": "c1.api.app.v1.SearchAppResourcesResponse",
}
SEARCHES = {
    "search_resource_types": "/api/v1/search/app_resource_types",
    "search_resources": "/api/v1/search/app_resources",
}


def _without_enums(node: Any) -> Any:
    """Enum values newer than the description are sent on purpose (clients must pass them
    through), so the value lists are left out of the check; the types stay."""
    if isinstance(node, dict):
        return {k: _without_enums(v) for k, v in node.items() if k != "enum"}
    if isinstance(node, list):
        return [_without_enums(v) for v in node]
    return node


@cache
def validator(response: str) -> Draft202012Validator:
    components = _without_enums(json.loads(DOCUMENT.read_text())["components"])
    schema = {"$ref": f"#/components/schemas/{RESPONSES[response]}", "components": components}
    return Draft202012Validator(schema)


def scoping_paths(emulator: Emulator) -> dict[str, str]:
    """A path of each operation of what an audit is scoped by, each answering a non-empty
    list: an app with owners and resource types, an entitlement with two owners; the v2
    owner list only where the release has it."""
    ds = emulator.dataset
    (app_id, entitlement_id), _ = next(
        (key, owners) for key, owners in ds.entitlement_owners().items() if len(owners) == 2
    )
    owned = next(app for app, owners in ds.app_owners().items() if owners)
    types = [t for t in ds.app_resource_types() if t["appId"] == owned]
    attribute_type = ds.attribute_types()[0]["id"]
    app = f"/api/v1/apps/{owned}"
    paths = {
        "resource_types": f"{app}/resource_types",
        "resources": f"{app}/resource_types/{types[-1]['id']}/resources",
        "app_owners": f"{app}/owners",
        "entitlement_owners": f"/api/v1/apps/{app_id}/entitlements/{entitlement_id}/owners",
        "owner_users": f"/api/v2/apps/{app_id}/entitlements/{entitlement_id}/owners/users",
        "attribute_types": "/api/v1/attributes/types",
        "attribute_values": f"/api/v1/attributes/types/{attribute_type}/values",
        "risk_levels": "/api/v1/attributes/risk_levels",
        "compliance_frameworks": "/api/v1/attributes/compliance_frameworks",
        "iam_roles": "/api/v1/iam/roles",
        "connectors": f"/api/v1/apps/{ds.apps[0]}/connectors",
    }
    if emulator.shapes == "older":
        del paths["owner_users"]
    return paths


def answers(emulator: Emulator) -> dict[str, list[dict[str, Any]]]:
    """One answer of each endpoint: the feed with everything expanded, the first page of
    apps, the entitlements of the first app, the exclusions of the first entitlement that
    has some, and one page of each list of what an audit is scoped by."""
    api = login(emulator)
    url = emulator.url
    ds = emulator.dataset

    def ok(response: requests.Response) -> dict[str, Any]:
        assert response.status_code == 200, response.text
        return response.json()

    app_id, entitlement_id = ds.exclusion_entitlements[0]
    return (
        {
            "feed": [
                ok(api.post(f"{url}/api/v1/grants/feed", json={"expandMask": {"paths": ["*"]}}))
            ],
            "apps": [ok(api.get(f"{url}/api/v1/apps", params={"page_size": 100}))],
            "entitlements": [ok(api.get(f"{url}/api/v1/apps/{app_id}/entitlements"))],
            "exclusions": [
                ok(
                    api.get(
                        f"{url}/api/v1/apps/{app_id}/entitlements/{entitlement_id}"
                        "/automation/exclusions"
                    )
                )
            ],
        }
        | {name: [ok(api.get(url + path))] for name, path in scoping_paths(emulator).items()}
        | {
            name: [ok(api.post(url + path, json={"pageSize": 50}))]
            for name, path in SEARCHES.items()
        }
    )


def errors(response: str, page: dict[str, Any]) -> list[str]:
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator(response).iter_errors(page)
    ]


@pytest.mark.parametrize("unpopulated", [None, True, False], ids=["default", "emitted", "omitted"])
def test_the_newest_shapes_are_the_vendors_published_ones(unpopulated: bool | None) -> None:
    dataset = small_dataset(events=300)
    with Emulator(dataset, credential=CRED, emit_unpopulated=unpopulated) as emulator:
        for response, pages in answers(emulator).items():
            for page in pages:
                assert page["list"], response
                assert errors(response, page) == [], response
        apps = answers(emulator)["apps"][0]["list"]
    # the newest release's map, set on some apps
    assert any(app.get("annotations") for app in apps)
    assert all(isinstance(app.get("annotations", {}), dict) for app in apps)


def test_older_and_changed_shapes_differ_where_shapes_py_says() -> None:
    dataset = small_dataset(events=300)
    with Emulator(dataset, credential=CRED, shapes="older") as emulator:
        older = answers(emulator)
        emulator.shapes = "changed"
        changed = answers(emulator)
    # older: annotations a list, the newest release's fields absent, still the vendor's types
    apps = older["apps"][0]["list"]
    assert all(isinstance(app["annotations"], list) for app in apps)
    assert any(app["annotations"] for app in apps)
    assert not any("revokeGrantSources" in app for app in apps)
    users = [entry["user"] for entry in older["exclusions"][0]["list"]]
    assert not any("origin" in user for user in users)
    assert {e.split(":")[0] for e in errors("apps", older["apps"][0])} == {
        f"list.{n}.annotations" for n, app in enumerate(apps) if "annotations" in app
    }
    # changed: on every endpoint, answers the vendor's newest schema does not allow
    for response, pages in changed.items():
        assert errors(response, pages[0]), f"{response} answers in the newest shapes"


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("unpopulated", [None, True, False], ids=["default", "emitted", "omitted"])
def test_every_answer_is_the_json_the_standard_library_writes(
    shapes: str, unpopulated: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's encoder (msgspec, for speed) writes each endpoint's answer byte for byte as
    ``json.dumps`` does, compact and in UTF-8, in every shape and marshalling."""
    written: list[tuple[Any, bytes]] = []

    def recording(obj: Any) -> bytes:
        body = encode(obj)
        written.append((obj, body))
        return body

    encode = server._ENCODE
    monkeypatch.setattr(server, "_ENCODE", recording)
    with Emulator(small_dataset(), credential=CRED, shapes=shapes) as emu:
        emu.emit_unpopulated = unpopulated
        api, url, ds = login(emu), emu.url, emu.dataset
        app_id, entitlement_id = ds.exclusion_entitlements[0]
        app = f"{url}/api/v1/apps/{app_id}"
        statuses = [
            response.status_code
            for response in (
                api.post(f"{url}/api/v1/grants/feed", json={"expandMask": {"paths": ["*"]}}),
                api.get(f"{url}/api/v1/apps"),
                api.get(f"{app}/entitlements"),
                api.get(f"{app}/entitlements/{entitlement_id}/automation/exclusions"),
                api.get(f"{app}/entitlements/{entitlement_id}/users"),
                api.get(f"{app}/app_users"),
                api.get(f"{url}/api/v1/users"),
                api.post(f"{url}/api/v1/search/grants", json={"appIds": [app_id]}),
                api.post(f"{url}/api/v1/search/past-grants", json={"appIds": [app_id]}),
                api.post(f"{url}/api/v1/search/tasks", json={}),
                api.get(f"{url}/api/v1/access_reviews"),
                api.post(f"{url}/api/v1/systemlog/events", json={}),
                *(api.get(url + path) for path in scoping_paths(emu).values()),
                *(api.post(url + path, json={}) for path in SEARCHES.values()),
                api.get(f"{app}/entitlements/unknown"),  # an error's body
            )
        ]
    scoped = len(scoping_paths(emu)) + len(SEARCHES)
    assert statuses == [200] * (12 + scoped) + [404]
    assert len(written) >= 13 + scoped
    for obj, body in written:
        assert body == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
