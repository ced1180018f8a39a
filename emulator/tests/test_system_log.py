"""The system log (``POST /api/v1/systemlog/events``): OCSF events of what the other endpoints
did and of every call answered, listed in half-open time ranges that tile exactly, in the
order asked or in the one a setting imposes, with the undocumented variants (events without
``time``, bursts at one instant, a retention, events appended while a client pages), strictly.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from typing import Any

import pytest
import requests

from emulator import Emulator
from emulator.lifecycle import ADDED
from emulator.system_log import Kind
from emulator.tests.conftest import CRED, login, small_dataset
from emulator.timefmt import format_ns

LOG = "/api/v1/systemlog/events"
MS = 1_000_000


def read_all(
    api: requests.Session, emu: Emulator, body: dict[str, Any], page_size: int = 100
) -> list[dict[str, Any]]:
    """Every event of one listing, page after page."""
    events: list[dict[str, Any]] = []
    token = ""
    for _ in range(10_000):
        response = api.post(emu.url + LOG, json=body | {"pageSize": page_size, "pageToken": token})
        assert response.status_code == 200, response.text
        page = response.json()
        events += page.get("list") or []
        token = page.get("nextPageToken", "")
        if not token:
            return events
    raise AssertionError("the listing never ended")


def uids(events: list[dict[str, Any]]) -> list[str]:
    return [event["metadata"]["uid"] for event in events]


@pytest.fixture(scope="module")
def tenant() -> Any:
    with Emulator(
        small_dataset(events=1500, max_exclusions=40, log_background=2000), credential=CRED
    ) as emulator:
        yield emulator


@pytest.fixture
def api(tenant: Emulator) -> Any:
    tenant.update_settings({"log_order": "asked", "shapes": "newest", "log_retention_days": 0})
    yield login(tenant)
    tenant.update_settings({"log_order": "asked", "shapes": "newest", "log_retention_days": 0})


def until_now() -> tuple[str, int]:
    """An ``until`` of now (whole ms), as RFC 3339 text and in ns."""
    ns = time.time_ns() // MS * MS
    return format_ns(ns), ns


def test_the_log_read_whole_in_either_sort_order_is_the_truth_once(
    tenant: Emulator, api: requests.Session
) -> None:
    until, until_ns = until_now()
    truth = [e for e in tenant.dataset.system_log() if e.time < until_ns]
    ascending = read_all(api, tenant, {"until": until, "sortDirection": "SORT_DIRECTION_ASC"})
    assert uids(ascending) == [e.uid for e in truth]
    assert [e["time"] for e in ascending] == [e.time // MS for e in truth]
    descending = read_all(api, tenant, {"until": until, "sortDirection": "SORT_DIRECTION_DESC"})
    assert [e["time"] for e in descending] == sorted((e.time // MS for e in truth), reverse=True)
    assert sorted(uids(descending)) == sorted(uids(ascending))
    unset = read_all(api, tenant, {"until": until})  # no time order: by uid
    assert uids(unset) == sorted(uids(ascending))
    assert [e["time"] for e in unset] != sorted(e["time"] for e in unset)
    assert len(set(uids(ascending))) == len(ascending)  # every uid its own event
    # Many events share an instant (bursts), and every kind of event is there.
    largest_burst = max(Counter(e.time for e in truth).values())
    assert largest_burst >= 64
    assert {e.kind for e in truth} == set(Kind) - {Kind.UNEXCLUDE}  # none removed yet


@pytest.mark.parametrize("order", ["ascending", "descending", "unsorted"])
def test_an_order_the_service_imposes_whatever_the_request_asks(
    tenant: Emulator, api: requests.Session, order: str
) -> None:
    until, until_ns = until_now()
    tenant.update_settings({"log_order": order})
    events = read_all(api, tenant, {"until": until, "sortDirection": "SORT_DIRECTION_ASC"})
    times = [e["time"] for e in events]
    expected = {
        "ascending": sorted(times),
        "descending": sorted(times, reverse=True),
        "unsorted": [e["time"] for e in sorted(events, key=lambda e: e["metadata"]["uid"])],
    }[order]
    assert times == expected
    assert sorted(uids(events)) == sorted(
        e.uid for e in tenant.dataset.system_log() if e.time < until_ns
    )


def test_time_ranges_tile_the_log_exactly_even_cut_inside_a_burst(
    tenant: Emulator, api: requests.Session
) -> None:
    """``since`` inclusive and ``until`` exclusive: ranges cut at any instants, one of them
    an instant many events share, hold every event once."""
    _until, until_ns = until_now()
    truth = [e for e in tenant.dataset.system_log() if e.time < until_ns]
    burst = Counter(e.time for e in truth).most_common(1)[0][0]
    cuts = sorted({truth[0].time, truth[len(truth) // 3].time + 1, burst, until_ns})
    pieces = [
        read_all(api, tenant, {"since": format_ns(a), "until": format_ns(b)}, page_size=37)
        for a, b in itertools.pairwise(cuts)
    ]
    assert sorted(uid for piece in pieces for uid in uids(piece)) == sorted(e.uid for e in truth)
    at_burst = pieces[cuts.index(burst)]  # the range that begins at the burst's instant
    assert all(e["time"] * MS >= burst for e in at_burst)
    assert sum(e["time"] * MS == burst for e in at_burst) >= 64


def test_what_the_other_endpoints_did_is_in_the_log(tenant: Emulator) -> None:
    """Each grant event of the feed is a Create or Delete of that grant at its instant, each
    approval an Update by its approver, each exclusion an addition by an administrator."""
    ds = tenant.dataset
    events = ds.system_log()
    grants = Counter(
        (e.kind, e.time, e.resources) for e in events if e.kind in (Kind.GRANT, Kind.REVOKE)
    )

    def expected(i: int) -> tuple[Any, ...]:
        """Feed event ``i``'s log event: logged when added, for one added at run time."""
        feed_event = ds.event(i)
        entry = ds.feed_object(feed_event)
        kind = Kind.GRANT if entry["eventType"] == ADDED else Kind.REVOKE
        app = entry["appId"]
        resources = (
            ("AppEntitlement", f"{app}/{entry['appEntitlementId']}"),
            ("AppUser", f"{app}/{entry['appUserId']}"),
        )
        when = max(feed_event.date, ds.feed.added_at(i) or 0)
        return kind, when // MS * MS, resources

    assert grants == Counter(expected(i) for i in range(ds.total))
    approvals = {(a["task_id"], a["user_id"], a["verdict"]) for a in ds.approvals()}
    logged = {
        (e.resources[0][1], e.actor.uid, "approved" if e.kind == Kind.APPROVE else "denied")
        for e in events
        if e.kind in (Kind.APPROVE, Kind.DENY)
    }
    assert logged == approvals
    excluded = Counter(
        (f"{entry['appId']}/{entry['appEntitlementId']}", entry["user"]["id"])
        for app_id, entitlement_id in ds.exclusion_entitlements
        if ds.has_entitlement(app_id, entitlement_id)
        for entry in ds.exclusion_entries(app_id, entitlement_id)
    )
    assert (
        Counter((e.resources[0][1], e.resources[1][1]) for e in events if e.kind == Kind.EXCLUDE)
        == excluded
    )
    admins = {e.actor.uid for e in events if e.kind in (Kind.GRANT, Kind.EXCLUDE)}
    assert 1 < len(admins) <= 6
    assert admins <= set(ds.user_ids)


def test_calls_answered_and_changes_made_now_are_logged_as_they_happen(
    tenant: Emulator, api: requests.Session
) -> None:
    """The client's sign-in and reads (its user agent, the operation, the outcome), an
    exclusion removed and brought back, tasks decided and events added to the feed."""
    started = time.time_ns() // MS * MS
    api.headers["User-Agent"] = "tap-accessgov/1.2.3"
    assert api.get(tenant.url + "/api/v1/apps").status_code == 200
    assert api.get(tenant.url + "/api/v1/apps/nope/entitlements").status_code == 404
    ds = tenant.dataset
    app_id, entitlement_id = ds.exclusion_entitlements[0]
    user_id = ds.exclusion_entries(app_id, entitlement_id)[0]["user"]["id"]
    tenant.remove(app_id=app_id, app_entitlement_id=entitlement_id, user_id=user_id)
    tenant.restore(app_id=app_id, app_entitlement_id=entitlement_id, user_id=user_id)
    decided = tenant.close_tasks(3)
    tenant.add_events(5)
    live = read_all(
        api, tenant, {"since": format_ns(started), "sortDirection": "SORT_DIRECTION_ASC"}
    )
    reads = [e for e in live if e["class_uid"] == 6003 and e["activity_id"] == 2]
    by_operation = {(e["api"]["operation"], e["status"]) for e in reads}
    assert ("c1.api.app.v1.Apps/List", "Success") in by_operation
    assert ("c1.api.app.v1.AppEntitlements/List", "Failure") in by_operation
    assert {e["http_request"]["user_agent"] for e in reads[:2]} == {"tap-accessgov/1.2.3"}
    assert {e["actor"]["user"]["name"] for e in reads} == {CRED.client_id}
    assert CRED.client_secret not in str(live)
    changes = [
        (e["activity_name"], e["resources"][1]["uid"])
        for e in live
        if e.get("api", {}).get("operation", "").endswith("AutomationExclusion")
    ]
    assert changes == [("Delete", user_id), ("Create", user_id)]
    approved = {
        e["resources"][0]["uid"]
        for e in live
        if e.get("api", {}).get("operation", "").startswith("c1.api.task.v1.TaskActionsService/")
    }
    assert set(decided) <= approved or not decided
    added = [e for e in tenant.dataset.system_log() if e.kind in (Kind.GRANT, Kind.REVOKE)]
    assert len(added) == ds.total


def test_sign_ins_without_time_in_older_releases_and_time_as_text_in_a_changed_one(
    tenant: Emulator, api: requests.Session
) -> None:
    until, _ = until_now()
    body = {"until": until, "sortDirection": "SORT_DIRECTION_ASC"}
    tenant.update_settings({"shapes": "older"})
    older = read_all(api, tenant, body)
    assert {"time" in e for e in older if e["class_uid"] == 3002} == {False}
    assert {"time" in e for e in older if e["class_uid"] == 6003} == {True}
    tenant.update_settings({"shapes": "changed"})
    changed = read_all(api, tenant, body)
    assert {type(e["time"]) for e in changed} == {str}
    tenant.update_settings({"shapes": "newest"})
    newest = read_all(api, tenant, body)
    assert [format_ns(e["time"] * MS) for e in newest] == [e["time"] for e in changed]


def test_a_since_before_the_retention_is_answered_from_its_start(
    tenant: Emulator, api: requests.Session
) -> None:
    until, until_ns = until_now()
    everything = read_all(api, tenant, {"until": until, "sortDirection": "SORT_DIRECTION_ASC"})
    days = (until_ns - everything[len(everything) // 2]["time"] * MS) // (86_400 * 10**9) + 1
    tenant.update_settings({"log_retention_days": days})
    kept = read_all(
        api, tenant, {"since": "2000-01-01T00:00:00Z", "until": until, "sortDirection": 1}
    )
    cut = time.time_ns() - days * 86_400 * 10**9
    assert 0 < len(kept) < len(everything)
    assert min(e["time"] for e in kept) * MS >= cut - 60 * 10**9
    assert uids(kept) == [
        uid
        for e, uid in zip(everything, uids(everything), strict=True)
        if e["time"] * MS >= min(k["time"] for k in kept) * MS
    ]


def test_events_appended_while_a_client_pages_shift_an_open_ended_descending_listing(
    tenant: Emulator, api: requests.Session
) -> None:
    """Page tokens are positions: with no ``until``, the newest-first listing of a log that
    grows (every call is an event) shows an event again on a later page; bounded by an
    ``until`` in the past, the same listing is exact."""
    body = {
        "since": format_ns(time.time_ns() - 3_600 * 10**9),
        "sortDirection": "SORT_DIRECTION_DESC",
    }
    for _ in range(30):  # a few events in the range
        api.get(tenant.url + "/api/v1/apps")
    open_ended = read_all(api, tenant, body, page_size=10)
    assert len(set(uids(open_ended))) < len(open_ended)
    until, _ = until_now()
    bounded = read_all(api, tenant, body | {"until": until}, page_size=10)
    assert len(set(uids(bounded))) == len(bounded)


def test_since_event_uid_resumes_after_that_event(tenant: Emulator, api: requests.Session) -> None:
    until, _ = until_now()
    events = read_all(api, tenant, {"until": until, "sortDirection": "SORT_DIRECTION_ASC"})
    middle = events[len(events) // 2]["metadata"]["uid"]
    after = read_all(
        api,
        tenant,
        {"until": until, "sinceEventUid": middle, "sortDirection": "SORT_DIRECTION_ASC"},
    )
    assert uids(after) == uids(events)[len(events) // 2 + 1 :]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"sinse": "2025-01-01T00:00:00Z"}, 'unknown field "sinse"'),
        ({"since": "yesterday"}, "since is not an RFC 3339 date-time"),
        ({"sortDirection": "NEWEST_FIRST"}, "sortDirection must be one of"),
        ({"pageSize": "ten"}, "pageSize must be an int32"),
        ({"sinceEventUid": "no-such-event"}, "sinceEventUid names no event"),
        ({"pageToken": "forged"}, "invalid page token"),
    ],
)
def test_a_bad_request_is_refused_naming_its_field(
    tenant: Emulator, api: requests.Session, body: dict[str, Any], message: str
) -> None:
    response = api.post(tenant.url + LOG, json=body)
    assert response.status_code == 400, response.text
    assert message in response.json()["message"]


def test_a_page_token_of_another_range_is_refused(tenant: Emulator, api: requests.Session) -> None:
    first = api.post(tenant.url + LOG, json={"pageSize": 10}).json()
    other = api.post(
        tenant.url + LOG,
        json={"pageSize": 10, "pageToken": first["nextPageToken"], "since": "2025-01-01T00:00:00Z"},
    )
    assert other.status_code == 400
    assert "page token does not match request" in other.text


def test_calls_are_not_logged_when_the_tenant_is_told_not_to(
    tenant: Emulator, api: requests.Session
) -> None:
    """``log_calls`` off (a long-lived emulator many runs read whole): calls and sign-ins
    leave the log as it was; on again, they are logged."""
    tenant.update_settings({"log_calls": False})
    try:
        before = len(tenant.dataset.system_log())
        for _ in range(5):
            assert api.get(tenant.url + "/api/v1/apps").status_code == 200
        login(tenant)
        assert len(tenant.dataset.system_log()) == before
    finally:
        tenant.update_settings({"log_calls": True})
    api.get(tenant.url + "/api/v1/apps")
    assert len(tenant.dataset.system_log()) == before + 1
