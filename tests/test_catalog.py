"""The tenant's catalog (apps, app entitlements) and the exclusions found through it, against
the emulator's ground truth; and the same answers whether the service omits unset fields or
sends them empty."""

from __future__ import annotations

import json
import logging
import typing as t
from datetime import UTC, datetime, timedelta

import pytest

from emulator import Dataset, Emulator, service
from emulator.catalog import app_entitlement_object, app_object
from tap_accessgov.engine.read_once import ReadOnce
from tests.conftest import (
    CREDENTIAL,
    SMALL_DATASET,
    catalog_selecting,
    listed_exclusion_entitlements,
    logged_before,
    shared_emulator,
    sync,
    tap_config,
    without_run,
)

INT64 = {"userCount", "grantCount"}


def as_records(obj: dict) -> dict:
    """What the tap must emit for one of the service's objects: unset fields aside, the same
    values, int64 strings as integers."""
    return {
        key: int(value) if key in INT64 else value
        for key, value in obj.items()
        if value not in (None, "", [], {}) or key == "durationUnset"
    }


def populated(record: dict) -> dict:
    """A record without its unset fields (zero values, enum zero values)."""
    return {
        key: value
        for key, value in record.items()
        if not (
            value in (None, "", [], {}, False, 0)
            or (isinstance(value, str) and value.endswith("_UNSPECIFIED"))
        )
        or key == "durationUnset"
    }


def requests_to(emulator: Emulator, suffix: str) -> int:
    return sum(
        n for path, n in emulator.stats["api_requests_by_path"].items() if path.endswith(suffix)
    )


def app_pages(ds: Dataset) -> int:
    """The pages of the catalog's apps, 100 a page: what one read of the catalog requests."""
    return -(-len(ds.catalog_apps) // 100)


@pytest.fixture(scope="module")
def catalog_sync():
    emulator = shared_emulator()
    config = tap_config(emulator)
    selected = {"apps": None, "app_entitlements": None, "automation_exclusions": None}
    return sync(config, catalog=catalog_selecting(config, selected))


def test_apps_equal_the_catalog() -> None:
    """A catalog of the default size (the test tenants' are smaller: conftest's
    TEST_CATALOG_APPS), more apps than a page holds."""
    ds = Dataset(**(SMALL_DATASET | {"catalog_apps": 120}))
    with Emulator(ds, credential=CREDENTIAL) as emulator:
        config = tap_config(emulator)
        records = sync(config, catalog=catalog_selecting(config, {"apps": None})).records["apps"]
        assert requests_to(emulator, "/api/v1/apps") == 2  # 120 apps, 100 a page
    assert len(records) == len(ds.catalog_apps) > 100
    expected = [populated(as_records(app_object(ds, p))) for p in range(len(ds.catalog_apps))]
    assert [populated(without_run(r)) for r in records] == expected
    assert all(isinstance(r["userCount"], int) for r in records if "userCount" in r)


def test_app_entitlements_equal_the_catalog(catalog_sync) -> None:
    ds = shared_emulator().dataset
    expected = [
        populated(as_records(app_entitlement_object(ds, p, k)))
        for p, app in enumerate(ds.catalog_apps)
        for k in range(len(app.entitlement_ids))
    ]
    records = catalog_sync.records["app_entitlements"]
    assert [populated(without_run(r)) for r in records] == expected
    # an entitlement id shared by two apps is two records, keyed by (appId, id)
    shared = ds.catalog_apps[0].entitlement_ids[0]
    assert len({r["appId"] for r in records if r["id"] == shared}) == 2
    # enum values newer than the tap pass through
    assert "APP_ENTITLEMENT_PURPOSE_VALUE_DELEGATION" in {r.get("purpose") for r in records}
    # one state for each partitioned stream, none per partition (an app, an entitlement)
    bookmarks = catalog_sync.state["bookmarks"]
    assert {"app_entitlements", "automation_exclusions"} <= set(bookmarks)
    assert not [stream for stream, state in bookmarks.items() if "partitions" in state]


def test_exclusions_of_every_automated_entitlement_are_found_by_themselves(catalog_sync) -> None:
    ds = shared_emulator().dataset
    expected = sorted(
        (entry["appId"], entry["appEntitlementId"], entry["user"]["id"])
        for key in ds.automated_entitlements
        for entry in ds.exclusion_entries(*key)
    )
    got = sorted(
        (r["appId"], r["appEntitlementId"], r["userId"])
        for r in catalog_sync.records["automation_exclusions"]
    )
    assert got == expected
    assert {(a, e) for a, e, _ in got} == {
        key for key in ds.exclusion_entitlements if ds.exclusion_entries(*key)
    }


@pytest.mark.parametrize(
    ("scope", "wanted"),
    [("automated", "automated_entitlements"), ("all", "entitlements_of_the_catalog")],
)
def test_exclusions_are_requested_for_the_entitlements_the_scope_names(
    emulator: Emulator, scope: str, wanted: str
) -> None:
    ds = emulator.dataset
    config = {**tap_config(emulator), "exclusion_scope": scope}
    sync(config, catalog=catalog_selecting(config, {"automation_exclusions": None}))
    every = [(app.id, ent) for app in ds.catalog_apps for ent in app.entitlement_ids]
    keys = ds.automated_entitlements if wanted == "automated_entitlements" else every
    # the first request of each entitlement, plus the pages beyond the first 25 exclusions
    pages = sum(1 + max(0, -(-(len(ds.exclusion_entries(*k)) - 25) // 100)) for k in keys)
    assert requests_to(emulator, "/automation/exclusions") == pages
    # the catalog was read once although neither of its streams was selected
    assert requests_to(emulator, "/api/v1/apps") == app_pages(ds)
    assert requests_to(emulator, "/entitlements") == sum(
        max(1, -(-len(app.entitlement_ids) // 100)) for app in ds.catalog_apps
    )


@pytest.mark.parametrize(
    "selected",
    [
        ("users",),
        ("apps", "automation_exclusions"),
        ("app_entitlements", "users"),
        ("apps",),
        ("apps", "app_entitlements"),  # the SDK syncs app_entitlements first (by name)
    ],
)
def test_the_catalog_is_read_once_whatever_is_selected(
    emulator: Emulator, selected: tuple[str, ...]
) -> None:
    ds = emulator.dataset
    config = tap_config(emulator)
    result = sync(config, catalog=catalog_selecting(config, dict.fromkeys(selected)))
    assert set(result.records) == set(selected)
    assert requests_to(emulator, "/api/v1/apps") == app_pages(ds)
    wanted = 0 if selected == ("apps",) else len(ds.catalog_apps) + 2  # the 230 of one app
    assert requests_to(emulator, "/entitlements") == wanted


def test_listed_exclusion_entitlements_read_no_catalog(emulator: Emulator) -> None:
    config = {
        **tap_config(emulator),
        "exclusion_entitlements": listed_exclusion_entitlements(emulator),
    }
    result = sync(config, catalog=catalog_selecting(config, {"automation_exclusions": None}))
    assert result.records["automation_exclusions"]
    assert requests_to(emulator, "/api/v1/apps") == 0
    assert requests_to(emulator, "/entitlements") == 0


def test_entitlements_of_many_apps_are_fetched_concurrently() -> None:
    """Counted at the service, not timed (a shared machine's load would decide a speed-up):
    the most requests it was answering at once, with each answer held 100 ms."""
    dataset = Dataset(**(SMALL_DATASET | {"catalog_apps": 40}))
    at_once = {}
    with Emulator(dataset, credential=CREDENTIAL, latency=0.1) as emulator:
        for workers in (1, 8):
            config = {**tap_config(emulator), "max_concurrency": workers}
            catalog = catalog_selecting(config, {"app_entitlements": None})
            emulator.reset_stats()
            sync(config, catalog=catalog)
            at_once[workers] = emulator.stats["peak_in_flight"]
    # One at a time when told so; several of the 40 apps at a time when allowed eight, never
    # more (on an idle machine all eight; a loaded one may send fewer before answers return).
    assert at_once[1] == 1
    assert 1 < at_once[8] <= 8


@pytest.mark.parametrize("emit_unpopulated", [False, True])
def test_unset_fields_omitted_or_sent_empty_give_the_same_records(
    emit_unpopulated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every stream's populated values are the same whichever way the service marshals."""
    dataset = Dataset(**SMALL_DATASET)
    with Emulator(dataset, credential=CREDENTIAL, emit_unpopulated=emit_unpopulated) as emu:
        result = logged_before(sync(tap_config(emu)), dataset.end_ns)
    # The hour turns here (it did once in CI): a tenant anchored on the clock would now be an
    # hour later; the reference is the same tenant, so it takes the first one's anchor.
    next_hour = datetime.fromtimestamp(dataset.end_ns // 10**9, UTC) + timedelta(hours=1)
    monkeypatch.setattr("emulator.dataset._end_default", lambda: next_hour)
    with Emulator(Dataset(**SMALL_DATASET, end=dataset.end_ns), credential=CREDENTIAL) as emu:
        reference = logged_before(sync(tap_config(emu)), dataset.end_ns)
    for stream, records in reference.records.items():
        got = result.records[stream]
        assert len(got) == len(records), stream
        # in any order: the grant feed's time windows deliver as they complete
        assert sorted(
            json.dumps(_deep_populated(without_run(r)), sort_keys=True) for r in got
        ) == sorted(json.dumps(_deep_populated(without_run(r)), sort_keys=True) for r in records), (
            stream
        )
    assert all(
        (r["eventType"] and "appPath" not in r) or r["appPath"]
        for r in result.records["grant_feed"]
    )


def _deep_populated(value: object) -> object:
    """A record without its unset parts (empty strings, lists and objects, nulls, false, zero
    and enum zero values), at every depth."""
    if isinstance(value, dict):
        kept = {k: _deep_populated(v) for k, v in value.items()}
        return {
            k: v
            for k, v in kept.items()
            if not (
                v in (None, "", [], {}, False, 0, "0", "UNKNOWN")
                or (isinstance(v, str) and v.endswith("_UNSPECIFIED") and k != "eventType")
            )
            or k == "durationUnset"
        }
    if isinstance(value, list):
        return [_deep_populated(v) for v in value]
    return value


def test_an_app_gone_or_without_an_id_is_skipped_with_its_warning_and_the_rest_read(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The apps' list names an app without an id (it cannot be keyed), and one the service no
    longer knows when its entitlements are asked for (deleted in between): each said once,
    by what names it; every other app and entitlement read."""
    listed = service.list_apps

    def with_two_more(*args: t.Any, **kwargs: t.Any) -> dict[str, t.Any]:
        page = listed(*args, **kwargs)
        if not page.get("nextPageToken"):  # the last page
            page["list"] += [{"id": "app-gone", "displayName": "Gone"}, {"displayName": "x"}]
        return page

    first_app = emulator.dataset.catalog_apps[0].id
    entitlements_of = service.list_app_entitlements

    def with_one_without_an_id(catalog: t.Any, tokens: t.Any, app_id: str, *args: t.Any) -> t.Any:
        page = entitlements_of(catalog, tokens, app_id, *args)
        if app_id == first_app and not page.get("nextPageToken"):
            page["list"].append({"appEntitlement": {"displayName": "y"}})
        return page

    monkeypatch.setattr(service, "list_apps", with_two_more)
    monkeypatch.setattr(service, "list_app_entitlements", with_one_without_an_id)
    config = tap_config(emulator)
    with caplog.at_level(logging.WARNING):
        result = sync(
            config, catalog=catalog_selecting(config, {"apps": None, "app_entitlements": None})
        )
    ds = emulator.dataset
    apps = [r["id"] for r in result.records["apps"]]
    assert sorted(set(apps)) == sorted({app.id for app in ds.catalog_apps} | {"app-gone"})
    entitlements = [(r["appId"], r["id"]) for r in result.records["app_entitlements"]]
    assert sorted(entitlements) == sorted(
        (app.id, entitlement) for app in ds.catalog_apps for entitlement in app.entitlement_ids
    )
    skipped = [r for r in caplog.records if r.getMessage().startswith("Skipping")]
    assert sorted((r.name, r.getMessage()) for r in skipped) == [
        (
            "tap-accessgov.app_entitlements",
            f"Skipping an app entitlement without an id (GET /api/v1/apps/{first_app}/entitlements)",
        ),
        (
            "tap-accessgov.app_entitlements",
            "Skipping app app-gone: the service does not know it "
            "(GET /api/v1/apps/app-gone/entitlements answered 404: app not found)",
        ),
        ("tap-accessgov.apps", "Skipping an app without an id (x)"),
    ]


def test_a_run_keeps_a_partitions_notes_by_its_key_once_it_was_read_in_full() -> None:
    """ReadOnce, what the catalog streams keep for the streams that read them: a partition's
    notes are kept, under its own key, once its last record was taken, an empty partition's
    too; one left early (``--test``'s limit closes it) is not kept, and is read again when
    asked for; one kept is not read again; and a read that notes nothing gives no notes."""
    once: ReadOnce[str, int] = ReadOnce(lambda record: record["n"])
    taken = once.noting("a", iter([{"n": 1}, {"n": 2}]))
    assert next(taken) == {"n": 1}
    assert once.kept("a") is None
    assert list(taken) == [{"n": 2}]
    assert once.kept("a") == [1, 2]
    assert once.kept("b") is None
    assert list(once.noting("empty", iter(()))) == []
    assert once.kept("empty") == []
    left = once.noting("c", iter([{"n": 3}, {"n": 4}]))
    next(left)
    left.close()
    assert once.kept("c") is None
    reads: list[str] = []

    def read(key: str, *records: dict[str, t.Any]) -> t.Iterator[dict[str, t.Any]]:
        reads.append(key)
        return once.noting(key, iter(records))

    def read_unnoted(key: str) -> t.Iterator[dict[str, t.Any]]:
        reads.append(key)
        return iter(())

    assert once.of("a", lambda: read("a")) == [1, 2]
    assert once.of("empty", lambda: read("empty")) == []
    assert once.of("c", lambda: read("c", {"n": 3}, {"n": 4})) == [3, 4]
    assert once.of("d", lambda: read_unnoted("d")) == []
    assert reads == ["c", "d"]
