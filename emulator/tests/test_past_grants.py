"""The grants that ended (``POST /api/v1/search/past-grants``): every period the feed closed
and those over before it began, never two overlapping periods of one grant, listed in pages by
any of the search's filters, with ``history.id`` from the newest release only, strictly."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

import pytest
import requests

from emulator import Emulator
from emulator.past_grants import PastGrant
from emulator.tests.conftest import CRED, login, small_dataset
from emulator.timefmt import parse_rfc3339

PAST = "/api/v1/search/past-grants"


def search_all(api: requests.Session, emu: Emulator, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every view a search finds, in pages of 50."""
    views: list[dict[str, Any]] = []
    token = ""
    for _ in range(10_000):
        response = api.post(emu.url + PAST, json=body | {"pageSize": 50, "pageToken": token})
        assert response.status_code == 200, response.text
        page = response.json()
        views += page["list"] or []
        token = page["nextPageToken"]
        if not token:
            return views
    raise AssertionError("the search never ended")


def as_truth(view: dict[str, Any]) -> tuple[Any, ...]:
    h = view["history"]
    return (
        h.get("id"),
        h["appId"],
        h["appEntitlementId"],
        h["appUserId"],
        parse_rfc3339(h["grantedAt"]),
        parse_rfc3339(h["revokedAt"]),
    )


def truth(ended: list[PastGrant]) -> list[tuple[Any, ...]]:
    return sorted(p[:6] for p in ended)


@pytest.fixture(scope="module")
def tenant() -> Any:
    with Emulator(small_dataset(), credential=CRED) as emulator:
        yield emulator


def test_every_ended_period_is_listed_once_whether_searched_whole_or_app_by_app(
    tenant: Emulator,
) -> None:
    api = login(tenant)
    ds = tenant.dataset
    ended = ds.past_grants()
    whole = [as_truth(v) for v in search_all(api, tenant, {})]
    assert sorted(whole) == truth(ended)
    by_app = [
        as_truth(v)
        for app in ds.catalog.feed_apps
        for v in search_all(api, tenant, {"appIds": [app.id]})
    ]
    assert sorted(by_app) == sorted(whole)
    # What there is to read: periods the feed closed (some held since before it began), and
    # periods over before the feed, some of them earlier periods of a grant the feed names.
    first = ds.feed.first_date
    assert {p.feed_knows for p in ended} == {True, False}
    assert any(p.feed_knows and p.granted_at < first for p in ended)
    assert all(p.revoked_at < first for p in ended if not p.feed_knows)
    periods: dict[tuple[str, str, str], list[PastGrant]] = defaultdict(list)
    for p in ended:
        periods[(p.app_id, p.app_entitlement_id, p.app_user_id)].append(p)
    assert any({p.feed_knows for p in listed} == {True, False} for listed in periods.values())


def test_a_grants_periods_never_overlap_each_other_or_the_grant_held_now(tenant: Emulator) -> None:
    ds = tenant.dataset
    periods: dict[tuple[str, str, str], list[tuple[int, int]]] = defaultdict(list)
    for p in ds.past_grants():
        assert p.granted_at < p.revoked_at
        periods[(p.app_id, p.app_entitlement_id, p.app_user_id)].append(
            (p.granted_at, p.revoked_at)
        )
    held = {
        (g.app_id, g.app_entitlement_id, g.app_user_id): g.created_at for g in ds.current_grants()
    }
    for grant, listed in periods.items():
        listed.sort()
        assert all(a[1] <= b[0] for a, b in pairwise(listed)), grant
        assert grant not in held or listed[-1][1] <= held[grant], grant


def test_the_filters_find_an_entitlements_and_an_accounts_periods(tenant: Emulator) -> None:
    api = login(tenant)
    some = tenant.dataset.past_grants()[7]
    entitlement = {"appId": some.app_id, "id": some.app_entitlement_id}
    account = {"appId": some.app_id, "id": some.app_user_id}
    for body, wanted in (
        ({"appEntitlementRefs": [entitlement]}, lambda p: p[1:3] == some[1:3]),
        ({"appUserRefs": [account]}, lambda p: (p[1], p[3]) == (some[1], some[3])),
        (
            {"appEntitlementRefs": [entitlement], "appUserRefs": [account]},
            lambda p: p[1:4] == some[1:4],
        ),
    ):
        found = [as_truth(v) for v in search_all(api, tenant, body)]
        expected = [p for p in truth(tenant.dataset.past_grants()) if wanted(p)]
        assert sorted(found) == expected
        assert some[:6] in found
    # appIds and another filter: the periods both find (another app's: none)
    other = next(p.app_id for p in tenant.dataset.past_grants() if p.app_id != some.app_id)
    both = {"appIds": [some.app_id], "appUserRefs": [account]}
    found = [as_truth(v) for v in search_all(api, tenant, both)]
    assert sorted(found) == [
        p for p in truth(tenant.dataset.past_grants()) if (p[1], p[3]) == (some[1], some[3])
    ]
    assert search_all(api, tenant, {"appIds": [other], "appEntitlementRefs": [entitlement]}) == []


def test_a_search_of_one_app_pages_through_its_history_as_kept(tenant: Emulator) -> None:
    """Each page of a whole app's search (the tap's first sync) is a slice of that app's
    periods as kept, in the server's order: not every period scanned and sorted again for
    each page (200,000 periods: benchmarks/past_grants_benchmark.py)."""
    past = tenant.dataset.past
    every = tenant.dataset.past_grants()
    app = every[0].app_id
    assert past.of_apps({app}) is past.of_apps({app})
    assert past.of_apps({app}) == [p for p in every if p.app_id == app]
    # paged, one app or several: the server's order (by history id), each period once
    api = login(tenant)
    apps = sorted({p.app_id for p in every})[:2]
    for asked in ([app], apps):
        found = [v["history"]["id"] for v in search_all(api, tenant, {"appIds": asked})]
        assert found == [p.id for p in every if p.app_id in asked]


def test_a_grant_the_feed_closes_while_a_run_reads_is_listed_from_then_on() -> None:
    with Emulator(small_dataset(events=300), credential=CRED) as emu:
        api = login(emu)
        before = len(search_all(api, emu, {}))
        emu.add_events(count=400)
        after = [as_truth(v) for v in search_all(api, emu, {})]
        assert len(after) > before
        assert sorted(after) == truth(emu.dataset.past_grants())


def test_an_older_release_sends_no_history_id() -> None:
    with Emulator(small_dataset(events=300), credential=CRED, shapes="older") as emu:
        views = search_all(login(emu), emu, {})
    assert views
    assert all("id" not in v["history"] and v["history"]["grantedAt"] for v in views)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"appIds": "x"}, "appIds must be an array"),
        ({"appEntitlementRefs": [{"appId": "a"}]}, "appEntitlementRefs[0] needs appId and id"),
        ({"since": "2025-01-01T00:00:00Z"}, 'unknown field "since"'),
        ({"expandMask": {"paths": ["*"]}}, "expandMask"),
    ],
)
def test_a_search_the_service_refuses_is_answered_400(
    tenant: Emulator, body: dict[str, Any], message: str
) -> None:
    response = login(tenant).post(tenant.url + PAST, json=body)
    assert response.status_code == 400
    assert message in response.json()["message"]


def test_a_page_token_is_good_only_for_the_search_that_made_it(tenant: Emulator) -> None:
    api = login(tenant)
    first = api.post(tenant.url + PAST, json={"pageSize": 5}).json()
    assert first["nextPageToken"]
    app = tenant.dataset.catalog.feed_apps[0].id
    other = api.post(tenant.url + PAST, json={"appIds": [app], "pageToken": first["nextPageToken"]})
    assert other.status_code == 400
    assert api.get(tenant.url + PAST).status_code == 405
