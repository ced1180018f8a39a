"""The ``tasks`` and ``access_reviews`` streams against the emulator's truth: every task as the
service holds it (``numericId`` an integer), incremental runs that read only what was created
or decided since the bookmark, resumable windows, concurrency that changes nothing but time."""

from __future__ import annotations

import datetime
import json
import logging
import math
import threading
import typing as t

import pytest
import requests

from emulator import Dataset, Emulator, reviews
from emulator import tasks as served
from emulator.shapes import SHAPES
from emulator.timefmt import parse_rfc3339 as service_ns
from tap_accessgov.paging import Page, viewed_objects
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    SMALL_DATASET,
    SyncResult,
    catalog_selecting,
    ns,
    sync,
    tap_config,
    watch_bodies,
)

SEARCH = "/api/v1/search/tasks"
PAGE = 25


def expected(task: dict[str, t.Any]) -> dict[str, t.Any]:
    """A Task object as the stream's record carries it: as sent, ``numericId`` an integer."""
    return {**task, "numericId": int(task["numericId"])}


def task_config(emu: Emulator, **settings: t.Any) -> dict[str, t.Any]:
    return {**tap_config(emu), "page_size": PAGE, **settings}


def tasks_of(
    config: dict[str, t.Any],
    state: dict[str, t.Any] | None = None,
    on_search: t.Callable[[dict[str, t.Any]], None] | None = None,
) -> SyncResult:
    """A sync of ``tasks`` alone; ``on_search`` is called with the body of each task search
    as its answer arrives (a requests response hook: public API), before the tap reads it."""
    catalog = catalog_selecting(config, {"tasks": None})
    tap = TapAccessGov(config=config, state=state, catalog=catalog, parse_env_config=False)
    if on_search is not None:
        watch_bodies(tap, "tasks", SEARCH, on_search)
    return sync(config, tap=tap)


def by_id(*runs: t.Iterable[dict[str, t.Any]]) -> dict[str, dict[str, t.Any]]:
    """The warehouse after ``runs`` in order: records merged by id, the latest run's wins."""
    return {record["id"]: record for records in runs for record in records}


def searches(emu: Emulator) -> int:
    return int(emu.stats["api_requests_by_path"].get(SEARCH, 0))


def outcome_ns(task: dict[str, t.Any]) -> int | None:
    (body,) = task["type"].values()
    when = (body or {}).get("outcomeTime")
    return service_ns(when) if when else None


@pytest.fixture
def tenant(make_emulator: t.Callable[..., Emulator]) -> Emulator:
    return make_emulator(Dataset(**SMALL_DATASET, ticket_ids="mixed"))


def test_a_first_sync_reads_every_task_as_the_service_holds_it(tenant: Emulator) -> None:
    """Every task, and where the windows begin asked once: the earliest task, by one small
    search sorted by creation (the windows are cut from its instant, not from the epoch)."""
    bodies: list[dict[str, t.Any]] = []
    result = tasks_of(task_config(tenant), on_search=bodies.append)
    earliest = {"sortBy": "TASK_SEARCH_SORT_BY_CREATED_AT", "pageSize": 10}
    assert [body for body in bodies if body.get("pageSize") != PAGE] == [earliest]
    assert bodies[0] == earliest
    assert all(body.get("createdAfter") or body.get("createdBefore") for body in bodies[1:])
    truth = tenant.dataset.tasks()
    assert sorted(result.records["tasks"], key=lambda r: r["id"]) == sorted(
        map(expected, truth), key=lambda r: r["id"]
    )
    kinds = {next(iter(record["type"])) for record in result.records["tasks"]}
    assert {"grant", "revoke", "certify", "offboarding", "action"} <= kinds  # newer types too
    assert "backfill" not in result.state["bookmarks"]["tasks"]


def test_empty_values_sent_or_omitted_give_the_same_tasks(
    make_emulator: t.Callable[..., Emulator],
) -> None:
    emitting = make_emulator(Dataset(**SMALL_DATASET), emit_unpopulated=True)
    records = tasks_of(task_config(emitting)).records["tasks"]
    assert sorted(r["id"] for r in records) == sorted(t["id"] for t in emitting.dataset.tasks())
    assert all(isinstance(r["numericId"], int) and r["numericId"] > 0 for r in records)
    open_grants = [r for r in records if r["state"] == "TASK_STATE_OPEN" and "grant" in r["type"]]
    assert open_grants
    assert all(r["type"]["grant"]["outcome"] == "GRANT_OUTCOME_UNSPECIFIED" for r in open_grants)


def test_the_second_run_reads_only_tasks_created_or_decided_since_and_keeps_their_latest_state(
    tenant: Emulator,
) -> None:
    """Between two runs approvers decide open tasks (the close-tasks control) and new grant
    events bring new tasks. The second run reads exactly the tasks created or decided at or
    after its bookmark (the tasks at the bookmark instant are read again, as the grant feed's
    events are), in as many requests as their pages take, and the first run's records
    overlaid with the second's are every task's state now."""
    config = task_config(tenant, max_concurrency=4)
    first = tasks_of(config)
    bookmark = ns(first.state["bookmarks"]["tasks"]["replication_key_value"])
    before = {task["id"]: task for task in tenant.dataset.tasks()}
    closed = tenant.close_tasks(count=20)
    now = datetime.datetime.now(datetime.UTC)
    tenant.add_events(dates=[now + datetime.timedelta(milliseconds=n) for n in range(60)])
    now_tasks = {task["id"]: task for task in tenant.dataset.tasks()}
    new = now_tasks.keys() - before.keys()
    assert len(closed) == 20  # of 29 open: the rest stay open and unread
    assert len(new) > 30
    at_bookmark = {
        task_id
        for task_id, task in before.items()
        if bookmark in (service_ns(task["createdAt"]), outcome_ns(task))
    }
    tenant.reset_stats()

    second = tasks_of(config, state=first.state)

    read = [record["id"] for record in second.records["tasks"]]
    assert len(read) == len(set(read)), "no task is read twice in a run"
    assert set(read) == set(closed) | new | at_bookmark
    assert len(at_bookmark) <= 2
    # The pages of the decided tasks and of the new ones, and at most one empty window.
    pages = max(1, math.ceil(len(set(closed) | at_bookmark) / PAGE)) + math.ceil(len(new) / PAGE)
    assert pages <= searches(tenant) <= pages + 1
    latest = {r["id"]: r for r in first.records["tasks"]} | {
        r["id"]: r for r in second.records["tasks"]
    }
    assert latest == {task_id: expected(task) for task_id, task in now_tasks.items()}


def test_a_task_decided_while_a_run_pages_is_read_by_the_next_run(tenant: Emulator) -> None:
    """A run reads the tasks decided since the last one first, then those created since.
    While it pages (its outcome query answered), an approver decides an open task, and then
    new grant events bring tasks created later still, which the run reads. Its bookmark is
    capped at its start, not the latest ``updatedAt`` it saw (later than that decision), so
    the next run reads the decided task, and the warehouse holds every task's state now."""
    config = task_config(tenant, max_concurrency=4)
    first = tasks_of(config)
    decided: list[str] = []
    later: list[str] = []  # the instants of the tasks created after that decision

    def decide_while_paging(body: dict[str, t.Any]) -> None:
        if decided:
            return
        now = datetime.datetime.now(datetime.UTC)
        decided.extend(tenant.close_tasks(count=1, at=now))
        later.extend(
            (now + datetime.timedelta(seconds=1, milliseconds=n)).isoformat() for n in range(40)
        )
        tenant.add_events(dates=later)

    started = service_ns(datetime.datetime.now(datetime.UTC).isoformat())
    second = tasks_of(config, state=first.state, on_search=decide_while_paging)
    (task_id,) = decided
    truth = {task["id"]: task for task in tenant.dataset.tasks()}
    outcome = outcome_ns(truth[task_id])
    assert outcome is not None
    assert started < outcome < service_ns(later[0])  # decided during the run
    assert task_id in {r["id"] for r in first.records["tasks"]}  # read open by the first run
    assert task_id not in {r["id"] for r in second.records["tasks"]}, "decided after it paged"
    seen = max(ns(r["updatedAt"]) for r in second.records["tasks"])
    assert seen >= service_ns(later[0])  # the run saw changes later than that decision

    third = tasks_of(config, state=second.state)

    assert {r["id"]: r for r in third.records["tasks"]}[task_id] == expected(truth[task_id])
    warehouse = by_id(first.records["tasks"], second.records["tasks"], third.records["tasks"])
    assert warehouse == {task_id: expected(task) for task_id, task in truth.items()}


def test_an_interrupted_first_sync_resumes_without_reading_its_completed_windows(
    tenant: Emulator,
) -> None:
    """The STATE written after a window completed, as a run killed then left it: the run from
    it reads every task but those created in the completed windows, and caps its bookmark at
    the interrupted run's start."""
    config = task_config(tenant, max_concurrency=4)
    full = tasks_of(config)
    interim = [s["bookmarks"]["tasks"] for s in full.states if "tasks" in s["bookmarks"]]
    interim = [s for s in interim if "backfill" in s]
    assert len(interim) > 4
    killed = interim[2]["backfill"]
    done = [(ns(a) if a else None, ns(b) if b else None) for a, b in killed["completed"]]

    def in_done(task: dict[str, t.Any]) -> bool:
        created = service_ns(task["createdAt"])
        return any((a is None or a <= created) and (b is None or created < b) for a, b in done)

    resumed = tasks_of(config, state={"bookmarks": {"tasks": interim[2]}})
    read = [record["id"] for record in resumed.records["tasks"]]
    truth = tenant.dataset.tasks()
    assert sorted(read) == sorted(task["id"] for task in truth if not in_done(task))
    assert 0 < len(read) < len(truth)
    final = resumed.state["bookmarks"]["tasks"]
    assert "backfill" not in final
    assert ns(final["replication_key_value"]) <= ns(killed["since"])


def test_an_interrupted_incremental_run_resumes_from_its_last_state(
    make_emulator: t.Callable[..., Emulator],
) -> None:
    """The second run of a tenant last read three days ago: its outcome query, then the
    tasks created since in several windows. Cut off after some windows completed (what a
    killed process wrote: its records and the last STATE before the cut, as test_backfill's
    kill at 70%), the run from that STATE reads neither the outcome query nor the completed
    windows again, keeps the interrupted run's start as its cap, and the warehouse (records
    merged by id, the latest run's wins) then holds every task's state now."""
    now = datetime.datetime.now(datetime.UTC)
    tenant = make_emulator(
        Dataset(**SMALL_DATASET, ticket_ids="mixed", end=now - datetime.timedelta(days=3))
    )
    config = task_config(tenant, max_concurrency=4)
    first = tasks_of(config)
    bookmark = first.state["bookmarks"]["tasks"]["replication_key_value"]
    decided = tenant.close_tasks(count=10)
    dates = [now - datetime.timedelta(hours=70, minutes=-17 * n) for n in range(240)]
    tenant.add_events(dates=[date.isoformat() for date in dates])
    second = tasks_of(config, state=first.state)

    # Killed just before the third window's STATE: its records, the in-flight windows' so far.
    killed: list[dict[str, t.Any]] = []
    state: dict[str, t.Any] | None = None
    windows_done = 0
    for message in second.messages:
        if message["type"] == "RECORD":
            killed.append(message["record"])
        elif message["type"] == "STATE":
            backfill = message["value"]["bookmarks"]["tasks"].get("backfill")
            if backfill and backfill["completed"]:
                windows_done += 1
                if windows_done == 3:
                    break
            state = message["value"]
    assert state is not None
    backfill = state["bookmarks"]["tasks"]["backfill"]
    assert backfill["outcomesRead"] is True
    completed = [(ns(a), None if b is None else ns(b)) for a, b in backfill["completed"]]
    assert completed

    def in_completed(instant: int) -> bool:
        return any(a <= instant and (b is None or instant < b) for a, b in completed)

    bodies: list[dict[str, t.Any]] = []
    resumed = tasks_of(config, state=state, on_search=bodies.append)

    assert bodies
    assert not [body for body in bodies if "outcomeAfter" in body], "outcomes read again"
    for body in bodies:
        after, before = ns(body["createdAfter"]), body.get("createdBefore")
        assert not in_completed(after), body
        assert not any(
            (before is None or a < ns(before)) and (b is None or after < b) for a, b in completed
        ), f"a completed window read again: {body}"
    read = [r["id"] for r in resumed.records["tasks"]]
    assert len(read) == len(set(read))
    assert not [r for r in resumed.records["tasks"] if in_completed(ns(r["createdAt"]))]
    assert set(decided) <= {r["id"] for r in killed}
    truth = {task["id"]: task for task in tenant.dataset.tasks()}
    created_since = {
        i for i, task in truth.items() if service_ns(task["createdAt"]) >= ns(bookmark)
    }
    assert set(read) == {
        i for i in created_since if not in_completed(service_ns(truth[i]["createdAt"]))
    }
    final = resumed.state["bookmarks"]["tasks"]
    assert "backfill" not in final
    # The latest change either part delivered (the decisions, read before the cut), capped.
    latest = max(ns(r["updatedAt"]) for r in killed + resumed.records["tasks"])
    assert ns(final["replication_key_value"]) == min(latest, ns(backfill["since"]))
    assert latest > max(ns(r["updatedAt"]) for r in resumed.records["tasks"])
    warehouse = by_id(first.records["tasks"], killed, resumed.records["tasks"])
    assert warehouse == {task_id: expected(task) for task_id, task in truth.items()}


@pytest.mark.parametrize("concurrency", [2, 4])
def test_concurrent_windows_read_the_same_tasks_as_one_request_at_a_time(
    make_emulator: t.Callable[..., Emulator], concurrency: int
) -> None:
    """Two requests in flight at most is concurrent already (the least ``max_concurrency``
    that is), and reads what one at a time reads; one at a time is the main thread's alone
    (no worker thread for the windows of a first sync)."""
    emu = make_emulator(Dataset(**SMALL_DATASET), latency=0.02)
    in_main: set[bool] = set()
    one = tasks_of(
        task_config(emu, max_concurrency=1),
        on_search=lambda _body: in_main.add(threading.current_thread() is threading.main_thread()),
    )
    assert emu.stats["peak_in_flight"] == 1
    assert in_main == {True}
    emu.reset_stats()
    several = tasks_of(task_config(emu, max_concurrency=concurrency))
    assert 1 < emu.stats["peak_in_flight"] <= concurrency
    assert sorted(r["id"] for r in several.records["tasks"]) == sorted(
        r["id"] for r in one.records["tasks"]
    )
    assert len(one.records["tasks"]) == len(emu.dataset.tasks())


def test_access_reviews_are_a_full_table_snapshot_of_every_review(tenant: Emulator) -> None:
    config = task_config(tenant)
    result = sync(config, catalog=catalog_selecting(config, {"access_reviews": None}))
    records = [
        {k: v for k, v in r.items() if k != "snapshotAt"} for r in result.records["access_reviews"]
    ]
    assert records == [
        {**review, "scopingVersion": int(review["scopingVersion"])}
        for review in tenant.dataset.access_reviews()
    ]
    assert len({r["snapshotAt"] for r in result.records["access_reviews"]}) == 1


def test_an_object_without_an_id_is_skipped_with_a_warning_naming_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The object of each view of a page (a task, an access review, an app entitlement); one
    the service sent without an id cannot be keyed."""
    response = requests.Response()
    response.request = requests.Request("POST", "https://acme.test/api/v1/search/tasks").prepare()
    page = Page(response, {"list": [{"task": {"id": "t1"}}, {"task": {"displayName": "x"}}, {}]})
    logger = logging.getLogger("test_tasks")
    with caplog.at_level(logging.WARNING, logger="test_tasks"):
        assert list(viewed_objects(page, "task", logger)) == [{"id": "t1"}]
    assert [r.getMessage() for r in caplog.records] == [
        "Skipping a task without an id (POST /api/v1/search/tasks)"
    ] * 2


def test_a_task_sent_without_updated_at_counts_by_its_creation(
    tenant: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service that leaves ``updatedAt`` out of tasks never updated (an older release): each
    task is still delivered as sent, and the bookmark is the latest creation; a task sent
    with neither date is delivered and moves nothing."""
    render = served.omitted
    undated = min(tenant.dataset.tasks(), key=lambda task: task["id"])["id"]

    def without_updated_at(task: dict[str, t.Any]) -> dict[str, t.Any]:
        answer = render(task)
        answer.pop("updatedAt", None)
        if answer["id"] == undated:
            answer.pop("createdAt", None)
        return answer

    monkeypatch.setattr(served, "omitted", without_updated_at)
    result = tasks_of(task_config(tenant))
    records = by_id(result.records["tasks"])
    truth = {task["id"]: task for task in tenant.dataset.tasks()}
    assert sorted(records) == sorted(truth)
    assert not any("updatedAt" in record for record in records.values())
    assert "createdAt" not in records[undated]
    latest = max(service_ns(task["createdAt"]) for id_, task in truth.items() if id_ != undated)
    assert ns(result.state["bookmarks"]["tasks"]["replication_key_value"]) == latest


def test_a_tenant_without_tasks_gives_none_and_no_error(
    tenant: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(served.Tasks, "indexed", lambda self: [])
    result = tasks_of(task_config(tenant))
    assert result.records.get("tasks", []) == []
    assert "replication_key_value" not in result.state["bookmarks"].get("tasks", {})


def test_a_service_that_ignores_the_creation_order_loses_no_task(
    tenant: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first sync asks for the earliest task to cut its windows from; a service that
    answers the newest instead: the oldest window is open below, every task still read."""
    monkeypatch.setitem(served.SORTS, "TASK_SEARCH_SORT_BY_CREATED_AT", lambda task: -task.created)
    result = tasks_of(task_config(tenant, max_concurrency=4))
    assert sorted(by_id(result.records["tasks"])) == sorted(
        task["id"] for task in tenant.dataset.tasks()
    )


def test_a_task_sent_without_an_id_is_skipped_with_the_streams_warning(
    tenant: Emulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    render = served.omitted
    nameless = max(tenant.dataset.tasks(), key=lambda task: task["id"])["id"]

    def without_id(task: dict[str, t.Any]) -> dict[str, t.Any]:
        answer = render(task)
        if answer["id"] == nameless:
            answer.pop("id")
        return answer

    monkeypatch.setattr(served, "omitted", without_id)
    with caplog.at_level(logging.WARNING):
        result = tasks_of(task_config(tenant))
    assert sorted(by_id(result.records["tasks"])) == sorted(
        task["id"] for task in tenant.dataset.tasks() if task["id"] != nameless
    )
    warnings = [r for r in caplog.records if "without an id" in r.getMessage()]
    assert [r.getMessage() for r in warnings] == [f"Skipping a task without an id (POST {SEARCH})"]
    assert {r.name for r in warnings} == {"tap-accessgov.tasks"}


def test_an_access_review_sent_without_an_id_is_skipped_with_the_streams_warning(
    tenant: Emulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    render = reviews.AccessReviews.record
    ids = [review["id"] for review in tenant.dataset.access_reviews()]
    nameless = ids[0]

    def without_id(store: reviews.AccessReviews, review: reviews.Review) -> dict[str, t.Any]:
        answer = render(store, review)
        if answer["id"] == nameless:
            answer.pop("id")
        return answer

    monkeypatch.setattr(reviews.AccessReviews, "record", without_id)
    config = task_config(tenant)
    with caplog.at_level(logging.WARNING):
        result = sync(config, catalog=catalog_selecting(config, {"access_reviews": None}))
    assert sorted(r["id"] for r in result.records["access_reviews"]) == sorted(ids[1:])
    warnings = [r for r in caplog.records if "without an id" in r.getMessage()]
    assert [r.getMessage() for r in warnings] == [
        "Skipping an access review without an id (GET /api/v1/access_reviews)"
    ]
    assert {r.name for r in warnings} == {"tap-accessgov.access_reviews"}


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("creation_order", ["as asked", "newest first"])
def test_tasks_created_or_decided_late_at_the_bookmark_instant_come_with_the_next_run(
    make_emulator: t.Callable[..., Emulator],
    monkeypatch: pytest.MonkeyPatch,
    shapes: str,
    creation_order: str,
) -> None:
    """Tasks written after a run but dated at the instant of the last change it delivered
    (created then, or decided then) are read by the next run, each once, whatever the order
    the service answers the creation sort in and the release's shapes."""
    tenant = make_emulator(Dataset(**SMALL_DATASET, ticket_ids="mixed"), shapes=shapes)
    if creation_order == "newest first":
        monkeypatch.setitem(
            served.SORTS, "TASK_SEARCH_SORT_BY_CREATED_AT", lambda task: -task.created
        )
    config = task_config(tenant, max_concurrency=2)
    first = tasks_of(config)
    bookmark = first.state["bookmarks"]["tasks"]["replication_key_value"]
    before = {task["id"] for task in tenant.dataset.tasks()}
    decided = tenant.close_tasks(count=1, at=ns(bookmark))
    tenant.add_events(dates=[bookmark] * 12)
    created = {task["id"] for task in tenant.dataset.tasks()} - before
    late = {
        task["id"]: task
        for task in tenant.dataset.tasks()
        if task["id"] in created or task["id"] in decided
    }
    assert created
    assert decided
    assert all(
        ns(bookmark) in (service_ns(task["createdAt"]), outcome_ns(task)) for task in late.values()
    )
    second = tasks_of(config, state=first.state)
    read = [record["id"] for record in second.records["tasks"]]
    assert all(read.count(task_id) == 1 for task_id in late)
    read_now = by_id(second.records["tasks"])
    assert {task_id: read_now[task_id] for task_id in late} == {
        task_id: expected(task) for task_id, task in late.items()
    }


def test_a_large_window_of_tasks_is_split_while_several_are_read_at_once(
    make_emulator: t.Callable[..., Emulator],
) -> None:
    """The tasks are read by the engine's one range reader, as the grant feed is: a window
    found large while several are read at once is left for pieces of it (read in its place,
    engine/time_ranges.py), and every task is still delivered once."""
    emu = make_emulator(Dataset(**SMALL_DATASET), latency=0.02)
    config = task_config(emu, max_concurrency=4, page_size=10)
    more: dict[tuple[t.Any, ...], bool] = {}  # a query's last page: whether it had a next

    def answered(response: requests.Response, *args: t.Any, **kwargs: t.Any) -> None:
        body = json.loads(response.request.body or "{}")
        if "sortBy" not in body and "outcomeAfter" not in body:
            query = (body.get("createdAfter"), body.get("createdBefore"))
            more[query] = bool(response.json().get("nextPageToken"))

    catalog = catalog_selecting(config, {"tasks": None})
    tap = TapAccessGov(config=config, catalog=catalog, parse_env_config=False)
    tap.streams["tasks"].requests_session.hooks["response"].append(answered)  # type: ignore[attr-defined]
    result = sync(config, tap=tap)
    ids = [task["id"] for task in result.records["tasks"]]
    assert sorted(ids) == sorted(task["id"] for task in emu.dataset.tasks())
    left = [query for query, had_more in more.items() if had_more]
    assert left, "no window was split"
    pieces = [q for q in more if q not in left and any(_within(q, window) for window in left)]
    assert pieces, "no piece read in a split window's place"


def _within(inner: tuple[str | None, str | None], outer: tuple[str | None, str | None]) -> bool:
    """Whether the range ``inner`` (after, before; None: unbounded) lies within ``outer``."""
    (a, b), (c, d) = inner, outer
    return (
        (c is None or (a is not None and ns(a) >= ns(c)))
        and (d is None or (b is not None and ns(b) <= ns(d)))
        and inner != outer
    )
