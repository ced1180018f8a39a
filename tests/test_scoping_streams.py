"""What an audit is scoped by: ``app_resource_types``, ``app_resources``, ``app_owners``,
``entitlement_owners``, ``attribute_values``, ``iam_roles`` and ``connectors``, each compared
with the emulator's ground truth; a connector's credentials never in the output or the log;
a service that refuses one of these operations (a client without the permission: 403; an
older release: 404) costs that stream alone, said once."""

from __future__ import annotations

import json
import logging
import threading
import typing as t
from collections import Counter

import pytest

from emulator import Dataset, Emulator
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    SMALL_DATASET,
    SyncResult,
    catalog_selecting,
    ns,
    offline_stream,
    parse_page,
    shared_emulator,
    sync,
    sync_output,
    tap_config,
)

SCOPING = (
    "app_resource_types",
    "app_resources",
    "app_owners",
    "entitlement_owners",
    "attribute_values",
    "iam_roles",
    "connectors",
)
INT64 = {"grantCount"}  # int64 sent as strings: integers in the records
NEVER_READ = {"config", "downloadUrl"}  # a connector's credentials and its signed link


def as_record(served: dict[str, t.Any]) -> dict[str, t.Any]:
    """What the tap makes of an object the service serves: int64 strings as integers,
    timestamps as instants (the records' form is checked by the conformance tests), unset
    (empty) fields as they were sent."""
    record: dict[str, t.Any] = {}
    for key, value in served.items():
        if key in INT64 and isinstance(value, str):
            record[key] = int(value) if value else None
        elif isinstance(value, str) and key.endswith("At") and value:
            record[key] = ns(normalized(value))
        elif isinstance(value, dict):
            record[key] = as_record(value)
        else:
            record[key] = value
    return record


def normalized(timestamp: str) -> str:
    """An RFC 3339 instant in the suite's ``ns`` form (UTC, 'Z', nine digits at most)."""
    return timestamp.replace("+00:00", "Z")


def read(result: SyncResult, stream: str) -> list[dict[str, t.Any]]:
    """A stream's records as ``as_record`` has the truth: without the run's snapshot, its
    instants parsed independently."""
    return [
        as_record({k: v for k, v in record.items() if k != "snapshotAt"})
        for record in result.records.get(stream, [])
    ]


def owner_rows(owners: dict[t.Any, list[dict[str, t.Any]]], *keys: str) -> list[dict[str, t.Any]]:
    """The owner records the truth of an owner list makes: the owned ids, the user's id as
    ``userId`` and the user's other fields."""
    rows = []
    for owned, users in owners.items():
        ids = dict(zip(keys, owned if isinstance(owned, tuple) else (owned,), strict=True))
        for user in users:
            fields = {k: v for k, v in user.items() if k != "id"}
            rows.append(as_record({**ids, "userId": user["id"], **fields}))
    return rows


def key(row: dict[str, t.Any]) -> str:
    return json.dumps(row, sort_keys=True)


def multiset(rows: t.Iterable[dict[str, t.Any]]) -> Counter[str]:
    return Counter(map(key, rows))


def truth(ds: Dataset) -> dict[str, Counter[str]]:
    return {
        "app_resource_types": multiset(map(as_record, ds.app_resource_types())),
        "app_resources": multiset(map(as_record, ds.app_resources())),
        "app_owners": multiset(owner_rows(ds.app_owners(), "appId")),
        "entitlement_owners": multiset(
            owner_rows(ds.entitlement_owners(), "appId", "appEntitlementId")
        ),
        "attribute_values": multiset(map(as_record, ds.attribute_values())),
        "iam_roles": multiset(map(as_record, ds.iam_roles())),
        "connectors": multiset(
            as_record({k: v for k, v in c.items() if k not in NEVER_READ}) for c in ds.connectors()
        ),
    }


@pytest.fixture(scope="module")
def scoped() -> tuple[Emulator, SyncResult]:
    """One run of the seven streams against the suite's shared tenant."""
    emulator = shared_emulator()
    config = tap_config(emulator)
    streams = dict.fromkeys((*SCOPING, "app_entitlements"))
    return emulator, sync(config, catalog=catalog_selecting(config, streams))


@pytest.mark.parametrize("stream", SCOPING)
def test_each_stream_is_the_services_objects(
    scoped: tuple[Emulator, SyncResult], stream: str
) -> None:
    emulator, result = scoped
    expected = truth(emulator.dataset)[stream]
    assert expected, f"the tenant has no {stream}"
    assert multiset(read(result, stream)) == expected


def test_what_an_audit_needs_is_there(scoped: tuple[Emulator, SyncResult]) -> None:
    """The tenant's facts the models answer from, as the streams deliver them: entitlements
    on resources (some within others), owners who left, risk levels and frameworks by name."""
    _, result = scoped
    resources = result.records["app_resources"]
    assert any(r.get("parentAppResourceId") for r in resources)
    resource_ids = {(r["appId"], r["appResourceTypeId"], r["id"]) for r in resources}
    entitlements = result.records["app_entitlements"]
    on_resources = [
        e
        for e in entitlements
        if (e["appId"], e.get("appResourceTypeId"), e.get("appResourceId")) in resource_ids
    ]
    assert len(on_resources) > len(entitlements) // 2
    assert any(e.get("riskLevelValueId") for e in entitlements)
    assert any(e.get("complianceFrameworkValueIds") for e in entitlements)
    owners = result.records["entitlement_owners"]
    left = [
        o
        for o in owners
        if o.get("directoryStatus") in ("DELETED", "DISABLED") or o.get("status") == "DELETED"
    ]
    assert 0 < len(left) < len(owners), "no owner who has left"
    values = {v["value"] for v in result.records["attribute_values"]}
    assert {"SOX", "High"} <= values
    assert all(o["appId"] and o["userId"] for o in result.records["app_owners"])


def test_a_connectors_credentials_never_reach_the_output_or_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A connector's ``config`` holds the credentials the service uses to reach the app, its
    ``downloadUrl`` a signed link: neither is in a record, a STATE or the log, at the DEBUG
    level and with a stream map that copies the whole record into a property."""
    emulator = shared_emulator()
    secrets = emulator.dataset.connector_secrets()
    assert secrets
    config = {
        **tap_config(emulator),
        "stream_maps": {"connectors": {"whole_record": "str(record)"}},
    }
    catalog = catalog_selecting(config, {"connectors": None})
    with caplog.at_level(logging.DEBUG):
        output = sync_output(config, catalog=catalog).decode()
    connectors = [
        json.loads(line)["record"]
        for line in output.splitlines()
        if '"RECORD"' in line and '"connectors"' in line
    ]
    assert len(connectors) == len(emulator.dataset.connectors())
    assert all(not NEVER_READ & record.keys() for record in connectors)
    assert all("'config'" not in record["whole_record"] for record in connectors)
    assert all("'downloadUrl'" not in record["whole_record"] for record in connectors)
    log = caplog.text
    assert [s for s in secrets if s in output or s in log] == []


def refused(
    make_emulator: t.Callable[..., Emulator], caplog: pytest.LogCaptureFixture, **variant: t.Any
) -> tuple[Emulator, SyncResult, list[str]]:
    """A run of the seven streams and ``apps`` against a tenant of ``variant``, and the
    warnings it logged."""
    emulator = make_emulator(Dataset(**SMALL_DATASET), **variant)
    config = tap_config(emulator)
    catalog = catalog_selecting(config, dict.fromkeys((*SCOPING, "apps", "full_table_snapshots")))
    with caplog.at_level(logging.WARNING):
        result = sync(config, catalog=catalog)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return emulator, result, warnings


@pytest.mark.parametrize(
    ("variant", "stream", "operation", "status"),
    [
        ({"forbidden_operations": ["/api/v1/iam/roles"]}, "iam_roles", "/api/v1/iam/roles", 403),
        ({"absent_operations": ["/api/v1/iam/roles"]}, "iam_roles", "/api/v1/iam/roles", 404),
        (
            {"forbidden_operations": ["/api/v1/apps/{app_id}/connectors"]},
            "connectors",
            "/connectors",
            403,
        ),
        (
            {"forbidden_operations": ["/api/v1/attributes/types"]},
            "attribute_values",
            "/api/v1/attributes/types",
            403,
        ),
        (
            {"forbidden_operations": ["/api/v1/apps/{app_id}/entitlements/{id}/owners"]},
            "entitlement_owners",
            "/owners",
            403,
        ),
        # a release without the operation: 404 for the list of types, for every app
        (
            {"absent_operations": ["/api/v1/attributes/types"]},
            "attribute_values",
            "/api/v1/attributes/types",
            404,
        ),
        (
            {"absent_operations": ["/api/v1/apps/{app_id}/connectors"]},
            "connectors",
            "/connectors",
            404,
        ),
    ],
    ids=[
        "roles-403",
        "roles-404",
        "connectors-403",
        "attributes-403",
        "owners-403",
        "attributes-404",
        "connectors-404",
    ],
)
def test_an_operation_the_service_refuses_costs_its_stream_alone_said_once(
    make_emulator: t.Callable[..., Emulator],
    caplog: pytest.LogCaptureFixture,
    variant: dict[str, t.Any],
    stream: str,
    operation: str,
    status: int,
) -> None:
    emulator, result, warnings = refused(make_emulator, caplog, **variant)
    assert stream not in result.records
    said = [w for w in warnings if stream in w or operation in w]
    assert len(said) == 1, said
    assert said[0].startswith(f"Skipping the stream {stream} this run: "), said[0]
    assert f"answered {status}" in said[0]
    assert operation in said[0]
    expected = truth(emulator.dataset)
    for other in SCOPING:
        if other != stream:
            assert multiset(read(result, other)) == expected[other], other
    assert len(result.records["apps"]) == len(emulator.dataset.catalog_apps)
    # the refused stream is no full snapshot: the warehouse keeps its last complete one
    snapshots = {r["stream"] for r in result.records["full_table_snapshots"]}
    assert snapshots == ({*SCOPING, "apps"} - {stream})
    assert [t for t in threading.enumerate() if t.name.startswith("prefetch")] == []


def test_an_older_release_without_the_v2_owner_lists_reads_every_owner(
    make_emulator: t.Callable[..., Emulator],
) -> None:
    """``entitlement_owners`` reads the v1 list, which every release has: a release before
    2026 (the emulator's older shapes) answers 404 for the v2 lists and nothing changes."""
    emulator = make_emulator(Dataset(**SMALL_DATASET), shapes="older")
    config = tap_config(emulator)
    result = sync(config, catalog=catalog_selecting(config, {"entitlement_owners": None}))
    rows = owner_rows(emulator.dataset.entitlement_owners(), "appId", "appEntitlementId")
    assert Counter(
        (r["appId"], r["appEntitlementId"], r["userId"])
        for r in result.records["entitlement_owners"]
    ) == Counter((r["appId"], r["appEntitlementId"], r["userId"]) for r in rows)
    assert rows


@pytest.mark.parametrize("concurrency", [1, 4])
def test_owners_of_many_entitlements_are_read_at_most_the_limit_at_once(
    make_emulator: t.Callable[..., Emulator], concurrency: int
) -> None:
    """One request per app entitlement (a tenant has hundreds): through the run's one owner
    of concurrency, up to ``max_concurrency`` at once, the same owners in the same order."""
    emulator = make_emulator(Dataset(**SMALL_DATASET), latency=0.02)
    config = {**tap_config(emulator), "max_concurrency": concurrency}
    result = sync(config, catalog=catalog_selecting(config, {"entitlement_owners": None}))
    peak = emulator.stats["peak_in_flight"]
    assert peak == 1 if concurrency == 1 else 1 < peak <= concurrency
    ordered = [
        (r["appId"], r["appEntitlementId"], r["userId"])
        for r in result.records["entitlement_owners"]
    ]
    expected = [
        (row["appId"], row["appEntitlementId"], row["userId"])
        for row in owner_rows(emulator.dataset.entitlement_owners(), "appId", "appEntitlementId")
    ]
    assert ordered == expected


def test_a_refused_list_of_resource_types_refuses_the_resources_read_by_it(
    make_emulator: t.Callable[..., Emulator], caplog: pytest.LogCaptureFixture
) -> None:
    """``app_resources`` is read resource type by resource type: where the service refuses
    the resource types, the resources are refused too (said once each), never an empty
    "complete" snapshot that would tell the warehouse every resource is gone."""
    emulator, result, warnings = refused(
        make_emulator,
        caplog,
        forbidden_operations=["/api/v1/apps/{app_id}/resource_types"],
    )
    for stream in ("app_resource_types", "app_resources"):
        assert stream not in result.records
        said = [w for w in warnings if f"stream {stream} " in w]
        assert len(said) == 1, said
        assert "resource_types answered 403" in said[0]
    snapshots = {r["stream"] for r in result.records["full_table_snapshots"]}
    assert snapshots == {*SCOPING, "apps"} - {"app_resource_types", "app_resources"}
    expected = truth(emulator.dataset)
    for other in ("app_owners", "entitlement_owners", "attribute_values", "iam_roles"):
        assert multiset(read(result, other)) == expected[other], other


def skipped_after_listing(
    make_emulator: t.Callable[..., Emulator],
    caplog: pytest.LogCaptureFixture,
    stream: str,
    forget: t.Callable[[Emulator, dict[str, str]], None],
) -> tuple[Emulator, dict[str, str], SyncResult, str]:
    """A sync of ``stream`` whose last listed partition the service forgets (``forget``)
    between the listing and its read: the emulator, that partition, the result and the one
    warning naming it. The snapshot is complete: a partition gone is no failure."""
    emulator = make_emulator(Dataset(**SMALL_DATASET))
    config = tap_config(emulator)
    tap_catalog = catalog_selecting(config, {stream: None, "full_table_snapshots": None})
    tap = TapAccessGov(config=config, catalog=tap_catalog, parse_env_config=False)
    last = tap.streams[stream].partitions[-1]
    forget(emulator, last)
    with caplog.at_level(logging.WARNING):
        result = sync(config, tap=tap)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    (said,) = [w for w in warnings if list(last.values())[-1] in w]
    assert [r["stream"] for r in result.records["full_table_snapshots"]] == [stream]
    return emulator, last, result, said


def test_an_app_deleted_since_the_listing_is_skipped_once_a_partition_was_read(
    make_emulator: t.Callable[..., Emulator], caplog: pytest.LogCaptureFixture
) -> None:
    """A 404 after a partition was read names a partition the service no longer knows: that
    app is skipped with a warning, the stream goes on and is complete."""
    emulator, last, result, said = skipped_after_listing(
        make_emulator,
        caplog,
        "connectors",
        lambda emulator, partition: emulator.dataset.remove(app_id=partition["appId"]),
    )
    gone = last["appId"]
    assert gone == emulator.dataset.catalog_apps[-1].id
    # the partition, and the service's answer about it
    assert said.startswith(f"Skipping app {gone}: the service does not know it ("), said
    assert said.endswith(f"/apps/{gone}/connectors answered 404: app not found)"), said
    assert {r["appId"] for r in result.records["connectors"]} == {
        c["appId"] for c in emulator.dataset.connectors()
    }
    assert gone not in {r["appId"] for r in result.records["connectors"]}


def test_an_attribute_type_deleted_since_the_listing_is_skipped_naming_it(
    make_emulator: t.Callable[..., Emulator],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 404 for the values of an attribute type listed earlier in the run, once another
    type's answered (a first answer of 404 says a release without the operation: the stream
    is refused), names a type the service no longer knows: skipped with a warning naming it
    and the service's answer; the other types' values are read whole."""

    def forget(emulator: Emulator, partition: dict[str, str]) -> None:
        attributes = emulator.dataset.attributes
        known = attributes.type_index  # the emulator deletes no type: its lookup forgets it
        gone = partition["attributeTypeId"]
        monkeypatch.setattr(
            attributes, "type_index", lambda key: None if key == gone else known(key)
        )

    emulator, last, result, said = skipped_after_listing(
        make_emulator, caplog, "attribute_values", forget
    )
    attributes = emulator.dataset.attributes
    gone = attributes.type_ids[-1]
    assert last == {"attributeTypeId": gone}
    assert said.startswith(f"Skipping attribute type {gone}: the service does not know it ("), said
    assert said.endswith(f"/types/{gone}/values answered 404: attribute type not found)"), said
    kept = Counter(r["attributeTypeId"] for r in result.records["attribute_values"])
    others = attributes.type_ids[:-1]
    assert kept == Counter(
        {type_id: len(attributes.values(attributes.type_ids.index(type_id))) for type_id in others}
    )


def test_a_resource_type_deleted_since_the_listing_is_skipped_naming_it_and_its_app(
    make_emulator: t.Callable[..., Emulator],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 404 for the resources of a resource type listed earlier in the run (after the others
    answered) names a type the service no longer knows: skipped with a warning naming it, its
    app and the service's answer; the other types' resources are read whole."""

    def forget(emulator: Emulator, partition: dict[str, str]) -> None:
        resources = emulator.dataset.resources
        known = resources.type_index  # the emulator deletes no type: its lookup forgets it
        gone = partition["appResourceTypeId"]
        monkeypatch.setattr(
            resources, "type_index", lambda at, key: None if key == gone else known(at, key)
        )

    emulator, last, result, said = skipped_after_listing(
        make_emulator, caplog, "app_resources", forget
    )
    app, gone = last["appId"], last["appResourceTypeId"]
    assert said.startswith(
        f"Skipping resource type {gone} of app {app}: the service does not know it ("
    ), said
    assert said.endswith(
        f"/resource_types/{gone}/resources answered 404: app resource type not found)"
    ), said
    read = Counter((r["appId"], r["appResourceTypeId"]) for r in result.records["app_resources"])
    truth = Counter(
        (r["appId"], r["appResourceTypeId"]) for r in emulator.dataset.resources.resources_truth()
    )
    assert truth[(app, gone)] > 0
    del truth[(app, gone)]
    assert read == truth


@pytest.mark.parametrize(
    ("stream", "path"),
    [
        ("app_owners", "/api/v1/apps/a1/owners"),
        ("entitlement_owners", "/api/v1/apps/a1/entitlements/e1/owners"),
    ],
)
def test_an_owner_without_an_id_is_skipped_with_one_warning_naming_the_stream(
    caplog: pytest.LogCaptureFixture, stream: str, path: str
) -> None:
    """An owner (a directory user) without an id, absent or empty, cannot be keyed: it is
    skipped, said once a run on the stream's logger (one per entitlement would be thousands
    of lines), never with the user's values; the others are kept, their id as ``userId``."""
    reader = offline_stream(stream)
    body = {
        "list": [
            {"id": "u1", "email": "a@example.com"},
            {"email": "b@x"},
            {"id": ""},
            {"id": None},
            None,
        ]
    }
    with caplog.at_level(logging.WARNING):
        read = parse_page(reader, body, f"{path}?page_size=9")
        read += parse_page(reader, body, f"{path}?page_size=9")
    assert read == [{"userId": "u1", "email": "a@example.com"}] * 2
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (
            reader.logger.name,
            f"Skipping an owner without an id ({stream}) (further ones this run are not reported)",
        )
    ]
