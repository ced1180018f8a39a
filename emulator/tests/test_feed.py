"""The grant feed search: paging, filters, bounds, page tokens, the expand mask and what the
entries look like, each traversal compared with the dataset's ground truth."""

from __future__ import annotations

import tracemalloc
from collections import Counter
from typing import Any

import pytest

from emulator import Dataset, Emulator
from emulator.feed import GrantFeed
from emulator.tests.conftest import (
    END,
    FEED,
    feed,
    traverse,
)
from emulator.timefmt import parse_rfc3339

# ----- grant feed ------------------------------------------------------------------------


@pytest.mark.parametrize(("asked", "got"), [(5, 10), (500, 100), (None, 25), (0, 25), (40, 40)])
def test_feed_page_size_is_clamped(api, emu: Emulator, asked: int | None, got: int) -> None:
    body = {} if asked is None else {"pageSize": asked}
    page = feed(api, emu, body).json()
    assert len(page["list"]) == got
    assert page["nextPageToken"]


def test_full_traversal_equals_ground_truth(api, emu: Emulator, ds: Dataset) -> None:
    entries = traverse(api, emu, {})
    assert entries == ds.feed_entries()
    assert len(entries) == ds.total


def test_page_size_may_change_between_pages(api, emu: Emulator, ds: Dataset) -> None:
    first = feed(api, emu, {"pageSize": 10}).json()
    second = feed(api, emu, {"pageSize": 30, "pageToken": first["nextPageToken"]}).json()
    assert first["list"] + second["list"] == ds.feed_entries()[:40]


def test_filters_equal_ground_truth(api, emu: Emulator, ds: Dataset) -> None:
    shared_app, shared_entitlement = ds.entitlements[0]
    app1 = ds.apps[1]
    some = ds.feed_entries()[:7]
    app_users = [(e["feed"]["appId"], e["feed"]["appUserId"]) for e in some[:3]]
    users = sorted({ds.user_of_app_user(e["feed"]["appUserId"]) for e in some[3:]})
    cases = [
        ({"appRefs": [{"id": app1}]}, {"app_ids": [app1]}),
        (
            # The same entitlement id exists in apps 0 and 1: only app 1's events match.
            {"appEntitlementRefs": [{"appId": app1, "id": shared_entitlement}]},
            {"app_entitlement_refs": [(app1, shared_entitlement)]},
        ),
        (
            {"appUserRefs": [{"appId": a, "id": u} for a, u in app_users]},
            {"app_user_refs": app_users},
        ),
        ({"userRefs": [{"id": u} for u in users]}, {"user_ids": users}),
        (
            {"after": "2025-04-01T00:00:00Z", "before": "2025-04-20T12:00:00.5Z"},
            {"after": "2025-04-01T00:00:00Z", "before": "2025-04-20T12:00:00.5Z"},
        ),
        (
            {"after": "2025-03-01T00:00:00+02:00", "appRefs": [{"id": app1}, {"id": shared_app}]},
            {"after": "2025-02-28T22:00:00Z", "app_ids": [app1, shared_app]},
        ),
        ({"appRefs": None, "userRefs": []}, {}),
    ]
    for body, truth in cases:
        expected = ds.feed_entries(**truth)
        assert traverse(api, emu, body) == expected, body
        assert expected or body == {}, f"filter {body} should match something"
    app1_first = next(e for a, e in ds.entitlements if a == app1)
    assert app1_first == shared_entitlement  # ids are unique only within an app
    only_app1 = ds.feed_entries(app_entitlement_refs=[(app1, shared_entitlement)])
    assert {e["feed"]["appId"] for e in only_app1} == {app1}


def test_after_bound_is_inclusive_and_before_exclusive(api, emu: Emulator, ds: Dataset) -> None:
    instant = ds.feed_entries()[100]["feed"]["date"]
    assert instant in [e["feed"]["date"] for e in traverse(api, emu, {"after": instant})]
    assert instant not in [e["feed"]["date"] for e in traverse(api, emu, {"before": instant})]


def test_page_token_is_bound_to_the_request(api, emu: Emulator, ds: Dataset) -> None:
    body = {"appRefs": [{"id": ds.apps[0]}]}
    token = feed(api, emu, body).json()["nextPageToken"]
    assert feed(api, emu, body | {"pageToken": token, "pageSize": 50}).status_code == 200
    for other in (
        {},
        {"appRefs": [{"id": ds.apps[1]}]},
        body | {"expandMask": {"paths": ["app_id"]}},
    ):
        replay = feed(api, emu, other | {"pageToken": token})
        assert replay.status_code == 400
        assert replay.json() == {
            "code": 3,
            "message": "page token does not match request",
            "details": [],
        }
    forged = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    for garbled in ("not a token!", forged, "x"):
        assert feed(api, emu, body | {"pageToken": garbled}).status_code == 400


def test_empty_result_has_null_list(api, emu: Emulator) -> None:
    page = feed(api, emu, {"after": "2030-01-01T00:00:00Z"}).json()
    assert page == {"list": None, "expanded": None, "nextPageToken": ""}


def test_dates_are_unsorted_and_use_every_precision(ds: Dataset) -> None:
    dates = [e["feed"]["date"] for e in ds.feed_entries()]
    assert dates != sorted(dates)
    widths = Counter(len(d) for d in dates)  # 20, 24, 27, 30 chars: 0, 3, 6, 9 digits
    assert set(widths) == {20, 24, 27, 30}
    assert min(widths.values()) > len(dates) / 10
    assert max(map(parse_rfc3339, dates)) < parse_rfc3339(END)


def test_feed_entries_look_like_the_service(ds: Dataset) -> None:
    entries = [e["feed"] for e in ds.feed_entries()]
    with_ticket = sum("ticketId" in e for e in entries) / len(entries)
    assert 0.5 < with_ticket < 0.7
    kinds = Counter(e["eventType"] for e in entries)
    assert kinds["GRANT_EVENT_TYPE_ADDED"] > kinds["GRANT_EVENT_TYPE_UNSPECIFIED"] > 0
    assert kinds["GRANT_EVENT_TYPE_REMOVED"] > 0
    assert kinds["GRANT_EVENT_TYPE_MODIFIED"] > 0  # a value newer than the spec
    assert all(None not in e.values() for e in entries)


def test_expand_mask_paths_resolve(api, emu: Emulator, ds: Dataset) -> None:
    body = {"expandMask": {"paths": ["*"]}, "pageSize": 100}
    page = feed(api, emu, body).json()
    expanded = page["expanded"]
    keys = [(o["@type"], o.get("appId"), o["id"]) for o in expanded]
    assert len(keys) == len(set(keys))
    saw_ticketless = False
    for entry in page["list"]:
        f = entry["feed"]

        def at(path: str) -> dict[str, Any]:
            assert path.startswith("$.expanded[")
            return expanded[int(path[len("$.expanded[") : -1])]

        assert at(entry["appPath"])["@type"] == "type.googleapis.com/c1.api.app.v1.App"
        assert at(entry["appPath"])["id"] == f["appId"]
        entitlement = at(entry["entitlementPath"])
        assert entitlement["@type"].endswith("app.v1.AppEntitlement")
        assert (entitlement["appId"], entitlement["id"]) == (f["appId"], f["appEntitlementId"])
        app_user = at(entry["appUserPath"])
        assert (app_user["appId"], app_user["id"]) == (f["appId"], f["appUserId"])
        assert app_user["identityUserId"] == ds.user_of_app_user(f["appUserId"])
        if "ticketId" in f:
            assert at(entry["ticketPath"])["id"] == f["ticketId"]
            assert at(entry["ticketPath"])["@type"].endswith("ticket.v1.Ticket")
        else:
            saw_ticketless = True
            assert "ticketPath" not in entry
    assert saw_ticketless
    only_app = feed(api, emu, {"expandMask": {"paths": ["app_id"]}}).json()
    assert all(set(e) == {"appPath", "feed"} for e in only_app["list"])
    assert {o["@type"] for o in only_app["expanded"]} == {"type.googleapis.com/c1.api.app.v1.App"}
    plain = feed(api, emu, {}).json()
    assert plain["expanded"] is None
    assert all(set(e) == {"feed"} for e in plain["list"])


@pytest.mark.parametrize(
    "body",
    [
        {"unknownField": 1},
        {"after": "yesterday"},
        {"after": "2025-01-01"},
        {"before": "2025-01-01T00:00:00"},
        {"pageSize": "many"},
        {"pageSize": True},
        {"pageToken": 5},
        {"appRefs": {"id": "x"}},
        {"appRefs": [{"id": "x", "extra": 1}]},
        {"appEntitlementRefs": [{"id": "x"}]},
        {"expandMask": {"paths": ["user"]}},
        {"expandMask": {"paths": ["app"]}},
        {"expandMask": {"paths": ["app_entitlement"]}},
        {"expandMask": {"paths": ["app_user"]}},
        {"expandMask": {"paths": ["ticket"]}},
        {"expandMask": ["app_id"]},
        [],
    ],
)
def test_feed_rejects_bad_requests(api, emu: Emulator, body: Any) -> None:
    response = feed(api, emu, body)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == 3


def test_feed_protocol_errors(api, emu: Emulator) -> None:
    not_json = api.post(emu.url + FEED, data=b"{nope", timeout=10)
    assert not_json.status_code == 400
    assert api.get(emu.url + FEED, timeout=10).status_code == 405
    assert api.get(emu.url + "/api/v1/nothing", timeout=10).status_code == 404
    assert api.post(emu.url + FEED, data=b"", timeout=10).status_code == 200  # empty = {}


def test_after_near_the_end_of_a_big_feed_is_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """What makes it fast, counted rather than timed (a shared machine's load would decide a
    time limit): a million events are neither decoded nor stored up front, and a search with
    `after` near the end decodes about a page of them, not the feed."""
    decoded = Counter[str]()
    decode = GrantFeed.event

    def counted(feed: GrantFeed, i: int) -> Any:
        decoded["events"] += 1
        return decode(feed, i)

    monkeypatch.setattr(GrantFeed, "event", counted)
    tracemalloc.start()
    try:
        big = Dataset(seed=2, events=1_000_000, apps=8, users=2000, end=END)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 30_000_000  # a million stored events would take over 100 MB
    assert decoded["events"] < 100  # the last few, for the feed's latest date
    decoded.clear()
    flt = big.feed.make_filter(after="2025-05-31T00:00:00Z")
    found, resume = big.feed.scan(flt, 0, 100)
    assert found
    assert big.feed.initial_range(flt)[0] > 990_000  # only the last events were examined
    assert resume is None or resume <= 10_000  # positions count that range
    assert decoded["events"] < 1000, decoded  # about the page, plus the dates' jitter window


def test_sparse_search_of_a_big_feed_answers_short_pages(ds: Dataset) -> None:
    counts = Counter((e["feed"]["appId"], e["feed"]["appUserId"]) for e in ds.feed_entries())
    ref, count = counts.most_common(1)[0]
    assert count >= 3
    flt = ds.feed.make_filter(app_user_refs=[ref])
    found, resume = ds.feed.scan(flt, 0, 100, budget=500)
    assert found
    assert resume is not None
    assert len(found) < count
    rest, end = ds.feed.scan(flt, resume, ds.total)
    assert end is None
    feed = [{"feed": ds.feed_object(e)} for e in found + rest]
    assert feed == ds.feed_entries(app_user_refs=[ref])


def test_expand_mask_id_field_names_each_expand_their_object(api, emu: Emulator) -> None:
    everything = feed(api, emu, {"expandMask": {"paths": ["*"]}}).json()
    named = feed(
        api,
        emu,
        {"expandMask": {"paths": ["app_id", "app_entitlement_id", "app_user_id", "ticket_id"]}},
    ).json()
    assert (named["list"], named["expanded"]) == (everything["list"], everything["expanded"])
    for path, field in (
        ("app_entitlement_id", "entitlementPath"),
        ("app_user_id", "appUserPath"),
        ("ticket_id", "ticketPath"),
    ):
        page = feed(api, emu, {"expandMask": {"paths": [path]}}).json()
        assert {key for entry in page["list"] for key in entry} == {"feed", field}
