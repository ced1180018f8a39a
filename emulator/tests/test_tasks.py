"""Tasks (tickets) and access reviews: the tasks behind the feed's ticket ids, their variants,
the task search's filters, sorting, paging and strictness, the access reviews list, and the
control that closes open tasks between two runs."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import requests

from emulator import Dataset, Emulator, lifecycle
from emulator.grants import CurrentGrant
from emulator.reviews import REVIEW_ZEROS
from emulator.tasks import TASK_ZEROS, TYPE_ZEROS
from emulator.tests.conftest import CRED, login, small_dataset, traverse
from emulator.timefmt import NS, format_ns, parse_rfc3339

TASKS = "/api/v1/search/tasks"
REVIEWS = "/api/v1/access_reviews"


def search(api: requests.Session, emu: Emulator, body: Any) -> requests.Response:
    return api.post(emu.url + TASKS, json=body, timeout=30)


def all_tasks(
    api: requests.Session, emu: Emulator, body: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every task a search finds, following nextPageToken."""
    found: list[dict[str, Any]] = []
    token = ""
    for _ in range(10_000):
        response = search(api, emu, (body or {}) | {"pageToken": token, "pageSize": 100})
        assert response.status_code == 200, response.text
        page = response.json()
        found.extend(view["task"] for view in page.get("list") or [])
        token = page.get("nextPageToken", "")
        if not token:
            return found
    raise AssertionError("task search never ended")


def kind(task: dict[str, Any]) -> str:
    return next(iter(task["type"]))


def body(task: dict[str, Any]) -> dict[str, Any]:
    return task["type"][kind(task)]


def instant(text: str | None) -> int | None:
    return None if text is None else parse_rfc3339(text)


@pytest.fixture(scope="module")
def truth(ds: Dataset) -> list[dict[str, Any]]:
    return ds.tasks()


def test_each_ticket_of_the_feed_names_its_grant_or_revoke_task(ds: Dataset, truth) -> None:
    by_id = {task["id"]: task for task in truth}
    gone = set(ds.missing_tickets())
    seen = Counter()
    for entry in ds.feed_entries():
        f = entry["feed"]
        ticket = f.get("ticketId")
        if not ticket:
            continue
        if ticket in gone:
            assert ticket not in by_id
            seen["gone"] += 1
            continue
        task = by_id[ticket]
        expected = "revoke" if f["eventType"] == lifecycle.REMOVED else "grant"
        assert kind(task) == expected
        subject = body(task)
        assert (subject["appId"], subject["appEntitlementId"], subject["appUserId"]) == (
            f["appId"],
            f["appEntitlementId"],
            f["appUserId"],
        )
        assert subject["identityUserId"] == ds.user_of_app_user(f["appUserId"])
        assert parse_rfc3339(task["createdAt"]) <= parse_rfc3339(f["date"])
        if "outcomeTime" in subject:
            assert parse_rfc3339(subject["outcomeTime"]) == parse_rfc3339(f["date"])
        seen[expected] += 1
    assert seen["grant"]
    assert seen["revoke"]
    assert 0 < seen["gone"] < 0.06 * sum(seen.values())
    # each event its own ticket: no two events name one task
    tickets = [e["feed"]["ticketId"] for e in ds.feed_entries() if e["feed"].get("ticketId")]
    assert len(tickets) == len(set(tickets))


def test_the_variants_an_audit_asks_about_all_occur(ds: Dataset, truth) -> None:
    grants = [t for t in truth if kind(t) == "grant"]
    outcomes = Counter(body(t).get("outcome", "open") for t in grants)
    assert {
        "GRANT_OUTCOME_GRANTED",
        "GRANT_OUTCOME_DENIED",
        "GRANT_OUTCOME_CANCELLED",
        "open",
    } <= set(outcomes)
    assert all(t["state"] == "TASK_STATE_OPEN" for t in grants if "outcome" not in body(t))
    assert {"grant", "revoke", "certify", "offboarding", "action"} == {kind(t) for t in truth}

    def approvers(task: dict[str, Any]) -> set[str]:
        return {
            step["approval"]["approved"]["userId"]
            for step in (task.get("policy") or {}).get("history", [])
            if "approved" in step["approval"]
        }

    granted = [t for t in grants if body(t).get("outcome") == "GRANT_OUTCOME_GRANTED"]
    by_self = [t for t in granted if approvers(t) == {body(t)["identityUserId"]}]
    by_other = [
        t for t in granted if approvers(t) and body(t)["identityUserId"] not in approvers(t)
    ]
    by_policy = [t for t in granted if not approvers(t)]
    assert by_self
    assert by_other
    assert by_policy
    assert any(t.get("emergencyAccess") for t in truth)
    assert {t["origin"] for t in truth if kind(t) == "revoke"} == {
        "TASK_ORIGIN_WEBAPP",
        "TASK_ORIGIN_TIME_REVOKE",
    }
    assert 0 < sum(not t.get("description") for t in grants) < len(grants) / 4
    assert any(
        ref["externalRefSource"] == "JIRA" for t in truth for ref in t.get("externalRefs", [])
    )
    assert all(t["approverIds"] == sorted(approvers(t)) for t in granted if approvers(t))


def test_grants_without_approval_give_each_reason_by_its_definition(ds: Dataset, truth) -> None:
    rows = ds.grants_without_approval()
    assert set(Counter(r["reason"] for r in rows)) == {
        "no_ticket",
        "ticket_not_found",
        "not_granted",
        "self_approved",
    }
    by_id = {t["id"]: t for t in truth}
    for row in rows:
        task = by_id.get(row["ticket_id"])
        if row["reason"] == "no_ticket":
            assert row["ticket_id"] == ""
        elif row["reason"] == "ticket_not_found":
            assert task is None
            assert row["ticket_id"] in ds.missing_tickets()
        elif row["reason"] == "not_granted":
            assert body(task).get("outcome") != "GRANT_OUTCOME_GRANTED"
        else:
            grantee = ds.user_of_app_user(row["app_user_id"])
            assert {a["user_id"] for a in ds.approvals() if a["task_id"] == task["id"]} == {grantee}
    # every ADDED event with a ticket whose task was granted with another approver: not listed
    listed = {
        (r["app_id"], r["app_entitlement_id"], r["app_user_id"], r["granted_at"]) for r in rows
    }
    added = [e["feed"] for e in ds.feed_entries() if e["feed"]["eventType"] == lifecycle.ADDED]
    assert len(listed) < len(added)


def test_a_search_without_filters_returns_every_task_in_server_order(api, emu, truth) -> None:
    assert all_tasks(api, emu) == truth


@pytest.mark.parametrize(
    ("name", "make", "keep"),
    [
        (
            "created",
            lambda mid, late: {"createdAfter": mid, "createdBefore": late},
            lambda t, mid, late: mid <= instant(t["createdAt"]) < late,
        ),
        (
            "outcome",
            lambda mid, late: {"outcomeAfter": mid, "outcomeBefore": late},
            lambda t, mid, late: (
                instant(body(t).get("outcomeTime")) is not None
                and mid <= instant(body(t)["outcomeTime"]) < late
            ),
        ),
    ],
)
def test_time_filters_keep_exactly_the_tasks_in_range(api, emu, truth, name, make, keep) -> None:
    created = sorted(instant(t["createdAt"]) for t in truth)
    mid, late = created[len(created) // 3], created[2 * len(created) // 3]
    found = all_tasks(api, emu, make(format_ns(mid), format_ns(late)))
    expected = [t for t in truth if keep(t, mid, late)]
    assert found == expected
    assert 0 < len(found) < len(truth), name


def test_state_type_ref_and_review_filters(api, emu, ds: Dataset, truth) -> None:
    open_tasks = all_tasks(api, emu, {"taskStates": ["TASK_STATE_OPEN"]})
    assert open_tasks == [t for t in truth if t["state"] == "TASK_STATE_OPEN"] != []
    nulls = all_tasks(api, emu, {"taskTypes": [{"grant": {"source": None}}]})
    assert nulls == [t for t in truth if kind(t) == "grant"]  # null members are unset
    for types in (["grant"], ["revoke", "certify"], ["offboarding"], ["action"]):
        found = all_tasks(api, emu, {"taskTypes": [{name: {}} for name in types]})
        assert found == [t for t in truth if kind(t) in types] != []
    picked = [truth[0], truth[len(truth) // 2]]
    refs = [{"id": picked[0]["id"]}, {"id": picked[1]["numericId"]}]
    assert all_tasks(api, emu, {"refs": refs}) == picked  # the id or the numeric id
    review = ds.access_reviews()[0]["id"]
    found = all_tasks(api, emu, {"accessReviewIds": [review]})
    assert found == [t for t in truth if body(t).get("accessReviewId") == review] != []
    assert all(kind(t) == "certify" for t in found)
    both = all_tasks(api, emu, {"taskStates": ["TASK_STATE_CLOSED"], "taskTypes": [{"grant": {}}]})
    assert both == [t for t in truth if t["state"] == "TASK_STATE_CLOSED" and kind(t) == "grant"]


def test_sort_orders(api, emu, truth) -> None:
    by_created = all_tasks(api, emu, {"sortBy": "TASK_SEARCH_SORT_BY_CREATED_AT"})
    assert [instant(t["createdAt"]) for t in by_created] == sorted(
        instant(t["createdAt"]) for t in truth
    )
    reverse = all_tasks(api, emu, {"sortBy": "TASK_SEARCH_SORT_BY_REVERSE_TICKET_ID"})
    assert [int(t["numericId"]) for t in reverse] == sorted(
        (int(t["numericId"]) for t in truth), reverse=True
    )
    assert by_created != truth  # server order is not creation order


@pytest.mark.parametrize(
    "request_body",
    [
        {"nope": 1},
        {"grantOutcomes": ["GRANT_OUTCOME_GRANTED"]},  # the vendor's, not emulated: said so
        {"createdAfter": "yesterday"},
        {"taskStates": ["TASK_STATE_DONE"]},
        {"taskStates": "TASK_STATE_OPEN"},
        {"taskTypes": [{"grant": {}, "revoke": {}}]},
        {"taskTypes": [{"ticket": {}}]},
        {"taskTypes": [{"grant": {"appId": "x"}}]},
        {"refs": [{}]},
        {"refs": "x"},
        {"refs": [{"id": "x", "appId": "y"}]},
        {"sortBy": "TASK_SEARCH_SORT_BY_ACCOUNT"},
        {"sortBy": "OLDEST"},
        {"expandMask": {"paths": ["task"]}},
        {"pageSize": "ten"},
        {"pageToken": "garbage"},
        [],
    ],
)
def test_bad_searches_are_refused_like_the_other_endpoints(api, emu, request_body) -> None:
    response = search(api, emu, request_body)
    assert response.status_code == 400, request_body
    assert set(response.json()) == {"code", "message", "details"}


def test_page_tokens_are_bound_to_the_search(api, emu) -> None:
    page = search(api, emu, {"pageSize": 10, "taskStates": ["TASK_STATE_CLOSED"]}).json()
    token = page["nextPageToken"]
    assert search(api, emu, {"pageToken": token, "taskStates": ["TASK_STATE_CLOSED"]}).ok
    refused = search(api, emu, {"pageToken": token, "taskStates": ["TASK_STATE_OPEN"]})
    assert refused.status_code == 400
    assert api.get(emu.url + TASKS, timeout=10).status_code == 405


def test_certify_tasks_expand_their_access_review(api, emu, ds: Dataset) -> None:
    response = search(
        api,
        emu,
        {"taskTypes": [{"certify": {}}], "expandMask": {"paths": ["*"]}, "pageSize": 100},
    )
    page = response.json()
    reviews = {r["id"]: r for r in ds.access_reviews()}
    for view in page["list"]:
        index = int(view["accessReviewPath"].removeprefix("$.expanded[").removesuffix("]"))
        expanded = page["expanded"][index]
        assert expanded["@type"].endswith("accessreview.v1.AccessReview")
        assert expanded["id"] == body(view["task"])["accessReviewId"]
        assert {k: v for k, v in expanded.items() if k != "@type"} == reviews[expanded["id"]]
    open_review = [r for r in ds.access_reviews() if r["state"] == "ACCESS_REVIEW_STATE_OPEN"]
    assert len(open_review) == 1
    decisions = all_tasks(api, emu, {"accessReviewIds": [open_review[0]["id"]]})
    assert {t["state"] for t in decisions} == {"TASK_STATE_OPEN", "TASK_STATE_CLOSED"}
    outcomes = {
        body(t).get("outcome") for t in all_tasks(api, emu, {"taskTypes": [{"certify": {}}]})
    }
    assert {"CERTIFY_OUTCOME_CERTIFIED", "CERTIFY_OUTCOME_DECERTIFIED"} <= outcomes


def test_access_reviews_list_in_pages_and_refuse_unknown_parameters() -> None:
    with Emulator(small_dataset(events=200, access_reviews=23), credential=CRED) as emu:
        api = login(emu)
        pages, token = [], ""
        while True:
            params = {"page_size": 10} | ({"page_token": token} if token else {})
            response = api.get(emu.url + REVIEWS, params=params, timeout=10)
            assert response.status_code == 200, response.text
            pages.append(response.json())
            token = pages[-1].get("nextPageToken", "")
            if not token:
                break
        assert [len(p["list"]) for p in pages] == [10, 10, 3]
        listed = [view["accessReview"] for p in pages for view in p["list"]]
        assert listed == emu.dataset.access_reviews()
        assert "nextPageToken" not in pages[-1]  # omitted by default, like the exclusions
        assert api.get(emu.url + REVIEWS, params={"since": "x"}, timeout=10).status_code == 400
        bad = api.get(emu.url + REVIEWS, params={"page_token": "forged"}, timeout=10)
        assert bad.status_code == 400
        assert api.post(emu.url + REVIEWS, timeout=10).status_code == 405


@pytest.mark.parametrize("emit", [False, True])
def test_empty_values_omitted_or_sent(emit: bool) -> None:
    with Emulator(small_dataset(events=300), credential=CRED, emit_unpopulated=emit) as emu:
        api = login(emu)
        page = search(api, emu, {"pageSize": 100, "taskStates": ["TASK_STATE_OPEN"]}).json()
        reviews = api.get(emu.url + REVIEWS, timeout=10).json()
        tasks = [view["task"] for view in page["list"]]
        assert tasks
        if emit:
            assert all(set(TASK_ZEROS) <= set(t) for t in tasks)
            assert all(set(TYPE_ZEROS[kind(t)]) <= set(body(t)) for t in tasks)
            assert all(body(t)["outcome"].endswith("_UNSPECIFIED") for t in tasks)
            assert all(body(t)["outcomeTime"] is None for t in tasks)
            assert page["nextPageToken"] == "" or page["nextPageToken"]
            assert page["expanded"] == []
            assert set(REVIEW_ZEROS) <= set(reviews["list"][-1]["accessReview"])
            assert reviews["list"][-1]["accessReview"]["closedAt"] is None
            assert reviews["nextPageToken"] == ""
        else:
            assert all("outcome" not in body(t) and "outcomeTime" not in body(t) for t in tasks)
            assert all("policy" not in t and "approverIds" not in t for t in tasks)
            assert "expanded" not in page
            assert "closedAt" not in reviews["list"][-1]["accessReview"]
            assert "nextPageToken" not in reviews
        if not emit:
            ids = {t["id"] for t in tasks}
            assert tasks == [t for t in emu.dataset.tasks() if t["id"] in ids]


def test_open_tasks_close_between_two_runs_and_new_ones_appear(fresh: Emulator) -> None:
    api = login(fresh)
    first = all_tasks(api, fresh)
    open_before = [t for t in first if t["state"] == "TASK_STATE_OPEN"]
    assert len(open_before) >= 2
    run1_end = max(instant(t["updatedAt"]) for t in first) + 1
    closed = requests.post(
        f"{fresh.url}/_emulator/close-tasks", json={"count": 2}, timeout=10
    ).json()["closed"]
    assert (
        closed
        == [
            t["id"]
            for t in sorted(
                open_before, key=lambda t: (instant(t["createdAt"]), int(t["numericId"]))
            )
        ][:2]
    )
    fresh.add_events(count=60)
    # the second run: what was created since, and what got an outcome since
    created = all_tasks(api, fresh, {"createdAfter": format_ns(run1_end)})
    decided = all_tasks(api, fresh, {"outcomeAfter": format_ns(run1_end)})
    assert {t["id"] for t in decided} >= set(closed)
    assert created  # the added events' tickets
    assert not {t["id"] for t in created} & {t["id"] for t in first}
    for task in decided:
        if task["id"] in closed:
            assert task["state"] == "TASK_STATE_CLOSED"
            assert body(task)["outcome"] in (
                "GRANT_OUTCOME_GRANTED",
                "GRANT_OUTCOME_DENIED",
                "CERTIFY_OUTCOME_CERTIFIED",
                "CERTIFY_OUTCOME_DECERTIFIED",
            )
            assert task["policy"]["history"]
            assert instant(task["updatedAt"]) == instant(body(task)["outcomeTime"]) >= run1_end
    # the warehouse's view after the second run equals the service's now
    latest = {t["id"]: t for t in first} | {t["id"]: t for t in created + decided}
    assert sorted(latest.values(), key=lambda t: t["id"]) == sorted(
        fresh.dataset.tasks(), key=lambda t: t["id"]
    )
    # closing them all leaves none open
    fresh.close_tasks()
    assert all_tasks(api, fresh, {"taskStates": ["TASK_STATE_OPEN"]}) == []


def test_the_feed_and_its_expanded_tickets_still_agree(api, emu) -> None:
    entries = traverse(api, emu, {"expandMask": {"paths": ["ticket_id"]}})
    assert sum("ticketId" in e["feed"] for e in entries) > 0


def test_ticket_ids_may_carry_the_numeric_id_and_name_the_same_tasks(ds: Dataset) -> None:
    mixed = small_dataset(ticket_ids="mixed")
    plain_feed = [e["feed"] for e in ds.feed_entries()]
    mixed_feed = [e["feed"] for e in mixed.feed_entries()]
    by_ref = {}
    for task in mixed.tasks():
        by_ref[task["id"]] = by_ref[task["numericId"]] = task
    assert mixed.tasks() == ds.tasks()  # the same tasks; only how the feed names them differs
    forms = Counter()
    gone = set(mixed.missing_tickets())
    for plain, f in zip(plain_feed, mixed_feed, strict=True):
        assert {k: v for k, v in plain.items() if k != "ticketId"} == {
            k: v for k, v in f.items() if k != "ticketId"
        }
        if not f.get("ticketId"):
            assert not plain.get("ticketId")
            continue
        forms["numeric" if f["ticketId"].isdigit() else "id"] += 1
        if f["ticketId"] in gone:
            continue
        task = by_ref[f["ticketId"]]
        assert task["id"] == plain["ticketId"]
    assert forms["numeric"] > 0
    assert forms["id"] > 0
    reasons = Counter(r["reason"] for r in mixed.grants_without_approval())
    assert reasons == Counter(r["reason"] for r in ds.grants_without_approval())


def test_tasks_closing_between_pages_neither_repeat_nor_skip_a_task(fresh: Emulator) -> None:
    """In server order a page token holds a place among all tasks, so a task that closes
    while a client pages through the closed ones moves nothing."""
    api = login(fresh)
    closed_before = [t["id"] for t in fresh.dataset.tasks() if t["state"] == "TASK_STATE_CLOSED"]
    query = {"taskStates": ["TASK_STATE_CLOSED"], "pageSize": 100}
    first = search(api, fresh, query).json()
    assert first["nextPageToken"]
    assert fresh.close_tasks()  # every open task, some before the first page's end
    seen = [view["task"]["id"] for view in first["list"]]
    token = first["nextPageToken"]
    while token:
        page = search(api, fresh, query | {"pageToken": token}).json()
        seen += [view["task"]["id"] for view in page["list"]]
        token = page.get("nextPageToken", "")
    assert len(seen) == len(set(seen))
    assert set(closed_before) <= set(seen)


def test_a_review_decides_no_grant_older_than_the_feed_that_the_feed_removed_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A grant made before the feed and removed in it (a REMOVED with no ADDED) is not held
    when a later review begins: no certify task of that review decides it. The tenant's
    grants older than the feed are here that one grant, so the review's batch of grants
    made before the feed would pick it."""
    ds = small_dataset()
    first = min(review.started_at for review in ds.reviews.reviews)
    removed = next(
        i for i in ds.intervals() if i.granted_at is None and i.revoked_at and i.revoked_at < first
    )
    assert ds.grants is not None
    grant = CurrentGrant(*removed[:3], removed.revoked_at - 86_400 * NS, None, (), None, False)
    monkeypatch.setattr(ds.grants, "made_before_feed", lambda: [grant])
    # numeric ids of certify tasks: 20_000_000 + review * 100_000 + batch * 50_000 + n, batch 1
    # deciding grants made before the feed
    before_feed = [
        task["id"]
        for task in ds.tasks()
        if kind(task) == "certify"
        and (int(task["numericId"]) - 20_000_000) % 100_000 >= 50_000
        and (body(task)["appId"], body(task)["appEntitlementId"], body(task)["appUserId"])
        == removed[:3]
    ]
    assert before_feed == []
