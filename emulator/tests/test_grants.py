"""The grants the service holds now: what the feed's history holds, plus the grants older than
the feed, minus what was removed; listed per entitlement
(``GET /api/v1/apps/{app_id}/entitlements/{app_entitlement_id}/users``) and by search
(``POST /api/v1/search/grants``), the two agreeing, in pages, strictly."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from emulator import Dataset, Emulator
from emulator.__main__ import parse_args
from emulator.catalog import app_entitlement_object
from emulator.lifecycle import ADDED, REMOVED
from emulator.tests.conftest import CRED, login, small_dataset
from emulator.tests.test_catalog import entries, list_all
from emulator.timefmt import parse_rfc3339

SEARCH = "/api/v1/search/grants"
Key = tuple[str, str, str]


def users_url(emu: Emulator, app_id: str, entitlement_id: str) -> str:
    return f"{emu.url}/api/v1/apps/{app_id}/entitlements/{entitlement_id}/users"


def search(api: requests.Session, emu: Emulator, body: dict[str, Any]) -> requests.Response:
    return api.post(emu.url + SEARCH, json=body, timeout=30)


def search_all(api: requests.Session, emu: Emulator, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item of a search, following nextPageToken in the body."""
    items: list[dict[str, Any]] = []
    token = ""
    for _ in range(10_000):
        response = search(api, emu, body | {"pageSize": 100, "pageToken": token})
        assert response.status_code == 200, response.text
        page = response.json()
        items += page["list"] or []
        token = page.get("nextPageToken", "")
        if not token:
            return items
    raise AssertionError("the search never ended")


def as_truth(view: dict[str, Any]) -> tuple[Any, ...]:
    """An AppEntitlementUserView as a CurrentGrant's fields (without feed_knows)."""
    end = view.get("appEntitlementUserBindingDeprovisionAt")
    return (
        view["appId"],
        view["appEntitlementId"],
        view["appUserId"],
        parse_rfc3339(view["appEntitlementUserBindingCreatedAt"]),
        parse_rfc3339(end) if end else None,
        tuple((s["appId"], s["id"]) for s in view.get("grantSources") or []),
        view.get("originatingTicketId") or None,
    )


def per_entitlement(api: requests.Session, emu: Emulator) -> list[tuple[Any, ...]]:
    """Every grant by asking each entitlement of the catalog (404s answer none)."""
    found = []
    for app in emu.dataset.catalog_apps:
        for entitlement_id in app.entitlement_ids:
            if api.get(users_url(emu, app.id, entitlement_id), timeout=10).status_code == 404:
                continue
            pages = list_all(api, users_url(emu, app.id, entitlement_id), page_size=100)
            found += [as_truth(view) for view in entries(pages)]
    return found


def per_app(api: requests.Session, emu: Emulator) -> list[tuple[Any, ...]]:
    return [
        as_truth(item["appEntitlementUserBinding"])
        for app in emu.dataset.catalog_apps
        for item in search_all(api, emu, {"appIds": [app.id]})
    ]


def test_what_is_held_now_is_the_feeds_and_the_grants_older_than_it(ds: Dataset) -> None:
    current = ds.current_grants()
    by_key = {g[:3]: g for g in current}
    assert len(by_key) == len(current)
    held = {i[:3]: i for i in ds.grants_at()}
    known = {k for k, g in by_key.items() if g.feed_knows}
    assert known == set(held)
    for key in known:  # the service's start and ticket are the feed's ADDED that opened it
        assert by_key[key].created_at == held[key].granted_at
        assert by_key[key].originating_ticket_id == held[key].granted_ticket_id
    older = [g for g in current if not g.feed_knows]
    assert len(older) > 0.4 * len(current)
    named = {
        (e["feed"]["appId"], e["feed"]["appEntitlementId"], e["feed"]["appUserId"])
        for e in ds.feed_entries()
    }
    assert not named & {g[:3] for g in older}  # the feed never names a grant older than it
    assert all(g.created_at < ds.first_date for g in older)
    assert any(g.originating_ticket_id for g in older)
    assert any(g.originating_ticket_id is None for g in older)
    # made before the feed and removed in it later: a REMOVED with no ADDED, not held now
    types: dict[Key, set[str]] = {}
    for e in ds.feed_entries():
        f = e["feed"]
        types.setdefault((f["appId"], f["appEntitlementId"], f["appUserId"]), set()).add(
            f["eventType"]
        )
    removed_without_added = {
        k for k, seen in types.items() if REMOVED in seen and ADDED not in seen
    }
    assert len(removed_without_added) > 20
    assert not removed_without_added & set(by_key)
    # scheduled ends, grants through a group or role, and direct ones
    assert sum(1 for g in current if g.deprovision_at) > 0.05 * len(current)
    assert sum(1 for g in current if g.sources) > 0.1 * len(current)
    assert all(g.deprovision_at > ds.end_ns for g in current if g.deprovision_at)


def test_the_grants_held_now_follow_events_added_at_run_time(fresh: Emulator) -> None:
    ds = fresh.dataset
    before = {g[:3] for g in ds.current_grants()}
    ds.add_events(count=400)
    after = ds.current_grants()
    assert {g[:3] for g in after if g.feed_knows} == {i[:3] for i in ds.grants_at()}
    assert {g[:3] for g in after} != before


def test_both_ways_list_the_grants_held_now(api, emu: Emulator, ds: Dataset) -> None:
    truth = [tuple(g[:7]) for g in ds.current_grants()]
    assert per_entitlement(api, emu) == truth
    assert per_app(api, emu) == truth


def test_a_search_filters_like_the_service(api, emu: Emulator, ds: Dataset) -> None:
    current = ds.current_grants()
    owners = {(a.app_id, a.app_user_id): a.user_id for a in ds.app_users()}
    app_id = ds.apps[1]
    refs = sorted({g[:2] for g in current if g.app_id == app_id})[:2]
    some = sorted({g.app_user_id for g in current if g.app_id == app_id})[:5]
    person = next(
        owners[g.app_id, g.app_user_id] for g in current if owners[g.app_id, g.app_user_id]
    )
    # where each entitlement sits (emulator/resources.py): most on a resource of their app
    sits_on = {
        (app.id, entitlement_id): app_entitlement_object(ds, p, k)
        for p, app in enumerate(ds.catalog_apps[: len(ds.apps)])
        for k, entitlement_id in enumerate(app.entitlement_ids)
    }
    resource = next(
        sits_on[g[:2]]["appResourceId"] for g in current if sits_on[g[:2]]["appResourceId"]
    )
    resource_type = next(e["appResourceTypeId"] for e in sits_on.values() if e["appResourceTypeId"])

    def found(body: dict[str, Any]) -> list[Key]:
        return [
            (b["appId"], b["appEntitlementId"], b["appUserId"])
            for b in (item["appEntitlementUserBinding"] for item in search_all(api, emu, body))
        ]

    cases: list[tuple[dict[str, Any], Any]] = [
        ({"entitlementRefs": [{"appId": a, "id": e} for a, e in refs]}, lambda g: g[:2] in refs),
        ({"appUserIds": some}, lambda g: g.app_user_id in some),
        ({"userId": person}, lambda g: owners[g.app_id, g.app_user_id] == person),
        (
            {"appIds": [app_id], "appUserIds": some},
            lambda g: g.app_id == app_id and g.app_user_id in some,
        ),
        ({"appIds": ["2nosuchapp"]}, lambda g: False),
        ({"userId": "2nosuchuser"}, lambda g: False),
        ({}, lambda g: True),
        ({"resourceIds": ["r-1"]}, lambda g: False),  # no such resource
        ({"resourceIds": [resource]}, lambda g: sits_on[g[:2]]["appResourceId"] == resource),
        (
            {"resourceTypeIds": [resource_type]},
            lambda g: sits_on[g[:2]]["appResourceTypeId"] == resource_type,
        ),
    ]
    for body, keep in cases:
        expected = [g[:3] for g in current if keep(g)]
        assert found(body) == expected, body
    assert len(found({"userId": person})) > 1  # one person, accounts in several apps
    assert found({"resourceIds": [resource]})  # the grants of the entitlements on a resource
    # every item carries its entitlement as the catalog lists it
    item = search_all(api, emu, {"entitlementRefs": [{"appId": refs[0][0], "id": refs[0][1]}]})[0]
    catalog = entries(list_all(api, f"{emu.url}/api/v1/apps/{app_id}/entitlements", page_size=100))
    assert item["entitlement"] in catalog


def test_a_search_expands_the_apps_it_names(api, emu: Emulator, ds: Dataset) -> None:
    page = search(
        api, emu, {"appIds": ds.apps[:2], "pageSize": 100, "expandMask": {"paths": ["app_id"]}}
    ).json()
    assert [obj["id"] for obj in page["expanded"]] == [ds.apps[0]]
    assert page["expanded"][0]["@type"] == "type.googleapis.com/c1.api.app.v1.App"
    assert {item["entitlement"]["appPath"] for item in page["list"]} == {"$.expanded[0]"}
    everything = search(api, emu, {"appIds": ds.apps[:1], "expandMask": {"paths": ["*"]}}).json()
    assert everything["expanded"][0]["id"] == ds.apps[0]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"appIds": "x"}, "appIds must be an array"),
        ({"appIds": [1]}, "appIds[0] must be a string"),
        ({"userIds": ["x"]}, 'unknown field "userIds" in request'),
        ({"entitlementRefs": [{"id": "x"}]}, "entitlementRefs[0] needs appId and id"),
        (
            {"entitlementRefs": [{"appId": "a", "id": "x", "slug": "y"}]},
            'unknown field "slug" in entitlementRefs[0]',
        ),
        ({"pageSize": "many"}, "pageSize must be an int32"),
        ({"pageToken": 5}, "pageToken must be a string"),
        ({"userId": ["x"]}, "userId must be a string"),
        (
            {"purpose": ["APP_ENTITLEMENT_PURPOSE_VALUE_NONE"]},
            'purpose: unknown enum value "APP_ENTITLEMENT_PURPOSE_VALUE_NONE"',
        ),
        ({"expandMask": {"paths": ["app_user_id"]}}, 'unknown expandMask path "app_user_id"'),
        ({"app_ids": ["x"], "appIds": ["y"]}, 'field "appIds" given twice in request'),
        ({"pageToken": "garbage"}, "invalid page token"),
        ([], "request must be an object"),
    ],
)
def test_a_search_refuses_what_the_service_refuses(
    api, emu: Emulator, body: Any, message: str
) -> None:
    response = search(api, emu, body)
    assert (response.status_code, response.json()) == (
        400,
        {"code": 3, "message": message, "details": []},
    )


def test_a_search_reads_either_spelling_and_binds_its_token_to_its_filters(
    api, emu: Emulator, ds: Dataset
) -> None:
    app_id = ds.apps[0]
    first = search(api, emu, {"app_ids": [app_id], "page_size": "10"}).json()
    assert len(first["list"]) == 10
    token = first["nextPageToken"]
    same = search(api, emu, {"appIds": [app_id], "pageSize": 50, "pageToken": token}).json()
    assert same["list"][0] != first["list"][0]
    other = search(api, emu, {"appIds": [ds.apps[1]], "pageToken": token})
    assert (other.status_code, other.json()["message"]) == (
        400,
        "page token does not match request",
    )
    not_json = api.post(emu.url + SEARCH, data=b"{", timeout=10)
    assert (not_json.status_code, not_json.json()["message"]) == (
        400,
        "request body is not valid JSON",
    )
    assert api.get(emu.url + SEARCH, timeout=10).status_code == 405
    assert requests.post(emu.url + SEARCH, json={}, timeout=10).status_code == 401


def test_an_entitlements_grants_page_and_are_strict(api, emu: Emulator, ds: Dataset) -> None:
    counts: dict[tuple[str, str], int] = {}
    for g in ds.current_grants():
        counts[g[:2]] = counts.get(g[:2], 0) + 1
    app_id, entitlement_id = max(counts, key=counts.__getitem__)
    url = users_url(emu, app_id, entitlement_id)
    held = counts[app_id, entitlement_id]
    assert held > 25
    for size, expected in ((1, 10), (0, 25), (1000, min(held, 100))):
        assert len(api.get(url, params={"page_size": size}, timeout=10).json()["list"]) == expected
    token = api.get(url, timeout=10).json()["nextPageToken"]
    for params, status, message in (
        ({"page_token": token[:-3]}, 400, "invalid page token"),
        ({"expand": "*"}, 400, 'unknown query parameter "expand"'),
    ):
        response = api.get(url, params=params, timeout=10)
        assert (response.status_code, response.json()["message"]) == (status, message)
    other = next(e for a, e in ds.entitlements if a == app_id and e != entitlement_id)
    elsewhere = users_url(emu, app_id, other)
    response = api.get(elsewhere, params={"page_token": token}, timeout=10)
    assert response.json()["message"] == "page token does not match request"
    assert api.get(users_url(emu, app_id, "2nosuchentitlement"), timeout=10).status_code == 404
    assert api.get(users_url(emu, "2nosuchapp", entitlement_id), timeout=10).status_code == 404
    # an entitlement of the catalog's other apps: nobody holds it
    quiet = ds.catalog_apps[len(ds.apps) + 1]
    page = api.get(users_url(emu, quiet.id, quiet.entitlement_ids[0]), timeout=10).json()
    assert page == {"list": [], "expanded": [], "nextPageToken": ""}
    assert api.post(url, json={}, timeout=10).status_code == 405


@pytest.mark.parametrize("emit", [None, True, False], ids=["default", "emitted", "omitted"])
def test_unset_grant_fields_are_sent_empty_or_omitted(emit: bool | None) -> None:
    with Emulator(small_dataset(events=200), credential=CRED, emit_unpopulated=emit) as emu:
        api = login(emu)
        ds = emu.dataset
        plain = next(
            g
            for g in ds.current_grants()
            if not (g.sources or g.deprovision_at or g.originating_ticket_id)
        )
        page = api.get(
            users_url(emu, plain.app_id, plain.app_entitlement_id),
            params={"page_size": 100},
            timeout=10,
        ).json()
        view = next(v for v in page["list"] if v["appUserId"] == plain.app_user_id)
        item = search_all(
            api, emu, {"entitlementRefs": [{"appId": plain.app_id, "id": plain.app_entitlement_id}]}
        )[0]
    unset = ("appEntitlementUserBindingDeprovisionAt", "grantSources", "originatingTicketId")
    if emit is False:
        assert not set(unset) & set(view)
        assert "expanded" not in page
        assert "appPath" not in item["entitlement"]
        assert "alias" not in item["entitlement"]["appEntitlement"]
    else:
        assert [view[k] for k in unset] == [None, [], ""]
        assert page["expanded"] == []
        assert item["entitlement"]["appPath"] == ""
        assert item["entitlement"]["appEntitlement"]["alias"] == ""


def test_removed_accounts_entitlements_and_apps_hold_nothing_now(fresh: Emulator) -> None:
    """The service stops listing what was removed; the feed, being history, still holds it."""
    api = login(fresh)
    ds = fresh.dataset
    current = ds.current_grants()
    known = next(g for g in current if g.feed_knows)
    fresh.remove(app_id=known.app_id, app_user_id=known.app_user_id)
    entitlement = next(g[:2] for g in current if g.app_id != known.app_id)
    fresh.remove(app_id=entitlement[0], app_entitlement_id=entitlement[1])
    app_id = next(a for a in ds.apps if a not in (known.app_id, entitlement[0]))
    fresh.remove(app_id=app_id)
    gone = [
        g
        for g in current
        if (g.app_id, g.app_user_id) == (known.app_id, known.app_user_id)
        or g[:2] == entitlement
        or g.app_id == app_id
    ]
    assert len(gone) > 2
    expected = [tuple(g[:7]) for g in current if g not in gone]
    assert [tuple(g[:7]) for g in ds.current_grants()] == expected
    assert per_entitlement(api, fresh) == expected
    assert per_app(api, fresh) == expected
    assert known[:3] in {i[:3] for i in ds.grants_at()}  # the feed still holds it


def test_how_many_grants_are_older_than_the_feed_is_a_setting() -> None:
    """``grants_before_feed`` (``--grants-before-feed``) grants of users' accounts, plus
    those of the accounts nobody owns, whatever the setting."""
    assert parse_args(["--grants-before-feed", "7"]).grants_before_feed == 7
    assert parse_args([]).grants_before_feed is None

    def older(ds: Dataset) -> tuple[int, int]:
        owners = {(a.app_id, a.app_user_id): a.user_id for a in ds.app_users()}
        grants = [g for g in ds.current_grants() if not g.feed_knows]
        owned = sum(1 for g in grants if owners[g.app_id, g.app_user_id])
        return owned, len(grants) - owned

    none, some = small_dataset(grants_before_feed=0), small_dataset(grants_before_feed=40)
    assert older(none)[0] == 0
    assert older(some) == (40, older(none)[1])
    assert older(none)[1] > 0
    assert older(small_dataset())[0] == 3000 // 8  # by default, one for every eight events
