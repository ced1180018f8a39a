"""The people behind the accounts and the grants the service holds now: ``app_users``,
``users`` (the directory) and ``grants``, each compared with the emulator's ground truth,
on a tenant whose feed begins after many of today's grants were made, before and after
accounts and users are removed between runs."""

from __future__ import annotations

import logging
import threading
import time
import typing as t
from collections import Counter

import pytest
import requests
from singer_sdk.exceptions import FatalAPIError

from emulator import Dataset, Emulator
from tap_accessgov import schemas
from tap_accessgov.paging import QueryPaging, page_body
from tap_accessgov.streams.app_entitlements import AppEntitlementsStream, PerEntitlementStream
from tap_accessgov.streams.grants import GRANT_FIELDS
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    CREDENTIAL,
    SMALL_DATASET,
    SyncResult,
    catalog_selecting,
    listed_exclusion_entitlements,
    ns,
    offline_stream,
    parse_page,
    sync,
    tap_config,
)
from tests.test_streams import exclusion_pages


def app_users_truth(ds: Dataset) -> Counter:
    return Counter(
        (a.app_id, a.app_user_id, a.user_id, a.app_user_type, a.status) for a in ds.app_users()
    )


def app_users_read(result: SyncResult) -> Counter:
    return Counter(
        (
            r["appId"],
            r["id"],
            r.get("identityUserId") or None,
            r["appUserType"],
            (r.get("status") or {}).get("status") or "STATUS_UNSPECIFIED",
        )
        for r in result.records["app_users"]
    )


def grants_truth(ds: Dataset) -> Counter:
    return Counter(
        (
            g.app_id,
            g.app_entitlement_id,
            g.app_user_id,
            g.created_at,
            g.deprovision_at,
            g.sources,
            g.originating_ticket_id,
        )
        for g in ds.current_grants()
    )


def grants_read(result: SyncResult) -> Counter:
    def instant(value: str | None) -> int | None:
        return None if value is None else ns(value)

    return Counter(
        (
            r["appId"],
            r["appEntitlementId"],
            r["appUserId"],
            instant(r.get("appEntitlementUserBindingCreatedAt")),
            instant(r.get("appEntitlementUserBindingDeprovisionAt")),
            tuple((s["appId"], s["id"]) for s in r.get("grantSources") or []),
            r.get("originatingTicketId") or None,
        )
        for r in result.records["grants"]
    )


def users_read(result: SyncResult) -> Counter:
    return Counter(r["id"] for r in result.records["users"])


def users_truth(ds: Dataset) -> Counter:
    """The directory, and the users of the exclusion entries (a subset of it here)."""
    excluded = {
        entry["user"]["id"]
        for app_id, entitlement_id in ds.exclusion_entitlements
        for entry in ds.exclusion_entries(app_id, entitlement_id)
    }
    return Counter({u.user_id for u in ds.directory_users()} | excluded)


@pytest.fixture
def older_grants() -> Emulator:
    """A tenant with as many grants made before the feed as the feed holds events."""
    dataset = Dataset(**SMALL_DATASET, grants_before_feed=SMALL_DATASET["events"])
    with Emulator(dataset, credential=CREDENTIAL) as emulator:
        yield emulator


@pytest.mark.parametrize("emit_unpopulated", [False, True], ids=["omitted", "emitted"])
def test_accounts_directory_and_grants_equal_the_truth_before_and_after_removals(
    older_grants: Emulator, emit_unpopulated: bool
) -> None:
    emulator, ds = older_grants, older_grants.dataset
    emulator.emit_unpopulated = emit_unpopulated
    config = tap_config(emulator) | {"max_concurrency": 4}
    first = sync(config)
    assert app_users_read(first) == app_users_truth(ds)
    assert grants_read(first) == grants_truth(ds)
    assert users_read(first) == users_truth(ds)
    truth = ds.current_grants()
    assert any(not g.feed_knows for g in truth)
    assert any(g.feed_knows for g in truth)
    assert any(a.user_id is None for a in ds.app_users()), "accounts nobody owns"
    assert any(g.deprovision_at for g in truth)
    assert any(g.sources for g in truth)

    # Between runs: an account with grants and a user of the directory are deleted.
    held = truth[0]
    ds.remove(app_id=held.app_id, app_user_id=held.app_user_id)
    gone_user = ds.directory_users()[-1].user_id
    ds.remove(user_id=gone_user)
    second = sync(config)
    assert app_users_read(second) == app_users_truth(ds)
    assert grants_read(second) == grants_truth(ds)
    assert users_read(second) == users_truth(ds)
    assert (held.app_id, held.app_user_id) not in {
        (r["appId"], r["id"]) for r in second.records["app_users"]
    }
    assert gone_user not in users_read(second)
    assert len(second.records["grants"]) < len(first.records["grants"])


def test_concurrency_changes_neither_accounts_nor_grants(emulator: Emulator) -> None:
    one, eight = (sync(tap_config(emulator) | {"max_concurrency": n}) for n in (1, 8))
    ds = emulator.dataset
    # both are the truth, not merely alike (two empty reads are alike too)
    assert app_users_read(one) == app_users_truth(ds)
    assert grants_read(one) == grants_truth(ds)
    assert users_read(one) == users_truth(ds)
    # the directory's users first, each once, in its order (the exclusions' users are among
    # them here): a user the directory lists is not left to the exclusions to deliver
    assert [r["id"] for r in one.records["users"]] == [u.user_id for u in ds.directory_users()]
    for stream in ("app_users", "grants", "users"):
        strip = [{k: v for k, v in r.items() if k != "snapshotAt"} for r in one.records[stream]]
        assert strip == [
            {k: v for k, v in r.items() if k != "snapshotAt"} for r in eight.records[stream]
        ]


def test_grants_are_read_one_search_series_per_app(emulator: Emulator) -> None:
    config = tap_config(emulator) | {"page_size": 100}
    sync(config)
    by_path = emulator.stats["api_requests_by_path"]
    apps = len(emulator.dataset.current_apps())
    assert by_path["/api/v1/search/grants"] >= apps
    # an app whose grants fit one page costs one request: at most one more per 100 grants
    assert by_path["/api/v1/search/grants"] <= apps + len(emulator.dataset.current_grants()) // 100
    assert not any(path.endswith("/users") and "/entitlements/" in path for path in by_path)


def test_a_key_that_may_not_read_the_directory_fails_in_one_line_naming_the_setting(
    emulator: Emulator,
) -> None:
    emulator.faults.add(kind="403", path="/api/v1/users", times=1000)
    with pytest.raises(FatalAPIError) as failed:
        sync(tap_config(emulator))
    message = str(failed.value)
    assert "\n" not in message
    assert "403" in message
    assert message.endswith(
        ". The API key may not read the directory: give it a role that may list users, or "
        "set read_directory: false to keep users to the users of the automation exclusions."
    )
    # With the setting, users are the exclusions' users and the directory is not asked.
    result = sync(tap_config(emulator) | {"read_directory": False})
    excluded = {
        entry["user"]["id"]
        for app_id, entitlement_id in emulator.dataset.exclusion_entitlements
        for entry in emulator.dataset.exclusion_entries(app_id, entitlement_id)
    }
    assert sorted(users_read(result)) == sorted(excluded)
    assert "full_table_snapshots" in result.records


@pytest.mark.parametrize("concurrency", [1, 4])
def test_users_alone_with_a_key_that_may_not_read_the_directory_fails_on_its_first_request(
    emulator: Emulator, concurrency: int
) -> None:
    """``users`` asks for the directory's first page before it lists the catalog for the
    exclusions it reads itself: a 403 there fails the run after that one request, not after
    the catalog's (apps, and every app's entitlements)."""
    emulator.faults.add(kind="403", path="/api/v1/users", times=1000)
    config = tap_config(emulator) | {"max_concurrency": concurrency}
    with pytest.raises(FatalAPIError, match="read_directory: false"):
        sync(config, catalog=catalog_selecting(config, {"users": None}))
    assert emulator.stats["api_requests_by_path"] == {"/api/v1/users": 1}


@pytest.mark.parametrize("concurrency", [2, 4])
def test_users_alone_reads_the_exclusions_while_the_directory_pages_follow_each_other(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, concurrency: int
) -> None:
    """With ``automation_exclusions`` not selected, ``users`` reads the exclusion pages
    itself: in the threads the directory's one page series leaves free, while that series is
    read, not one after the other. The catalog they come from is listed once the directory's
    first page has been asked for, while its next pages are read ahead."""
    emulator.latency = 0.02
    started: list[tuple[str, float]] = []
    answer = emulator.service.answer

    def recording(request: t.Any) -> dict[str, t.Any]:
        started.append((request.path, time.monotonic()))
        if request.path == "/api/v1/users":
            time.sleep(0.05)  # a directory clearly longer than the exclusion pages
        return answer(request)

    monkeypatch.setattr(emulator.service, "answer", recording)
    config = tap_config(emulator) | {"max_concurrency": concurrency, "page_size": 10}
    result = sync(config, catalog=catalog_selecting(config, {"users": None}))
    assert users_read(result) == users_truth(emulator.dataset)
    directory = [at for path, at in started if path == "/api/v1/users"]
    exclusions = [at for path, at in started if path.endswith("/automation/exclusions")]
    assert len(directory) >= 20, "a directory of many pages"
    assert len(exclusions) >= len(emulator.dataset.exclusion_entitlements)
    catalog = [
        at for path, at in started if path.startswith("/api/v1/apps") and at not in exclusions
    ]
    assert min(directory) < min(catalog), "the directory's first page before the catalog"
    # Most exclusion pages are asked for while the directory is read (none were when they were
    # read one after the other): a margin that holds under load, unlike which ends first.
    during = [at for at in exclusions if min(directory) < at < max(directory)]
    assert len(during) >= len(exclusions) / 2, f"{len(during)} of {len(exclusions)} exclusion pages"
    # the directory's series and the exclusions' threads: max_concurrency requests at most
    assert emulator.stats["peak_in_flight"] <= concurrency


@pytest.mark.parametrize(
    ("selected", "read_directory", "concurrency", "exclusion_threads"),
    [
        ("users", True, 1, {"MainThread"}),
        ("users", True, 2, {"prefetch_0"}),
        ("users", True, 3, {"prefetch_0", "prefetch_1"}),
        ("users", False, 2, {"prefetch_0", "prefetch_1"}),
        ("automation_exclusions", True, 2, {"prefetch_0", "prefetch_1"}),
    ],
)
def test_people_are_read_in_worker_threads_only_above_a_concurrency_of_one(
    emulator: Emulator,
    selected: str,
    read_directory: bool,
    concurrency: int,
    exclusion_threads: set[str],
) -> None:
    """``max_concurrency`` 1 reads everything in the main thread, one request after another;
    from 2 the directory's pages are read ahead in a thread of their own, and the exclusion
    pages in the others: one less than the limit, or all of them without the directory, as
    ``automation_exclusions`` alone does (the threads that sent each request, by name: a
    requests response hook; each request slow enough that a thread more would take some)."""
    assert len(emulator.dataset.exclusion_entitlements) >= 2 * concurrency, "pages to share"
    emulator.latency = 0.05
    config = tap_config(emulator) | {
        "max_concurrency": concurrency,
        "page_size": 10,
        "read_directory": read_directory,
    }
    tap = TapAccessGov(
        config=config,
        catalog=catalog_selecting(config, {selected: None}),
        parse_env_config=False,
    )
    threads: dict[str, set[str]] = {"directory": set(), "exclusions": set()}

    def hook(response: requests.Response, *args: t.Any, **kwargs: t.Any) -> None:
        path = response.request.path_url.split("?")[0]
        read = "directory" if path == "/api/v1/users" else "exclusions"
        if read == "directory" or path.endswith("/automation/exclusions"):
            threads[read].add(threading.current_thread().name)

    for stream in ("users", "automation_exclusions"):
        tap.streams[stream].requests_session.hooks["response"].append(hook)  # type: ignore[attr-defined]
    result = sync(config, tap=tap)
    if selected == "users" and read_directory:
        assert users_read(result) == users_truth(emulator.dataset)
    directory_threads = {"MainThread" if concurrency == 1 else "directory_0"}
    assert threads == {
        "directory": directory_threads if selected == "users" and read_directory else set(),
        "exclusions": exclusion_threads,
    }


def test_without_the_directory_users_are_the_exclusions_users_each_once(
    emulator: Emulator,
) -> None:
    """``read_directory: false``: ``users`` is every user of the automation exclusions, found
    partition by partition as the exclusions are read, each once however many entitlements
    exclude them."""
    ds = emulator.dataset
    config = tap_config(emulator) | {"read_directory": False, "max_concurrency": 1}
    # users alone: it reads the exclusions itself (else automation_exclusions, synced before
    # it, would have found their users already)
    result = sync(config, catalog=catalog_selecting(config, {"users": None}))
    assert set(result.records) == {"users"}
    excluded = [
        entry["user"]["id"]
        for app_id, entitlement_id in ds.exclusion_entitlements
        for entry in ds.exclusion_entries(app_id, entitlement_id)
    ]
    assert len(excluded) > len(set(excluded)), "users excluded from several entitlements"
    assert users_read(result) == Counter(set(excluded))


def test_users_read_no_exclusion_again_that_the_run_has_read(emulator: Emulator) -> None:
    """With ``automation_exclusions`` synced before it, ``users`` takes the excluded users it
    found: the exclusions are asked for once a run, as when that stream is read alone."""
    config = tap_config(emulator) | {"read_directory": False}

    def exclusion_requests(streams: dict[str, None]) -> int:
        emulator.reset_stats()
        sync(config, catalog=catalog_selecting(config, streams))
        by_path = emulator.stats["api_requests_by_path"]
        return sum(n for path, n in by_path.items() if path.endswith("/automation/exclusions"))

    alone = exclusion_requests({"automation_exclusions": None})
    assert alone >= len(emulator.dataset.exclusion_entitlements)
    assert exclusion_requests({"automation_exclusions": None, "users": None}) == alone


@pytest.mark.parametrize("read_directory", [True, False])
def test_an_exclusion_partition_the_service_does_not_know_is_asked_for_once_a_run(
    emulator: Emulator, read_directory: bool
) -> None:
    """An exclusion partition ``automation_exclusions`` was answered 404 for (an entitlement
    the service does not know: a warning) counts as read: ``users``, synced after it, does not
    ask for it again, nor for any other partition the run has read (each page once)."""
    ds = emulator.dataset
    config = tap_config(emulator) | {"read_directory": read_directory, "max_concurrency": 4}
    config["exclusion_entitlements"] = listed_exclusion_entitlements(emulator)
    missing = {"app_id": ds.apps[0], "app_entitlement_id": "missing"}
    config["exclusion_entitlements"].insert(1, missing)
    missing_path = f"/api/v1/apps/{ds.apps[0]}/entitlements/missing/automation/exclusions"
    result = sync(
        config, catalog=catalog_selecting(config, {"automation_exclusions": None, "users": None})
    )
    assert set(result.records) == {"automation_exclusions", "users"}
    by_path = emulator.stats["api_requests_by_path"]
    # each other partition's pages once
    pages = {
        f"/api/v1/apps/{app_id}/entitlements/{entitlement_id}/automation/exclusions": (
            exclusion_pages(len(ds.exclusion_entries(app_id, entitlement_id)))
        )
        for app_id, entitlement_id in ds.exclusion_entitlements
    }
    assert len(pages) >= 5
    assert {path: by_path[path] for path in by_path if path.endswith("/exclusions")} == {
        **pages,
        missing_path: 1,
    }


@pytest.mark.parametrize(
    ("stream", "member", "path", "named"),
    [
        ("users", "user", "/api/v1/users", "a user"),
        ("app_users", "appUser", "/api/v1/apps/a1/app_users", "an app user"),
        (
            "app_entitlements",
            "appEntitlement",
            "/api/v1/apps/a1/entitlements",
            "an app entitlement",
        ),
        ("tasks", "task", "/api/v1/search/tasks", "a task"),
        ("access_reviews", "accessReview", "/api/v1/access_reviews", "an access review"),
        ("connectors", "connector", "/api/v1/apps/a1/connectors", "a connector"),
        (
            "app_resource_types",
            "appResourceType",
            "/api/v1/apps/a1/resource_types",
            "an app resource type",
        ),
        (
            "app_resources",
            "appResource",
            "/api/v1/apps/a1/resource_types/t1/resources",
            "an app resource",
        ),
    ],
)
def test_a_viewed_object_without_an_id_is_skipped_with_a_warning_naming_the_call(
    caplog: pytest.LogCaptureFixture, stream: str, member: str, path: str, named: str
) -> None:
    """Each stream that reads a list of views skips an object without an id (it cannot be
    keyed), and says so on its own logger with the call, never the object's values."""
    reader = offline_stream(stream)
    body = {"list": [{member: {"id": "u1", "email": "a@example.com"}}, {member: {"email": "b@x"}}]}
    with caplog.at_level(logging.WARNING):
        read = parse_page(reader, body, f"{path}?page_size=9")
    assert read == [{"id": "u1", "email": "a@example.com"}]
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (reader.logger.name, f"Skipping {named} without an id (GET {path})")
    ]


@pytest.mark.parametrize("missing", ["appId", "appEntitlementId", "appUserId"])
def test_a_grant_without_one_of_its_three_ids_is_skipped_with_a_warning_naming_the_others(
    caplog: pytest.LogCaptureFixture, missing: str
) -> None:
    """A grant is keyed by its app, entitlement and account: one without any of them cannot
    be, and is skipped with a warning naming the app and entitlement it has (never the
    account's or a person's names); the grants with all three are kept whole."""
    stream = offline_stream("grants")
    whole = {
        "appId": "a1",
        "appEntitlementId": "e1",
        "appUserId": "u1",
        "appEntitlementUserBindingCreatedAt": "2026-01-02T03:04:05Z",
        "grantSources": [{"appEntitlementId": "e0"}],
    }
    partial = {key: value for key, value in {**whole, "appUserId": "u2"}.items() if key != missing}
    body = {
        "list": [
            # a field the schema does not have (a newer release's) is not kept
            {
                "appEntitlementUserBinding": {**whole, "somethingNew": 1},
                "appUser": {"displayName": "Ann"},
            },
            {"appEntitlementUserBinding": partial},
            None,
        ]
    }
    with caplog.at_level(logging.WARNING):
        grants = parse_page(stream, body, "/api/v1/search/grants", "POST")
    assert grants == [whole]
    named = {key: partial.get(key) for key in ("appId", "appEntitlementId")}
    skipped = (
        "Skipping a grant without an app, app entitlement or app user id "
        f"(app {named['appId']}, app entitlement {named['appEntitlementId']})"
    )
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (stream.logger.name, skipped),
        (
            stream.logger.name,
            "Skipping a grant without an app, app entitlement or app user id (app None, app entitlement None)",
        ),
    ]


# A new per-entitlement list stream is a declaration: its name, path, keys, schema and how a
# page reads. This one reads the grants entitlement by entitlement (``GET .../users``), as the
# tap once did; the engine lists the partitions, fetches them ahead as the run's concurrency
# allows, pages, retries and makes each record fit the schema.
class EntitlementUsersStream(QueryPaging, PerEntitlementStream):
    name = "entitlement_users"
    path = "/api/v1/apps/{appId}/entitlements/{appEntitlementId}/users"
    primary_keys = ("appId", "appEntitlementId", "appUserId")
    schema = schemas.GRANT

    def parse_response(self, response: requests.Response) -> t.Iterable[dict[str, t.Any]]:
        for view in page_body(response).get("list") or []:
            yield {key: value for key, value in view.items() if key in GRANT_FIELDS}


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_per_entitlement_stream_declared_in_a_few_lines_reads_what_the_service_holds(
    older_grants: Emulator, concurrency: int
) -> None:
    """The declaration above, built on the tap's connection and catalog, reads every grant
    the service holds: the same as the ``grants`` stream's search, at any concurrency."""
    config = tap_config(older_grants) | {"max_concurrency": concurrency}
    tap = TapAccessGov(config=config, parse_env_config=False)
    stream = EntitlementUsersStream(
        tap,
        connection=tap,
        catalog=t.cast("AppEntitlementsStream", tap.streams["app_entitlements"]),
    )
    try:
        records = [
            stream.post_process(record, partition)
            for partition in stream.partitions
            for record in stream.get_records(partition)
        ]
    finally:
        stream.stop_workers()
    assert grants_read(SyncResult(messages=[], records={"grants": records})) == (
        grants_truth(older_grants.dataset)
    )
