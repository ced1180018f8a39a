"""The automation exclusions list: ground truth, empty pages, shared users, 404s, page-token
binding, and a gateway that ignores the page token."""

from __future__ import annotations

from collections import Counter
from typing import Any

from emulator import Dataset, Emulator
from emulator.tests.conftest import (
    CRED,
    exclusions_url,
    login,
)

# ----- automation exclusions -------------------------------------------------------------


def traverse_exclusions(api, emu: Emulator, app_id: str, entitlement_id: str, **params: Any):
    entries, pages, token = [], [], None
    while True:
        query = params | ({"page_token": token} if token else {})
        response = api.get(exclusions_url(emu, app_id, entitlement_id), params=query, timeout=10)
        assert response.status_code == 200, response.text
        page = response.json()
        pages.append(page)
        entries.extend(page["list"] or [])
        token = page.get("nextPageToken")
        if not token:
            return entries, pages


def test_exclusions_equal_ground_truth(api, emu: Emulator, ds: Dataset) -> None:
    sizes = []
    for app_id, entitlement_id in ds.exclusion_entitlements:
        entries, pages = traverse_exclusions(api, emu, app_id, entitlement_id)
        assert entries == ds.exclusion_entries(app_id, entitlement_id)
        assert "nextPageToken" not in pages[-1]
        assert all(len(p["list"]) == 25 for p in pages[:-1])
        sizes.append(len(entries))
    assert 0 in sizes
    assert max(sizes) > 100
    big = ds.exclusion_entitlements[sizes.index(max(sizes))]
    entries, pages = traverse_exclusions(api, emu, *big, page_size=100)
    assert entries == ds.exclusion_entries(*big)
    assert len(pages) > 1
    _, small_pages = traverse_exclusions(api, emu, *big, page_size=5)
    assert len(small_pages[0]["list"]) == 10


def test_empty_exclusions_page(api, emu: Emulator, ds: Dataset) -> None:
    empty = next(k for k in ds.exclusion_entitlements if not ds.exclusion_entries(*k))
    response = api.get(exclusions_url(emu, *empty), timeout=10)
    assert response.json() == {"list": None}


def test_users_are_shared_and_varied(ds: Dataset) -> None:
    seen: Counter[str] = Counter()
    users = {}
    for key in ds.exclusion_entitlements:
        for entry in ds.exclusion_entries(*key):
            seen[entry["user"]["id"]] += 1
            users[entry["user"]["id"]] = entry["user"]
            assert ds.user_of_app_user(entry["appUserId"]) == entry["user"]["id"]
    assert max(seen.values()) >= 2
    records = list(users.values())
    assert {"SUSPENDED", "ENABLED"} <= {u["status"] for u in records}
    assert "USER_TYPE_ROBOT" in {u["type"] for u in records}
    assert any("deletedAt" in u for u in records)
    assert any("deletedAt" not in u for u in records)
    assert any("delegatedUserId" in u for u in records)
    assert any("profile" in u and isinstance(u["profile"].get("address"), dict) for u in records)
    assert all(None not in u.values() for u in records)
    assert ds.user(records[0]["id"]) == records[0]


def test_exclusions_not_found_and_token_binding(api, emu: Emulator, ds: Dataset) -> None:
    app0 = ds.apps[0]
    entitlement_of_app0 = [e for a, e in ds.entitlements if a == app0][1]
    for app_id, entitlement_id in [
        (app0, "nope"),
        ("nope", entitlement_of_app0),
        (ds.apps[2], entitlement_of_app0),
    ]:
        response = api.get(exclusions_url(emu, app_id, entitlement_id), timeout=10)
        assert response.status_code == 404
        assert response.json()["code"] == 5
    multi = [k for k in ds.exclusion_entitlements if len(ds.exclusion_entries(*k)) > 25]
    token = api.get(exclusions_url(emu, *multi[0]), timeout=10).json()["nextPageToken"]
    replay = api.get(exclusions_url(emu, *multi[1]), params={"page_token": token}, timeout=10)
    assert replay.status_code == 400
    bad = api.get(exclusions_url(emu, *multi[0]), params={"limit": 3}, timeout=10)
    assert bad.status_code == 400
    assert api.post(exclusions_url(emu, *multi[0]), timeout=10).status_code == 405


def test_exclusions_can_ignore_the_page_token_like_a_lenient_gateway(ds: Dataset) -> None:
    with Emulator(ds, credential=CRED, exclusions_ignore_page_token=True) as lenient:
        session = login(lenient)
        app_id, entitlement_id = next(
            (a, e) for a, e in ds.exclusion_entitlements if len(ds.exclusion_entries(a, e)) > 25
        )
        url = exclusions_url(lenient, app_id, entitlement_id)
        first = session.get(url, timeout=10).json()
        again = session.get(
            url, params={"page_token": first["nextPageToken"], "page_size": 100}, timeout=10
        ).json()
        assert again == first
        assert len(first["list"]) == 25
        lenient.control("POST", "/_emulator/settings", b'{"exclusions_ignore_page_token": false}')
        second = session.get(url, params={"page_token": first["nextPageToken"]}, timeout=10).json()
        assert second["list"] != first["list"]


def test_the_command_line_can_ignore_the_exclusions_page_token() -> None:
    from emulator.__main__ import parse_args

    assert parse_args(["--exclusions-ignore-page-token"]).exclusions_ignore_page_token is True
    assert parse_args([]).exclusions_ignore_page_token is False
