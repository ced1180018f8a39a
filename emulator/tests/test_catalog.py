"""The tenant's catalog (apps, app entitlements) and unpopulated fields on every endpoint."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from emulator import Dataset, Emulator
from emulator.tests.conftest import CRED, exclusions_url, login, small_dataset, traverse


def list_all(api: requests.Session, url: str, **params: Any) -> list[dict[str, Any]]:
    """Every page of a GET list, following nextPageToken in the query string."""
    pages, token = [], ""
    while True:
        query = params | ({"page_token": token} if token else {})
        response = api.get(url, params=query, timeout=10)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        token = pages[-1].get("nextPageToken")
        if not token:
            return pages


def entries(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for page in pages for item in page["list"] or []]


def test_apps_list_the_whole_catalog_in_pages(api, emu: Emulator, ds: Dataset) -> None:
    pages = list_all(api, f"{emu.url}/api/v1/apps", page_size=100)
    apps = entries(pages)
    assert len(pages) == 2
    assert len(apps) == len(ds.catalog_apps) > 100
    assert [app["id"] for app in apps] == [app.id for app in ds.catalog_apps]
    # the feed's apps come first, with the names the feed's expanded objects carry
    assert apps[0]["displayName"] == ds.feed.expanded_app(0)["displayName"]
    assert all(isinstance(app["userCount"], str) for app in apps if "userCount" in app)
    assert pages[-1]["nextPageToken"] == ""  # the catalog sends unset fields empty by default
    assert len(entries(list_all(api, f"{emu.url}/api/v1/apps"))) == len(apps)  # 25 a page


def test_app_entitlements_are_views_consistent_with_the_feed(api, emu: Emulator, ds) -> None:
    for position, app in enumerate(ds.catalog_apps):
        views = entries(list_all(api, f"{emu.url}/api/v1/apps/{app.id}/entitlements"))
        assert [v["appEntitlement"]["id"] for v in views] == list(app.entitlement_ids)
        for k, view in enumerate(views):
            entitlement = view["appEntitlement"]
            assert entitlement["appId"] == app.id
            assert entitlement.get("isAutomationEnabled", False) == ds.is_automated(position, k)
            assert ("durationGrant" in entitlement) != ("durationUnset" in entitlement)
            if position < len(ds.apps):
                assert (
                    entitlement["displayName"]
                    == ds.feed.expanded_entitlement(position, k)["displayName"]
                )
    counts = [len(app.entitlement_ids) for app in ds.catalog_apps]
    assert 0 in counts  # an app without entitlements
    assert max(counts) > 200  # one with several pages


def test_catalog_holds_an_entitlement_id_shared_by_two_apps(ds: Dataset) -> None:
    first, second = ds.catalog_apps[:2]
    assert first.entitlement_ids[0] == second.entitlement_ids[0]


def test_automated_entitlements_with_and_without_exclusions(api, emu: Emulator, ds) -> None:
    automated = ds.automated_entitlements
    with_exclusions = {key for key in ds.exclusion_entitlements if ds.exclusion_entries(*key)}
    assert with_exclusions <= set(automated)
    assert set(automated) - with_exclusions
    # every automated entitlement answers its exclusions, those of catalog-only apps too
    for key in automated[-3:]:
        response = api.get(exclusions_url(emu, *key), timeout=10)
        assert response.status_code == 200, response.text


def test_unknown_app_is_404(api, emu: Emulator) -> None:
    response = api.get(f"{emu.url}/api/v1/apps/2NoSuchApp/entitlements", timeout=10)
    assert response.status_code == 404
    assert response.json()["message"] == "app not found"


def test_catalog_paging_is_strict(api, emu: Emulator, ds: Dataset) -> None:
    url = f"{emu.url}/api/v1/apps"
    assert api.get(url, params={"pageSize": "x"}, timeout=10).status_code == 400
    assert api.get(url, params={"filter": "a"}, timeout=10).status_code == 400
    token = api.get(url, timeout=10).json()["nextPageToken"]
    other = f"{url}/{ds.catalog_apps[len(ds.apps) + 1].id}/entitlements"
    assert api.get(other, params={"page_token": token}, timeout=10).status_code == 400


def test_catalog_size_is_configurable() -> None:
    ds = small_dataset(catalog_apps=40, catalog_entitlements=2000)
    assert len(ds.catalog_apps) == 40
    assert sum(len(app.entitlement_ids) for app in ds.catalog_apps) == 2000


@pytest.fixture
def emitting():
    with Emulator(small_dataset(events=300), credential=CRED, emit_unpopulated=True) as emu:
        yield emu


def test_emit_unpopulated_sends_every_field(emitting: Emulator) -> None:
    api = login(emitting)
    ds = emitting.dataset
    feed = traverse(api, emitting, {})
    assert all(entry["appPath"] == "" and "ticketId" in entry["feed"] for entry in feed)
    assert any(entry["feed"]["ticketId"] == "" for entry in feed)
    key = next(k for k in ds.exclusion_entitlements if ds.exclusion_entries(*k))
    page = api.get(exclusions_url(emitting, *key), timeout=10).json()
    assert all(
        set(entry["user"]) >= {"deletedAt", "department", "status"} for entry in page["list"]
    )
    empty = next(k for k in ds.exclusion_entitlements if not ds.exclusion_entries(*k))
    assert api.get(exclusions_url(emitting, *empty), timeout=10).json() == {
        "list": [],
        "nextPageToken": "",
    }
    apps = api.get(f"{emitting.url}/api/v1/apps", timeout=10).json()["list"]
    assert all(app["parentAppId"] == "" and app["deletedAt"] is None for app in apps)
    bare = ds.catalog_apps[len(ds.apps)]
    assert api.get(f"{emitting.url}/api/v1/apps/{bare.id}/entitlements", timeout=10).json() == {
        "list": [],
        "expanded": [],
        "nextPageToken": "",
    }


def test_by_default_the_catalog_sends_unset_fields_and_the_feed_omits_them(
    api, emu: Emulator, ds: Dataset
) -> None:
    apps = entries(list_all(api, f"{emu.url}/api/v1/apps", page_size=100))
    assert all(app["parentAppId"] == "" and app["deletedAt"] is None for app in apps)
    views = entries(list_all(api, f"{emu.url}/api/v1/apps/{ds.apps[0]}/entitlements"))
    assert all(
        view["appPath"] == "" and "isAutomationEnabled" in view["appEntitlement"] for view in views
    )
    feed = api.post(f"{emu.url}/api/v1/grants/feed", json={}, timeout=10).json()["list"]
    assert any("ticketId" not in entry["feed"] for entry in feed)


def test_omitting_unpopulated_fields_everywhere() -> None:
    with Emulator(small_dataset(events=300), credential=CRED, emit_unpopulated=False) as emu:
        api = login(emu)
        ds = emu.dataset
        apps = entries(list_all(api, f"{emu.url}/api/v1/apps", page_size=100))
        assert not any("parentAppId" in app or "deletedAt" in app for app in apps)
        views = entries(list_all(api, f"{emu.url}/api/v1/apps/{ds.apps[0]}/entitlements"))
        assert not any("appPath" in view for view in views)
        assert any("isAutomationEnabled" not in view["appEntitlement"] for view in views)
        # a set oneof member stays, empty or not
        assert any("durationUnset" in view["appEntitlement"] for view in views)


def test_emit_unpopulated_is_a_setting(fresh: Emulator) -> None:
    response = requests.post(
        f"{fresh.url}/_emulator/settings", json={"emit_unpopulated": True}, timeout=10
    )
    assert response.json()["emit_unpopulated"] is True
    assert fresh.emit_unpopulated
    bad = requests.post(f"{fresh.url}/_emulator/settings", json={"emit_unpopulated": 1}, timeout=10)
    assert bad.status_code == 400
    back = requests.post(
        f"{fresh.url}/_emulator/settings", json={"emit_unpopulated": None}, timeout=10
    )
    assert back.json()["emit_unpopulated"] is None
