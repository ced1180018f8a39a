"""The streams against the emulator's ground truth, record for record."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import math
import typing as t
from collections import Counter

import pytest
import requests
from singer_sdk.exceptions import FatalAPIError

from emulator import Dataset, Emulator
from emulator.feed import ORDERS as FEED_ORDERS
from emulator.shapes import SHAPES
from tap_accessgov.progress import ProgressCounter
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    ROOT,
    SMALL_DATASET,
    STREAMS,
    SyncResult,
    catalog_selecting,
    listed_exclusion_entitlements,
    ns,
    offline_stream,
    parse_page,
    parse_singer,
    shared_emulator,
    sync,
    tap_config,
    without_run,
)

KNOWN_STATUSES = {"UNKNOWN", "ENABLED", "DISABLED", "DELETED"}
KNOWN_EVENT_TYPES = {
    "GRANT_EVENT_TYPE_UNSPECIFIED",
    "GRANT_EVENT_TYPE_ADDED",
    "GRANT_EVENT_TYPE_REMOVED",
}
PRIMARY_KEYS = {
    "grant_feed": ("appId", "appEntitlementId", "appUserId", "eventType", "date"),
    "automation_exclusions": ("appId", "appEntitlementId", "userId"),
    "users": ("id",),
    "apps": ("id",),
    "app_entitlements": ("appId", "id"),
    "app_users": ("appId", "id"),
    "grants": ("appId", "appEntitlementId", "appUserId"),
}


@pytest.fixture(scope="module")
def full_sync() -> SyncResult:
    """One sync of every stream from the shared emulator, with the default settings."""
    return sync(tap_config(shared_emulator()))


def feed_multiset(feeds: list[dict]) -> Counter:
    return Counter(tuple(sorted(feed.items())) for feed in feeds)


def record_key(record: dict[str, t.Any]) -> tuple[t.Any, ...]:
    """A grant feed record's primary key, its date as an instant."""
    return (*(record[k] for k in PRIMARY_KEYS["grant_feed"][:-1]), ns(record["date"]))


def entry_key(entry: dict[str, t.Any]) -> tuple[t.Any, ...]:
    """The same key of a feed entry the emulator holds (an unset event type is unspecified)."""
    feed = entry["feed"]
    event_type = feed.get("eventType") or "GRANT_EVENT_TYPE_UNSPECIFIED"
    return (
        feed["appId"],
        feed["appEntitlementId"],
        feed["appUserId"],
        event_type,
        ns(feed["date"]),
    )


def assert_feed_matches(records: list[dict], expected_entries: list[dict]) -> None:
    assert len(records) == len(expected_entries)
    assert feed_multiset([r["feed"] for r in records]) == feed_multiset(
        [e["feed"] for e in expected_entries]
    )
    for record in records:
        feed = record["feed"]
        assert record["appId"] == feed["appId"]
        assert record["appEntitlementId"] == feed["appEntitlementId"]
        assert record["appUserId"] == feed["appUserId"]
        assert record["eventType"] == feed.get("eventType", "GRANT_EVENT_TYPE_UNSPECIFIED")
        assert ns(record["date"]) == ns(feed["date"])
        assert len(record["date"]) == len("2025-01-01T00:00:00.000000000Z")


def test_grant_feed_equals_ground_truth(full_sync: SyncResult) -> None:
    truth = shared_emulator().dataset.feed_entries()
    assert_feed_matches(full_sync.records["grant_feed"], truth)
    dates = [ns(r["feed"]["date"]) for r in full_sync.records["grant_feed"]]
    assert dates != sorted(dates), "the emulator serves the feed unsorted"
    fractions = Counter(
        len(r["feed"]["date"].split(".")[1]) - 1 if "." in r["feed"]["date"] else 0
        for r in full_sync.records["grant_feed"]
    )
    assert set(fractions) == {0, 3, 6, 9}


def test_unknown_event_types_pass_through(full_sync: SyncResult) -> None:
    types = {r["eventType"] for r in full_sync.records["grant_feed"]}
    assert types - KNOWN_EVENT_TYPES, "the dataset carries event types the tap does not know"
    assert {"GRANT_EVENT_TYPE_ADDED", "GRANT_EVENT_TYPE_REMOVED"} <= types


def test_primary_keys_are_unique_within_a_run(full_sync: SyncResult) -> None:
    for stream, keys in PRIMARY_KEYS.items():
        rows = full_sync.records[stream]
        values = [tuple(row[key] for key in keys) for row in rows]
        assert all(all(v is not None for v in value) for value in values), stream
        duplicates = [value for value, n in Counter(values).items() if n > 1]
        assert not duplicates, f"{stream}: {duplicates[:3]}"


def test_automation_exclusions_equal_ground_truth(full_sync: SyncResult) -> None:
    dataset = shared_emulator().dataset
    expected = Counter()
    sizes = []
    for app_id, entitlement_id in dataset.exclusion_entitlements:
        entries = dataset.exclusion_entries(app_id, entitlement_id)
        sizes.append(len(entries))
        for entry in entries:
            expected[(app_id, entitlement_id, entry["appUserId"], entry["user"]["id"])] += 1
    got = Counter(
        (r["appId"], r["appEntitlementId"], r["appUserId"], r["userId"])
        for r in full_sync.records["automation_exclusions"]
    )
    assert got == expected
    assert 0 in sizes, "an entitlement without exclusions answers list: null"
    assert max(sizes) > 100, "an entitlement spans several pages even at page size 100"


def test_users_are_the_distinct_excluded_users_verbatim(full_sync: SyncResult) -> None:
    dataset = shared_emulator().dataset
    partitions_of_user: dict[str, set] = {}
    for app_id, entitlement_id in dataset.exclusion_entitlements:
        for entry in dataset.exclusion_entries(app_id, entitlement_id):
            partitions_of_user.setdefault(entry["user"]["id"], set()).add((app_id, entitlement_id))
    directory = directory_users(dataset)
    users = full_sync.records["users"]
    assert sorted(u["id"] for u in users) == sorted(directory.keys() | partitions_of_user.keys())
    assert len(directory) > len(partitions_of_user), "the directory adds everyone else"
    assert any(len(p) > 1 for p in partitions_of_user.values()), "users shared by entitlements"
    for user in users:  # unset fields sent empty by the directory, omitted by the exclusions
        assert populated(without_run(user)) == populated(directory[user["id"]])
        if user["id"] in partitions_of_user:
            assert populated(without_run(user)) == populated(dataset.user(user["id"]))
    statuses = {u.get("status") for u in users} | {u.get("directoryStatus") for u in users}
    assert statuses - KNOWN_STATUSES - {None}, "unknown status values pass through"
    assert any(isinstance(u.get("profile"), dict) and u["profile"] for u in users)
    assert any(u.get("emailSources") for u in users)


def test_the_exclusions_request_loop_yields_the_service_entries_unchanged() -> None:
    """No private key travels inside a record: the request loop yields the service's
    exclusion entries as they are (the user inside), and the stream turns each into its
    record and its user in one place."""
    emulator = shared_emulator()
    dataset = emulator.dataset
    tap = TapAccessGov(config=tap_config(emulator), parse_env_config=False)
    exclusions = tap.streams["automation_exclusions"]
    app_id, entitlement_id = max(
        dataset.exclusion_entitlements, key=lambda key: len(dataset.exclusion_entries(*key))
    )
    context = {"appId": app_id, "appEntitlementId": entitlement_id}
    entries = list(exclusions.request_records(context))
    assert entries == dataset.exclusion_entries(app_id, entitlement_id)
    records = list(exclusions.get_records(context))
    assert all(
        set(record) == set(PRIMARY_KEYS["automation_exclusions"]) | {"appUserId"}
        for record in records
    )
    assert [r["userId"] for r in records] == [e["user"]["id"] for e in entries]


@pytest.mark.parametrize(
    "selected", [None, {"grant_feed": None}], ids=["all-streams", "full-table-snapshots-deselected"]
)
def test_a_run_with_nothing_new_ends_with_the_whole_state(
    full_sync: SyncResult, selected: dict[str, None] | None
) -> None:
    """The run itself (not only the command line) ends with a STATE holding the whole state,
    also when full_table_snapshots, the stream that ends the run, is not selected: the SDK
    writes a STATE only when it changed, and a run with nothing new would end on a RECORD."""
    config = tap_config(shared_emulator())
    catalog = None if selected is None else catalog_selecting(config, selected)
    result = sync(config, state=full_sync.state, catalog=catalog)
    assert result.records["grant_feed"], "the bookmark instant is re-read"
    last = result.messages[-1]
    assert last["type"] == "STATE"
    assert last["value"]["bookmarks"]["grant_feed"] == full_sync.state["bookmarks"]["grant_feed"]


def test_the_streams_are_kept_once_in_sync_order() -> None:
    """One dict, made once, in the order sync_all syncs it: by name, full_table_snapshots last."""
    tap = TapAccessGov(config=tap_config(shared_emulator()), parse_env_config=False)
    assert tap.streams is tap.streams
    assert list(tap.streams) == [
        *sorted(name for name in tap.streams if name != "full_table_snapshots"),
        "full_table_snapshots",
    ]


def test_a_record_gives_child_contexts_only_to_a_stream_with_child_streams() -> None:
    """No stream of the tap has SDK child streams (the partitioned streams read their own
    partitions), so a record gives no child context, which the SDK would copy and hand to an
    empty loop; a stream given a child stream gets the SDK's own: the context, else the
    record."""
    apps = offline_stream("apps")
    record = {"id": "app-1", "displayName": "Okta"}
    assert apps.child_streams == []
    assert list(apps.generate_child_contexts(record, None)) == []
    assert list(apps.generate_child_contexts(record, {"app_id": "app-9"})) == []
    apps.child_streams = [offline_stream("app_users")]  # partitioned: its keys are ()
    assert list(apps.generate_child_contexts(record, None)) == [record]
    assert list(apps.generate_child_contexts(record, {"app_id": "app-9"})) == [{"app_id": "app-9"}]


def test_feed_state_is_the_latest_date(full_sync: SyncResult) -> None:
    bookmark = full_sync.state["bookmarks"]["grant_feed"]
    latest = max(full_sync.records["grant_feed"], key=lambda r: ns(r["date"]))
    assert bookmark["replication_key"] == "date"
    assert bookmark["replication_key_value"] == latest["date"]
    assert "progress_markers" not in bookmark


FILTERS = {
    "app_ids": lambda ds: ({"app_ids": ds.apps[:2]}, {"app_ids": ds.apps[:2]}),
    "app_entitlement_refs": lambda ds: (
        {"app_entitlement_refs": [{"app_id": a, "id": e} for a, e in ds.entitlements[:3]]},
        {"app_entitlement_refs": ds.entitlements[:3]},
    ),
    "app_user_refs": lambda ds: (
        {
            "app_user_refs": [
                {"app_id": r["feed"]["appId"], "id": r["feed"]["appUserId"]}
                for r in ds.feed_entries()[:5]
            ]
        },
        {
            "app_user_refs": [
                (r["feed"]["appId"], r["feed"]["appUserId"]) for r in ds.feed_entries()[:5]
            ]
        },
    ),
    "user_ids": lambda ds: (
        {"user_ids": [ds.user_of_app_user(r["feed"]["appUserId"]) for r in ds.feed_entries()[:4]]},
        {"user_ids": [ds.user_of_app_user(r["feed"]["appUserId"]) for r in ds.feed_entries()[:4]]},
    ),
    "dates": lambda ds: (
        {
            "start_date": ds.feed_entries()[300]["feed"]["date"],
            "end_date": ds.feed_entries()[900]["feed"]["date"],
        },
        {
            "after": ds.feed_entries()[300]["feed"]["date"],
            "before": ds.feed_entries()[900]["feed"]["date"],
        },
    ),
    "combined": lambda ds: (
        {"app_ids": ds.apps[1:3], "start_date": ds.feed_entries()[500]["feed"]["date"]},
        {"app_ids": ds.apps[1:3], "after": ds.feed_entries()[500]["feed"]["date"]},
    ),
}


@pytest.mark.parametrize("name", FILTERS)
def test_grant_feed_filters_equal_ground_truth(name: str) -> None:
    emulator = shared_emulator()
    settings, truth_args = FILTERS[name](emulator.dataset)
    config = {**tap_config(emulator), **settings}
    truth = emulator.dataset.feed_entries(**truth_args)
    assert 0 < len(truth) < len(emulator.dataset.feed_entries())
    result = sync(config, catalog=catalog_selecting(config, {"grant_feed": None}))
    assert_feed_matches(result.records.get("grant_feed", []), truth)


@pytest.mark.parametrize("page_size", [10, 100])
def test_page_sizes(emulator: Emulator, page_size: int) -> None:
    # One request at a time (max_concurrency 1), the feed in time windows: every page the
    # size asked for and full, but each query's last; the probes (pages of 10) are not
    # delivered.
    config = {**tap_config(emulator), "page_size": page_size, "max_concurrency": 1}
    tap = TapAccessGov(config=config, parse_env_config=False)
    pages: Counter[tuple[t.Any, ...]] = Counter()

    def seen(response: requests.Response, *args: t.Any, **kwargs: t.Any) -> None:
        body = json.loads(response.request.body or "{}")
        answer = response.json()
        full = len(answer["list"]) == body.get("pageSize")
        pages[(body.get("pageSize"), full, bool(answer.get("nextPageToken")))] += 1

    tap.streams["grant_feed"].requests_session.hooks["response"].append(seen)  # type: ignore[attr-defined]
    result = sync(config, catalog=catalog_selecting(config, {"grant_feed": None}), tap=tap)
    truth = emulator.dataset.feed_entries()
    assert_feed_matches(result.records["grant_feed"], truth)
    assert {size for size, _, _ in pages} <= {page_size, 10}
    assert not [query for query, n in pages.items() if query[2] and not query[1]]  # part, more
    delivered = sum(n for (size, _, _), n in pages.items() if size == page_size)
    assert delivered < math.ceil(len(truth) / page_size) * 1.5


def test_expand_mask_puts_the_related_objects_into_each_record() -> None:
    emulator = shared_emulator()
    config = {
        **tap_config(emulator),
        "expand_mask": ["app_id", "app_entitlement_id", "app_user_id", "ticket_id"],
        "app_ids": emulator.dataset.apps[:1],
    }
    result = sync(config, catalog=catalog_selecting(config, {"grant_feed": None}))
    records = result.records["grant_feed"]
    assert_feed_matches(records, emulator.dataset.feed_entries(app_ids=emulator.dataset.apps[:1]))
    with_ticket = 0
    for record in records:
        assert record["app"]["id"] == record["appId"]
        assert record["app"]["@type"].endswith(".App")
        assert record["entitlement"]["id"] == record["appEntitlementId"]
        assert record["entitlement"]["@type"].endswith(".AppEntitlement")
        assert record["appUser"]["id"] == record["appUserId"]
        assert record["appUser"]["@type"].endswith(".AppUser")
        assert record["appPath"].startswith("$.expanded[")
        if "ticketId" in record["feed"]:
            with_ticket += 1
            assert record["ticket"]["id"] == record["feed"]["ticketId"]
            assert record["ticket"]["@type"].endswith(".Ticket")
        else:
            assert record.get("ticket") is None
    assert 0 < with_ticket < len(records)


EXPANSIONS = {"appPath", "appUserPath", "entitlementPath", "ticketPath"} | {
    "app",
    "appUser",
    "entitlement",
    "ticket",
}


def test_without_expand_mask_no_objects_are_added_nor_declared(full_sync: SyncResult) -> None:
    """Without a mask no entry has an expanded object: the SCHEMA declares none (each would
    be a column of nulls in the warehouse), and no record holds one."""
    assert not EXPANSIONS & set(full_sync.schemas["grant_feed"]["properties"])
    assert not any(EXPANSIONS & set(record) for record in full_sync.records["grant_feed"])
    masked = offline_stream("grant_feed", expand_mask=["*"])
    assert set(masked.schema["properties"]) >= EXPANSIONS


def test_paths_sent_without_a_mask_are_not_resolved(caplog: pytest.LogCaptureFixture) -> None:
    """An entry that names an expanded object where no mask asked for one (the schema
    declares none) is read without it."""
    feed = {"appId": "a", "appEntitlementId": "e", "appUserId": "u", "date": "2024-03-05T06:07:08Z"}
    body = {"list": [{"feed": feed, "appPath": "$.expanded[0]"}], "expanded": [{"id": "a"}]}
    with caplog.at_level(logging.WARNING):
        (record,) = parse_page(offline_stream("grant_feed"), body, "/api/v1/grants/feed", "POST")
    assert not EXPANSIONS & set(record)
    assert caplog.messages == []  # no object was asked for: none is missed


def exclusion_pages(entries: int, page_size: int = 100) -> int:
    """The requests an entitlement's ``entries`` exclusions take: the first without paging
    parameters (25 results), then pages of page_size."""
    return 1 + max(0, math.ceil((entries - 25) / page_size))


def expected_exclusion_requests(emulator: Emulator, page_size: int = 100) -> int:
    """One entitlement after another of those with automation on (``exclusion_pages``)."""
    return sum(
        exclusion_pages(len(emulator.dataset.exclusion_entries(app_id, entitlement_id)), page_size)
        for app_id, entitlement_id in emulator.dataset.automated_entitlements
    )


def exclusion_requests(emulator: Emulator) -> int:
    return sum(
        n
        for path, n in emulator.stats["api_requests_by_path"].items()
        if path.endswith("/exclusions")
    )


@pytest.mark.parametrize(
    "selected",
    [("automation_exclusions", "users"), ("users",), ("automation_exclusions",)],
)
def test_each_exclusion_page_is_fetched_once(emulator: Emulator, selected: tuple[str, ...]) -> None:
    config = tap_config(emulator) | {"read_directory": False}
    result = sync(config, catalog=catalog_selecting(config, dict.fromkeys(selected)))
    assert set(result.records) == set(selected)
    assert exclusion_requests(emulator) == expected_exclusion_requests(emulator)
    if "users" in selected:
        expected_users = {
            entry["user"]["id"]
            for app_id, entitlement_id in emulator.dataset.exclusion_entitlements
            for entry in emulator.dataset.exclusion_entries(app_id, entitlement_id)
        }
        assert sorted(u["id"] for u in result.records["users"]) == sorted(expected_users)


def test_unknown_entitlement_is_a_warning_and_the_others_are_extracted(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    config = tap_config(emulator)
    app_id = emulator.dataset.apps[0]
    config["exclusion_entitlements"] = listed_exclusion_entitlements(emulator)
    config["exclusion_entitlements"].insert(1, {"app_id": app_id, "app_entitlement_id": "missing"})
    with caplog.at_level(logging.WARNING):
        result = sync(config, catalog=catalog_selecting(config, {"automation_exclusions": None}))
    expected = sum(
        len(emulator.dataset.exclusion_entries(a, e))
        for a, e in emulator.dataset.exclusion_entitlements
    )
    assert len(result.records["automation_exclusions"]) == expected
    warnings = [r.getMessage() for r in caplog.records if "missing" in r.getMessage()]
    assert len(warnings) == 1
    assert f"app entitlement missing of app {app_id}" in warnings[0]
    assert "404" in warnings[0]


def test_no_exclusion_entitlements_configured(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """An empty ``exclusion_entitlements``: no exclusion is asked for, and the log says so."""
    config = {**tap_config(emulator), "exclusion_entitlements": [], "read_directory": False}
    with caplog.at_level(logging.INFO):
        result = sync(
            config,
            catalog=catalog_selecting(config, {"automation_exclusions": None, "users": None}),
        )
    assert not result.records
    assert exclusion_requests(emulator) == 0
    said = [m for m in caplog.messages if "app entitlement to read" in m.lower()]
    assert said == ["No app entitlement to read automation exclusions of"]


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("order", FEED_ORDERS)
def test_incremental_sync_gets_every_new_event_and_only_rereads_the_bookmark_instant(
    make_emulator: t.Callable[..., Emulator], order: str, shapes: str
) -> None:
    """Every new event, and one logged late at the bookmark's instant, in every order the
    feed may answer and every release's shapes; only that instant's events are read again."""
    emulator = make_emulator(Dataset(**SMALL_DATASET, order=order), shapes=shapes)
    config = tap_config(emulator)
    catalog = catalog_selecting(config, {"grant_feed": None})
    first = sync(config, catalog=catalog)
    bookmark = first.state["bookmarks"]["grant_feed"]["replication_key_value"]
    at_bookmark = [r for r in first.records["grant_feed"] if ns(r["date"]) == ns(bookmark)]
    assert at_bookmark

    before = emulator.dataset.total
    emulator.add_events(dates=[bookmark])  # a late event at exactly the bookmark instant
    emulator.add_events(count=40)
    new_entries = emulator.dataset.feed_entries()[before:]
    assert len(new_entries) == 41

    second = sync(config, catalog=catalog, state=first.state)
    got = second.records["grant_feed"]
    # by key (the release's shapes change how a feed object is sent, not what it says)
    assert Counter(map(record_key, got)) == Counter(
        [entry_key(e) for e in new_entries] + [record_key(r) for r in at_bookmark]
    )
    assert second.state["bookmarks"]["grant_feed"]["replication_key_value"] == max(
        (r["date"] for r in got), key=ns
    )

    third = sync(config, catalog=catalog, state=second.state)
    newest = ns(second.state["bookmarks"]["grant_feed"]["replication_key_value"])
    assert all(ns(r["date"]) == newest for r in third.records["grant_feed"])


def test_deselected_property_is_not_emitted() -> None:
    emulator = shared_emulator()
    config = {**tap_config(emulator), "app_ids": emulator.dataset.apps[:1]}
    catalog = catalog_selecting(config, {"grant_feed": ["feed"], "users": ["displayName"]})
    result = sync(config, catalog=catalog)
    record = result.records["grant_feed"][0]
    assert "feed" in record
    assert "appPath" not in result.schemas["grant_feed"]["properties"]
    assert set(record) <= {"feed", *PRIMARY_KEYS["grant_feed"]}
    assert set(result.records["users"][0]) <= {"id", "displayName", "snapshotAt"}
    assert "automation_exclusions" not in result.records


@pytest.mark.parametrize(
    "selected",
    [
        {"automation_exclusions": None, "users": None},
        {"users": None},
        {"app_entitlements": None},
    ],
    ids=["both", "users-only", "app-entitlements"],
)
def test_concurrency_changes_nothing_in_the_output(selected: dict) -> None:
    emulator = shared_emulator()
    outputs = []
    for workers in (1, 8):
        config = {**tap_config(emulator), "max_concurrency": workers}
        result = sync(config, catalog=catalog_selecting(config, selected))
        outputs.append(
            [
                (m["type"], m.get("stream"), without_run(m.get("record") or {}))
                for m in result.messages
                if m["type"] != "STATE"
            ]
        )
    assert outputs[0] == outputs[1]
    assert len(outputs[0]) > (1000 if "automation_exclusions" in selected else 200)


@pytest.mark.parametrize("workers", [1, 8])
def test_a_failing_entitlement_fails_the_run_with_or_without_concurrency(
    emulator: Emulator, workers: int
) -> None:
    app_id, entitlement_id = emulator.dataset.exclusion_entitlements[3]
    path = f"/api/v1/apps/{app_id}/entitlements/{entitlement_id}/automation/exclusions"
    emulator.faults.add(kind="403", path=path, times=1)
    config = {**tap_config(emulator), "max_concurrency": workers}
    with pytest.raises(FatalAPIError, match=f"GET {path} answered 403: permission denied"):
        sync(config, catalog=catalog_selecting(config, {"automation_exclusions": None}))


def test_unknown_user_fields_are_dropped_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    from tap_accessgov.tap import TapAccessGov

    tap = TapAccessGov(config=tap_config(shared_emulator()), parse_env_config=False)
    users = tap.streams["users"]
    with caplog.at_level(logging.WARNING):
        rows = [
            users.post_process({"id": f"u{n}", "email": "a@b", "pronouns": "they", "badge": 1})
            for n in range(5)
        ]
    snapshot_at = users.snapshot_at
    assert rows == [{"id": f"u{n}", "email": "a@b", "snapshotAt": snapshot_at} for n in range(5)]
    warnings = [r.getMessage() for r in caplog.records if "does not know yet" in r.getMessage()]
    assert warnings == [
        "The service sent fields this tap does not know yet (users); they are not extracted: "
        "badge, pronouns"
    ]


def test_each_stream_says_how_many_records_it_extracted(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        result = sync(tap_config(emulator))
    messages = [r.getMessage() for r in caplog.records]
    for stream in STREAMS:
        total = f"{len(result.records[stream]):,}"
        assert sum(m.startswith(f"{stream}: {total} records in ") for m in messages) == 1


def test_progress_lines_carry_the_running_total_and_a_failed_sync_claims_no_total(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("tap-accessgov.test-progress")

    def count_three_then_fail() -> None:
        with ProgressCounter("s", logger, 0.0, None) as counter:
            for _ in range(3):
                counter.increment()
            raise RuntimeError

    with caplog.at_level(logging.INFO, logger=logger.name), pytest.raises(RuntimeError):
        count_three_then_fail()
    messages = [r.getMessage().split(" (")[0] for r in caplog.records if r.name == logger.name]
    assert messages == [f"s: {n} records so far" for n in (1, 2, 3)]


def test_stream_maps_and_flattening_apply_to_the_tap_output(full_sync: SyncResult) -> None:
    """The SDK's mapper runs on what this tap builds (its own records, the users child)."""
    config = {
        **tap_config(shared_emulator()),
        "stream_maps": {
            "users": {"email": "md5(record['email']) if record.get('email') else None"},
            "grant_feed": {"__filter__": "eventType == 'GRANT_EVENT_TYPE_ADDED'"},
        },
        "flattening_enabled": True,
        "flattening_max_depth": 1,
    }
    mapped = sync(config)
    added = [r for r in full_sync.records["grant_feed"] if r["eventType"].endswith("_ADDED")]
    assert 0 < len(added) < len(full_sync.records["grant_feed"])
    assert sorted(r["feed__date"] for r in mapped.records["grant_feed"]) == sorted(
        r["feed"]["date"] for r in added
    )
    assert "feed" not in mapped.schemas["grant_feed"]["properties"]
    assert "feed__date" in mapped.schemas["grant_feed"]["properties"]
    emails = {u["id"]: u.get("email") for u in full_sync.records["users"]}
    assert {u["id"]: u["email"] for u in mapped.records["users"]} == {
        user_id: hashlib.md5(email.encode()).hexdigest() if email else None
        for user_id, email in emails.items()
    }
    assert mapped.counts()["automation_exclusions"] == full_sync.counts()["automation_exclusions"]


def distinct_excluded_users(emulator: Emulator) -> dict[str, dict]:
    """Every distinct user of the service's exclusion entries, by id (ground truth)."""
    dataset = emulator.dataset
    return {
        entry["user"]["id"]: entry["user"]
        for app_id, entitlement_id in dataset.exclusion_entitlements
        for entry in dataset.exclusion_entries(app_id, entitlement_id)
    }


def populated(record: dict) -> dict:
    """A record without its unset fields (absent, null, empty or the enum zero UNKNOWN: the
    service sends either)."""
    return {
        name: value for name, value in record.items() if value not in (None, "", [], {}, "UNKNOWN")
    }


def directory_users(dataset: Dataset) -> dict[str, dict]:
    """Every user the directory lists now, by id (ground truth)."""
    records = (dataset.directory.record(u) for u in dataset.directory.listed())
    return {user["id"]: user for user in records}


def test_users_survive_a_filter_on_automation_exclusions_and_maps_on_users_apply() -> None:
    """A ``__filter__`` dropping the first exclusion row of every entitlement (which once
    carried its page's users into the child stream) loses no user; a map on ``users``
    still applies to ``users``."""
    emulator = shared_emulator()
    dataset = emulator.dataset
    first_rows = [
        f"{app_id}/{entitlement_id}/{entries[0]['user']['id']}"
        for app_id, entitlement_id in dataset.exclusion_entitlements
        if (entries := dataset.exclusion_entries(app_id, entitlement_id))
    ]
    config = {
        **tap_config(emulator),
        "read_directory": False,  # users are then the exclusions' users alone
        "stream_map_config": {"first_rows": first_rows},
        "stream_maps": {
            "automation_exclusions": {
                "__filter__": "appId + '/' + appEntitlementId + '/' + userId "
                "not in config['first_rows']"
            },
            "users": {"email": "md5(record['email']) if record.get('email') else None"},
        },
    }
    for workers in (1, 8):
        result = sync({**config, "max_concurrency": workers})
        kept = {
            f"{r['appId']}/{r['appEntitlementId']}/{r['userId']}"
            for r in result.records["automation_exclusions"]
        }
        assert len(first_rows) > 5
        assert not kept & set(first_rows), "the filter applies to automation_exclusions"
        truth = distinct_excluded_users(emulator)
        users = result.records["users"]
        assert sorted(u["id"] for u in users) == sorted(truth)
        for user in users:
            email = truth[user["id"]].get("email")
            assert user["email"] == (hashlib.md5(email.encode()).hexdigest() if email else None)


@pytest.mark.parametrize(
    "selected",
    [("automation_exclusions", "users"), ("users",)],
)
def test_one_users_schema_per_run(emulator: Emulator, selected: tuple[str, ...]) -> None:
    config = tap_config(emulator) | {"read_directory": False}
    result = sync(config, catalog=catalog_selecting(config, dict.fromkeys(selected)))
    schemas = [m for m in result.messages if m["type"] == "SCHEMA" and m["stream"] == "users"]
    assert len(schemas) == 1
    assert len(result.records["users"]) == len(distinct_excluded_users(emulator))


def test_a_gateway_ignoring_the_exclusions_page_token_costs_a_warning_not_the_run(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """Each entitlement keeps its first page (no record twice), is named in a warning, and
    the others are still extracted."""
    emulator.exclusions_ignore_page_token = True
    dataset = emulator.dataset
    config = {**tap_config(emulator), "max_concurrency": 4, "read_directory": False}
    with caplog.at_level(logging.WARNING):
        result = sync(
            config,
            catalog=catalog_selecting(config, {"automation_exclusions": None, "users": None}),
        )
    expected, paged = Counter(), []
    for app_id, entitlement_id in dataset.exclusion_entitlements:
        entries = dataset.exclusion_entries(app_id, entitlement_id)
        if len(entries) > 25:
            paged.append((app_id, entitlement_id))
        for entry in entries[:25]:  # the first page, at the service's default page size
            expected[(app_id, entitlement_id, entry["user"]["id"])] += 1
    got = Counter(
        (r["appId"], r["appEntitlementId"], r["userId"])
        for r in result.records["automation_exclusions"]
    )
    assert got == expected
    assert 0 < len(paged) < len(dataset.exclusion_entitlements)
    warnings = [r.getMessage() for r in caplog.records if "already returned" in r.getMessage()]
    assert sorted(warnings) == sorted(
        f"App entitlement {entitlement_id} of app {app_id}: the service answered a page token "
        "with a token it had already returned (it may ignore page_token on this endpoint); "
        "keeping the 25 exclusions read so far and going on with the other entitlements"
        for app_id, entitlement_id in paged
    )
    assert sorted(u["id"] for u in result.records["users"]) == sorted({k[2] for k in expected})


def test_a_repeated_grant_feed_page_token_still_fails_the_run(emulator: Emulator) -> None:
    """On the feed, which declares its paging, a repeated token means a broken cursor."""
    from tap_accessgov.paging import NextPageTokenPaginator, Page

    paginator = NextPageTokenPaginator()
    response = requests.Response()
    response.status_code = 200
    response._content = b'{"list": [], "nextPageToken": "t1"}'
    response.request = requests.Request("POST", emulator.url + "/api/v1/grants/feed").prepare()
    page = Page.read(response)
    assert paginator.get_next(page) == "t1"
    with pytest.raises(FatalAPIError, match="returned a page token it had already returned"):
        paginator.get_next(page)


def readme_pseudonymisation_example() -> dict:
    """The stream-maps settings of the pseudonymisation example (docs/configuration.md), as
    written."""
    doc = (ROOT / "docs" / "configuration.md").read_text()
    marker = doc.index("<!-- pseudonymisation example:")
    block = doc[marker:].split("```json\n", 1)[1].split("```", 1)[0]
    return json.loads("{" + block + "}")


def test_the_readme_pseudonymisation_example_leaves_no_personal_value_in_clear() -> None:
    from tests.test_privacy import PERSONAL_FIELDS, found_in, personal_values

    emulator = shared_emulator()
    settings = readme_pseudonymisation_example()
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out):
        TapAccessGov(config={**tap_config(emulator), **settings}).sync_all()
    out.flush()
    text = out.buffer.getvalue().decode()  # type: ignore[attr-defined]
    result = parse_singer(text)
    dataset = emulator.dataset
    truth = directory_users(dataset)
    accounts = [
        dataset.accounts.app_user(a, n)
        for a in range(len(dataset.apps))
        for n in dataset.accounts.listed(a)
    ]
    values = set().union(*(personal_values(user) for user in [*truth.values(), *accounts]))
    # A *Sources entry repeats a value of its user; those of the fields the example keeps
    # (ids, department, job title, statuses) are not personal values and stay in clear.
    kept = {
        value
        for user in truth.values()
        for name, field in user.items()
        if name not in PERSONAL_FIELDS and not name.endswith("Sources")
        for value in (
            [field] if isinstance(field, str) else field if isinstance(field, list) else []
        )
    }
    values -= kept
    assert len(values) > 500
    assert not found_in(text, values)
    users = {u["id"]: u for u in result.records["users"]}
    assert set(users) == set(truth)
    for user_id, user in users.items():
        email = truth[user_id].get("email")
        assert user["email"] == (hashlib.sha256(email.encode()).hexdigest() if email else None)
        emails = json.loads(user["emails"])  # flattening writes arrays as JSON text
        assert emails == [
            hashlib.sha256(e.encode()).hexdigest() for e in truth[user_id].get("emails") or []
        ]
        assert "profile" not in user
        assert not [name for name in user if name.endswith("Sources")]
    assert "profile" not in result.schemas["users"]["properties"]


def test_expanded_paths_that_point_nowhere_are_said_and_left_null(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A path outside the page's ``expanded`` (past its end, at its end, not a path into it)
    leaves the object null with a warning naming the path; each object no entry references
    is counted once per page."""
    stream = offline_stream("grant_feed", expand_mask=["*"])

    def entry(n: int, **paths: str) -> dict:
        feed = {"appId": "a", "appEntitlementId": "e", "appUserId": f"u{n}"}
        return {"feed": {**feed, "date": f"2024-03-05T06:07:0{n}Z"}, **paths}

    expanded = [{"@type": "App", "id": "a"}, {"@type": "AppUser", "id": "u1"}, {"@type": "X"}]
    body = {
        "list": [
            entry(0, appPath="$.expanded[0]", appUserPath="$.expanded[3]"),
            entry(1, appUserPath="$.expanded[1]", entitlementPath="$.list[0]"),
            entry(2, ticketPath="$.expanded[9]"),
        ],
        "expanded": expanded,
    }
    with caplog.at_level(logging.WARNING):
        records = parse_page(stream, body, "/api/v1/grants/feed", "POST")
    assert [
        (r.get("app"), r.get("appUser"), r.get("entitlement"), r.get("ticket")) for r in records
    ] == [
        (expanded[0], None, None, None),
        (None, expanded[1], None, None),
        (None, None, None, None),
    ]
    assert records[0]["appUserPath"] == "$.expanded[3]"
    assert caplog.messages == [
        "Grant feed path '$.expanded[3]' does not point into the page's expanded",
        "Grant feed path '$.list[0]' does not point into the page's expanded",
        "Grant feed path '$.expanded[9]' does not point into the page's expanded",
        "1 expanded object(s) on a grant feed page are referenced by no entry",
    ]


def test_a_page_whose_expanded_objects_are_all_referenced_warns_of_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every object of ``expanded`` referenced by an entry: no warning, not one of none."""
    feed = {"appId": "a", "appEntitlementId": "e", "appUserId": "u", "date": "2024-03-05T06:07:08Z"}
    body = {
        "list": [{"feed": feed, "appPath": "$.expanded[0]", "appUserPath": "$.expanded[1]"}],
        "expanded": [{"@type": "App", "id": "a"}, {"@type": "AppUser", "id": "u"}],
    }
    with caplog.at_level(logging.WARNING):
        stream = offline_stream("grant_feed", expand_mask=["*"])
        records = parse_page(stream, body, "/api/v1/grants/feed", "POST")
    assert [(r["app"]["id"], r["appUser"]["id"]) for r in records] == [("a", "u")]
    assert caplog.messages == []


@pytest.mark.parametrize("date", [None, "", "not a date", 20240305])
def test_an_entry_without_a_readable_date_stops_the_run_naming_the_entry(
    date: t.Any,
) -> None:
    """The feed's date is its replication key: an entry without one readable cannot be
    placed, and the run stops with the entry as the service sent it (ids, no person's data:
    the expanded objects are not in it) rather than deliver an event it cannot bookmark."""
    feed = {"appId": "a", "appEntitlementId": "e", "appUserId": "u", "date": date}
    if date is None:
        del feed["date"]
    body = {"list": [{"feed": feed}]}
    with pytest.raises(FatalAPIError) as failed:
        parse_page(offline_stream("grant_feed"), body, "/api/v1/grants/feed", "POST")
    assert str(failed.value) == (
        f"a grant feed entry has no readable feed.date: {{'feed': {feed!r}}}"
    )
