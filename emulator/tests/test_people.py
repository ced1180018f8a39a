"""The people behind the accounts: every app's accounts with their owners
(``GET /api/v1/apps/{app_id}/app_users``) and the directory (``GET /api/v1/users``), in pages,
strict, with unset fields empty or omitted, and accounts and users that disappear between runs."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from emulator import Dataset, Emulator
from emulator.tests.conftest import CRED, login, small_dataset
from emulator.tests.test_catalog import entries, list_all

INACTIVE = {"DISABLED", "DELETED"}


def app_users_url(emu: Emulator, app_id: str) -> str:
    return f"{emu.url}/api/v1/apps/{app_id}/app_users"


def listed_accounts(api: requests.Session, emu: Emulator, app_id: str) -> list[dict[str, Any]]:
    return [
        view["appUser"]
        for view in entries(list_all(api, app_users_url(emu, app_id), page_size=100))
    ]


def test_every_app_lists_its_accounts_with_their_owners(api, emu: Emulator, ds: Dataset) -> None:
    """The feed's apps list one account per user (those the feed names among them) and a few
    nobody owns; the catalog's other apps list none; the truth says the same."""
    truth = ds.app_users()
    got = []
    for app in ds.catalog_apps:
        got += [
            (
                a["appId"],
                a["id"],
                a.get("identityUserId") or None,
                a["appUserType"],
                a["status"]["status"],
            )
            for a in listed_accounts(api, emu, app.id)
        ]
    assert got == [tuple(account) for account in truth]
    assert len(got) > len(ds.apps) * len(ds.user_ids)
    unowned = [row for row in got if row[2] is None]
    assert len(unowned) >= 2 * len(ds.apps)
    assert {row[3] for row in unowned} == {
        "APP_USER_TYPE_SERVICE_ACCOUNT",
        "APP_USER_TYPE_SYSTEM_ACCOUNT",
    }
    assert {row[2] for row in got if row[2]} == set(ds.user_ids)
    accounts = {(row[0], row[1]) for row in got}
    named = {(e["feed"]["appId"], e["feed"]["appUserId"]) for e in ds.feed_entries()}
    assert named <= accounts
    # an account's own status varies on its own
    assert {"STATUS_ENABLED", "STATUS_DISABLED", "STATUS_DELETED"} <= {row[4] for row in got}


def test_a_users_account_carries_the_name_the_feed_expands(api, emu: Emulator, ds: Dataset) -> None:
    account = listed_accounts(api, emu, ds.apps[1])[7]
    a, u = ds.users.app_user(account["id"]) or (-1, -1)
    assert ds.feed.expanded_app_user(a, u) | {"@type": None} == {
        "@type": None,
        "id": account["id"],
        "appId": account["appId"],
        "identityUserId": account["identityUserId"],
        "email": account["email"],
        "displayName": account["displayName"],
    }


def test_the_directory_lists_every_user_with_both_statuses(api, emu: Emulator, ds: Dataset) -> None:
    views = entries(list_all(api, f"{emu.url}/api/v1/users", page_size=100))
    assert [v["userId"] for v in views] == [v["user"]["id"] for v in views]
    assert [
        (
            v["userId"],
            v["user"].get("displayName"),
            v["user"].get("status", "UNKNOWN"),
            v["user"].get("directoryStatus", "UNKNOWN"),
        )
        for v in views
    ] == [(u.user_id, u.display_name, u.status, u.directory_status) for u in ds.directory_users()]
    excluded = {row["user_id"] for row in ds.excluded_users()}
    assert excluded < {v["userId"] for v in views}
    assert len(views) >= 2 * len(excluded)
    # left in one and not the other: disabled in the directory, enabled in the service, ...
    pairs = {
        (v["user"].get("status", "UNKNOWN"), v["user"].get("directoryStatus", "UNKNOWN"))
        for v in views
    }
    assert ("ENABLED", "DISABLED") in pairs
    assert ("DELETED", "ENABLED") in pairs


def test_the_tenant_has_inactive_owners_holding_access(ds: Dataset) -> None:
    """What an auditor asks about has answers: grants held through accounts of people
    disabled or deleted in the directory, or in the service, and through accounts nobody owns."""
    people = {user.user_id: user for user in ds.directory_users()}
    owners = {(a.app_id, a.app_user_id): a.user_id for a in ds.app_users()}
    held = [owners[(g.app_id, g.app_user_id)] for g in ds.current_grants()]
    assert sum(1 for owner in held if owner is None) > 10
    assert sum(1 for o in held if o and people[o].directory_status in INACTIVE) > 10
    assert sum(1 for o in held if o and people[o].status in INACTIVE) > 10


@pytest.mark.parametrize("emit", [None, True, False], ids=["default", "emitted", "omitted"])
def test_unset_fields_are_sent_empty_or_omitted(emit: bool | None) -> None:
    """By default, like the catalog, unset fields are sent empty; omitted when told."""
    with Emulator(small_dataset(events=200), credential=CRED, emit_unpopulated=emit) as emu:
        api = login(emu)
        ds = emu.dataset
        page = api.get(app_users_url(emu, ds.apps[0]), params={"page_size": 100}, timeout=10).json()
        unowned_view = next(
            v
            for v in entries(list_all(api, app_users_url(emu, ds.apps[0]), page_size=100))
            if v["appUser"]["appUserType"] != "APP_USER_TYPE_USER"
        )
        users = api.get(f"{emu.url}/api/v1/users", params={"page_size": 10}, timeout=10).json()
        empty_app = ds.catalog_apps[len(ds.apps)].id  # the catalog's apps without accounts
        empty = api.get(app_users_url(emu, empty_app), timeout=10).json()
    account = unowned_view["appUser"]
    if emit is False:
        assert "identityUserId" not in account
        assert "deletedAt" not in account
        assert "appPath" not in unowned_view
        assert "expanded" not in page
        assert "nhiDetail" not in account
        assert "isExternal" not in account
        assert set(users["list"][0]) == {"user", "userId"}
        assert empty == {"list": None}
    else:
        assert account["identityUserId"] == ""
        assert account["nhiDetail"] == ""
        assert unowned_view["appPath"] == ""
        assert page["expanded"] == []
        assert account["status"]["details"] == ""
        assert account["isExternal"] is False
        assert users["list"][0]["rolesPath"] == ""
        assert users["list"][0]["objectPermissions"] is None
        assert all("deletedAt" in v["user"] and "managerIds" in v["user"] for v in users["list"])
        assert empty == {"list": [], "expanded": [], "nextPageToken": ""}


def test_lists_page_and_are_strict(api, emu: Emulator, ds: Dataset) -> None:
    url = app_users_url(emu, ds.apps[0])
    for size, expected in ((1, 10), (0, 25), (1000, 100)):
        page = api.get(url, params={"page_size": size}, timeout=10).json()
        assert len(page["list"]) == expected, size
    token = api.get(url, timeout=10).json()["nextPageToken"]
    for bad, message in (
        ({"page_token": token[:-2]}, "invalid page token"),
        ({"page_token": "not-a-token"}, "invalid page token"),
        ({"filter": "x"}, 'unknown query parameter "filter"'),
        ({"page_size": "ten"}, "page_size must be an integer"),
    ):
        response = api.get(url, params=bad, timeout=10)
        assert (response.status_code, response.json()["message"]) == (400, message), bad
    # a token names its own list: another app's, or the directory's, is refused
    for other in (app_users_url(emu, ds.apps[1]), f"{emu.url}/api/v1/users"):
        response = api.get(other, params={"page_token": token}, timeout=10)
        assert (response.status_code, response.json()["message"]) == (
            400,
            "page token does not match request",
        )
    assert api.get(app_users_url(emu, "2nosuchapp"), timeout=10).status_code == 404
    assert api.post(url, json={}, timeout=10).status_code == 405
    assert api.post(f"{emu.url}/api/v1/users", json={}, timeout=10).status_code == 405
    assert requests.get(url, timeout=10).status_code == 401


def test_accounts_and_users_disappear_between_runs_and_come_back(fresh: Emulator) -> None:
    api = login(fresh)
    ds = fresh.dataset
    app_id = ds.apps[2]
    before = listed_accounts(api, fresh, app_id)
    holding = {g.app_user_id for g in ds.current_grants() if g.app_id == app_id}
    gone = next(a for a in before if a["id"] in holding and not a.get("identityUserId"))
    owned = next(a for a in before if a["id"] in holding and a.get("identityUserId"))
    fresh.remove(app_id=app_id, app_user_id=gone["id"])
    # over HTTP too, as the demo and benchmarks drive a process
    control = requests.post(
        f"{fresh.url}/_emulator/remove",
        json={"app_id": app_id, "app_user_id": owned["id"]},
        timeout=10,
    )
    assert control.status_code == 200, control.text
    after = listed_accounts(api, fresh, app_id)
    assert [a["id"] for a in after] == [a["id"] for a in before if a not in (gone, owned)]
    assert not {gone["id"], owned["id"]} & {g.app_user_id for g in ds.current_grants()}
    assert {(a.app_id, a.app_user_id) for a in ds.app_users()} >= {(app_id, a["id"]) for a in after}

    # a user removed leaves the directory (the accounts it owned still name it), and so does
    # a person of the directory who has no account
    directory_before = [u.user_id for u in ds.directory_users()]
    nobody = directory_before[-1]
    assert nobody not in ds.user_ids
    fresh.remove(user_id=nobody)
    owner = owned["identityUserId"]
    other = next(a for a in before if a.get("identityUserId") and a["identityUserId"] != owner)
    fresh.remove(user_id=other["identityUserId"])
    users = [
        v["userId"] for v in entries(list_all(api, f"{fresh.url}/api/v1/users", page_size=100))
    ]
    assert other["identityUserId"] not in users
    assert nobody not in users
    assert owner in users
    assert users == [u.user_id for u in ds.directory_users()]
    assert other in listed_accounts(api, fresh, app_id)

    fresh.restore(app_id=app_id, app_user_id=gone["id"])
    fresh.restore(app_id=app_id, app_user_id=owned["id"])
    fresh.restore(user_id=other["identityUserId"])
    fresh.restore(user_id=nobody)
    assert listed_accounts(api, fresh, app_id) == before
    assert holding == {g.app_user_id for g in ds.current_grants() if g.app_id == app_id}
    assert [u.user_id for u in ds.directory_users()] == directory_before

    with pytest.raises(ValueError, match="no app user"):
        fresh.remove(app_id=ds.apps[0], app_user_id=gone["id"])  # another app's account
    bad = requests.post(
        f"{fresh.url}/_emulator/remove",
        json={"app_id": app_id, "app_entitlement_id": "x", "app_user_id": gone["id"]},
        timeout=10,
    )
    assert bad.status_code == 400


def test_a_removed_app_has_no_accounts_to_list(fresh: Emulator) -> None:
    api = login(fresh)
    app_id = fresh.dataset.apps[0]
    fresh.remove(app_id=app_id)
    assert api.get(app_users_url(fresh, app_id), timeout=10).status_code == 404
    assert all(a.app_id != app_id for a in fresh.dataset.app_users())
