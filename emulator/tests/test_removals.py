"""Removing (and restoring) an exclusion, a user, an app entitlement or an app between runs:
the service's answers and the ground truth change together; the grant feed keeps its history."""

from __future__ import annotations

import pytest
import requests

from emulator import Emulator
from emulator.tests.conftest import FEED, exclusions_url, login, small_dataset, traverse
from emulator.tests.test_catalog import entries, list_all
from emulator.tests.test_exclusions import traverse_exclusions


@pytest.fixture
def emulator():
    with Emulator(small_dataset(events=300)) as emu:
        yield emu


def listed(emu: Emulator, api: requests.Session) -> set[tuple[str, str, str]]:
    """Every (app, entitlement, user) the exclusions endpoints answer; 404s answer none."""
    found = set()
    for app_id, entitlement_id in emu.dataset.exclusion_entitlements:
        response = api.get(exclusions_url(emu, app_id, entitlement_id), timeout=10)
        if response.status_code == 404:
            continue
        entries, _ = traverse_exclusions(api, emu, app_id, entitlement_id)
        found |= {(e["appId"], e["appEntitlementId"], e["user"]["id"]) for e in entries}
    return found


def truth(emu: Emulator) -> set[tuple[str, str, str]]:
    return {
        (r["app_id"], r["app_entitlement_id"], r["user_id"]) for r in emu.dataset.excluded_users()
    }


def test_removed_things_leave_the_answers_and_come_back(emulator: Emulator) -> None:
    api = login(emulator)
    ds = emulator.dataset
    before = listed(emulator, api)
    assert before == truth(emulator)
    feed_before = traverse(api, emulator, {})
    by_entitlement: dict[tuple[str, str], set[str]] = {}
    for app_id, entitlement_id, user_id in before:
        by_entitlement.setdefault((app_id, entitlement_id), set()).add(user_id)
    (app_id, entitlement_id), users = max(by_entitlement.items(), key=lambda kv: len(kv[1]))
    user = sorted(users)[0]

    emulator.remove(app_id=app_id, app_entitlement_id=entitlement_id, user_id=user)
    assert listed(emulator, api) == before - {(app_id, entitlement_id, user)} == truth(emulator)

    shared = max({u for _, _, u in before}, key=lambda u: sum(1 for _, _, v in before if v == u))
    emulator.remove(user_id=shared)
    gone = {row for row in before if row[2] == shared} | {(app_id, entitlement_id, user)}
    assert len(gone) > 2, "the removed user was excluded on several entitlements"
    assert listed(emulator, api) == before - gone == truth(emulator)

    other = next(key for key in by_entitlement if key != (app_id, entitlement_id))
    emulator.remove(app_id=other[0], app_entitlement_id=other[1])
    assert api.get(exclusions_url(emulator, *other), timeout=10).status_code == 404
    gone |= {row for row in before if row[:2] == other}
    assert listed(emulator, api) == before - gone == truth(emulator)

    emulator.remove(app_id=app_id)
    for key in ds.exclusion_entitlements:
        if key[0] == app_id:
            assert api.get(exclusions_url(emulator, *key), timeout=10).status_code == 404
    gone |= {row for row in before if row[0] == app_id}
    assert listed(emulator, api) == before - gone == truth(emulator)

    assert traverse(api, emulator, {}) == feed_before, "the grant feed is history: unchanged"

    emulator.restore(app_id=app_id)
    emulator.restore(app_id=other[0], app_entitlement_id=other[1])
    emulator.restore(user_id=shared)
    emulator.restore(app_id=app_id, app_entitlement_id=entitlement_id, user_id=user)
    assert listed(emulator, api) == before == truth(emulator)


def test_removals_over_http(emulator: Emulator) -> None:
    api = login(emulator)
    control = emulator.url + "/_emulator/"
    app_id, entitlement_id = emulator.dataset.exclusion_entitlements[0]
    entries, _ = traverse_exclusions(api, emulator, app_id, entitlement_id)
    user = entries[0]["user"]["id"]
    ids = {"app_id": app_id, "app_entitlement_id": entitlement_id, "user_id": user}

    assert requests.post(control + "remove", json=ids, timeout=10).json() == {"ok": True}
    after, _ = traverse_exclusions(api, emulator, app_id, entitlement_id)
    assert [e["user"]["id"] for e in after] == [e["user"]["id"] for e in entries[1:]]

    assert requests.post(control + "restore", json=ids, timeout=10).status_code == 200
    again, _ = traverse_exclusions(api, emulator, app_id, entitlement_id)
    assert again == entries

    for bad in ({"user_id": "nobody"}, {"app_entitlement_id": entitlement_id}, {"colour": "x"}):
        response = requests.post(control + "remove", json=bad, timeout=10)
        assert response.status_code == 400, bad
    assert requests.get(control + "remove", timeout=10).status_code == 405
    assert api.post(emulator.url + FEED, json={}, timeout=10).status_code == 200


def catalog(emu: Emulator, api: requests.Session) -> tuple[list[str], set[tuple[str, str]]]:
    """The app ids ``GET /api/v1/apps`` lists, and every (app, entitlement) their entitlements
    endpoints list."""
    apps = [app["id"] for app in entries(list_all(api, f"{emu.url}/api/v1/apps"))]
    found = set()
    for app_id in apps:
        views = entries(list_all(api, f"{emu.url}/api/v1/apps/{app_id}/entitlements"))
        found |= {(app_id, view["appEntitlement"]["id"]) for view in views}
    return apps, found


def test_removed_apps_and_entitlements_leave_the_catalog(emulator: Emulator) -> None:
    api = login(emulator)
    ds = emulator.dataset
    apps, entitlements = catalog(emulator, api)
    assert apps == [app.id for app in ds.catalog_apps]
    automated = set(ds.automated_entitlements)
    gone = ds.exclusion_entitlements[0]
    catalog_only = ds.catalog_apps[-1]  # an app no grant event names
    assert gone in automated
    assert catalog_only.id not in ds.apps

    emulator.remove(app_id=gone[0], app_entitlement_id=gone[1])
    emulator.remove(app_id=catalog_only.id)
    after_apps, after_entitlements = catalog(emulator, api)
    assert after_apps == [app for app in apps if app != catalog_only.id]
    assert after_entitlements == {
        key for key in entitlements if key != gone and key[0] != catalog_only.id
    }
    url = f"{emulator.url}/api/v1/apps/{catalog_only.id}/entitlements"
    assert api.get(url, timeout=10).status_code == 404
    assert set(ds.automated_entitlements) == {
        key for key in automated if key != gone and key[0] != catalog_only.id
    }

    emulator.restore(app_id=gone[0], app_entitlement_id=gone[1])
    emulator.restore(app_id=catalog_only.id)
    assert catalog(emulator, api) == (apps, entitlements)
