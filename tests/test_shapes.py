"""Never an invalid record: whatever release's field shapes the service answers in (the
emulator's newest, older and changed shapes, on every endpoint), every record of every stream
fits the SCHEMA the tap sent, and what did not fit is said once per field (conformance.py)."""

from __future__ import annotations

import json
import logging
import typing as t
from collections import Counter

import pytest
from singer_sdk.typing import DEFAULT_JSONSCHEMA_VALIDATOR

from emulator import Dataset, Emulator
from emulator.shapes import SHAPES
from tap_accessgov.conformance import RecordConformance
from tap_accessgov.schemas import APP, USER
from tap_accessgov.timestamps import normalize_timestamp
from tests.conftest import CREDENTIAL, SMALL_DATASET, STREAMS, SyncResult, sync, tap_config

SAID_ONCE = "said once per run"
# What each release changes, as the tap reports it: (stream, field, what was done).
REPORTED = {
    "newest": set(),
    "older": {
        ("apps", "annotations", "dropped"),
        ("app_entitlements", "annotations", "dropped"),
    },
    "changed": {
        ("apps", "annotations", "dropped"),
        ("apps", "monthlyCostUsd", "dropped"),
        ("app_entitlements", "durationGrant", "kept as JSON text"),
        ("app_entitlements", "sourceConnectorIds", "dropped"),
        ("automation_exclusions", "appUserId", "kept as JSON text"),
        ("users", "department", "kept as JSON text"),
        ("users", "createdAt", "dropped"),
        ("users", "profile", "dropped"),
        ("users", "managerIds[]", "kept as JSON text"),
        ("grant_feed", "feed.ticketId", "kept as JSON text"),
        # the owners are users, in the users' changed shapes
        *(
            (owners, field, done)
            for owners in ("app_owners", "entitlement_owners")
            for field, done in (
                ("department", "kept as JSON text"),
                ("createdAt", "dropped"),
                ("profile", "dropped"),
                ("managerIds[]", "kept as JSON text"),
            )
        ),
        ("app_resource_types", "createdAt", "dropped"),
        ("app_resources", "annotations", "dropped"),
        ("attribute_values", "createdAt", "dropped"),
        ("iam_roles", "createdAt", "dropped"),
        ("connectors", "status.status", "kept as JSON text"),
    },
}


def shaped_sync(
    shapes: str, caplog: pytest.LogCaptureFixture
) -> tuple[SyncResult, list[str], Emulator]:
    with Emulator(Dataset(**SMALL_DATASET), credential=CREDENTIAL, shapes=shapes) as emulator:
        with caplog.at_level(logging.WARNING):
            result = sync({**tap_config(emulator), "expand_mask": ["*"]})
        said = [r.getMessage() for r in caplog.records if SAID_ONCE in r.getMessage()]
        return result, said, emulator


def reported(said: list[str]) -> list[tuple[str, str, str]]:
    """(stream, field, what was done) of each warning, in the order said."""
    found = []
    for message in said:
        where, what = message.split(": ", 1)
        stream, path = where.split(".", 1)
        found.append((stream, path, what.split(": ")[1].split(" (")[0]))
    return found


@pytest.mark.parametrize("shapes", SHAPES)
def test_every_record_fits_its_schema_and_each_misfit_is_said_once(
    shapes: str, caplog: pytest.LogCaptureFixture
) -> None:
    result, said, _ = shaped_sync(shapes, caplog)
    for stream in STREAMS:
        assert result.records.get(stream), f"{stream} has no records"
        validator = DEFAULT_JSONSCHEMA_VALIDATOR(
            result.schemas[stream], format_checker=DEFAULT_JSONSCHEMA_VALIDATOR.FORMAT_CHECKER
        )
        invalid = [
            f"{'.'.join(map(str, e.path))}: {e.message}"
            for record in result.records[stream]
            for e in validator.iter_errors(record)
        ]
        assert invalid == [], f"{shapes}, {stream}: {invalid[:3]}"
    found = Counter(reported(said))
    assert [field for field, times in found.items() if times > 1] == [], said
    assert set(found) == REPORTED[shapes], said


def test_changed_shapes_keep_what_fits_and_the_rest_as_json_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    result, _, emulator = shaped_sync("changed", caplog)
    ds = emulator.dataset
    apps = result.records["apps"]
    assert len(apps) == len(ds.catalog_apps)
    assert not any("monthlyCostUsd" in app or "annotations" in app for app in apps)
    assert all(isinstance(app["userCount"], int) for app in apps)  # the rest as before
    users = {user["id"]: user for user in result.records["users"]}
    assert users
    # users is the directory and the exclusions' users: both are served in the changed shapes.
    listed = {record["id"]: record for record in map(ds.directory.record, ds.directory.listed())}
    for user_id, user in users.items():
        truth = listed.get(user_id) or ds.user(user_id)
        assert "createdAt" not in user
        assert "profile" not in user
        if truth.get("department"):
            assert json.loads(user["department"])["name"] == truth["department"]
        if truth.get("managerIds"):
            assert [json.loads(m)["id"] for m in user["managerIds"]] == truth["managerIds"]
        assert user["displayName"] == truth["displayName"]
    exclusions = result.records["automation_exclusions"]
    assert all(json.loads(r["appUserId"])["appId"] == r["appId"] for r in exclusions)
    tickets = [
        r["feed"]["ticketId"] for r in result.records["grant_feed"] if "ticketId" in r["feed"]
    ]
    assert tickets
    assert all(ticket.isdigit() for ticket in tickets)


def test_a_record_without_its_key_is_skipped_and_int64_strings_become_integers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conformance = RecordConformance(APP, logging.getLogger("test"), "apps")
    with caplog.at_level(logging.WARNING):
        assert conformance.apply({"id": "a", "userCount": "12", "connectorVersion": 2}) == {
            "id": "a",
            "userCount": 12,
            "connectorVersion": 2,
        }
        assert conformance.apply({"id": "b", "userCount": ""}) == {"id": "b", "userCount": None}
        assert conformance.apply({"displayName": "no id"}) is None
        assert conformance.apply({"id": None}) is None
        assert conformance.apply({"id": 7, "isDirectory": "yes"}) == {"id": "7"}
    assert [r.getMessage().split(" (said")[0] for r in caplog.records] == [
        "apps.id: missing or unusable: records without it are skipped",
        "apps.id: sent null where the schema says string: dropped",
        "apps.id: sent a number where the schema says string: kept as JSON text",
        "apps.isDirectory: sent a string where the schema says boolean: dropped",
    ]


def test_a_record_that_fits_is_passed_on_as_it_is() -> None:
    conformance = RecordConformance(APP, logging.getLogger("test"), "apps")
    record: dict[str, t.Any] = {
        "id": "a",
        "annotations": {"managed_by": "terraform"},
        "appOwners": [{"id": "u", "profile": {"x": [1, None]}}],
        "createdAt": "2026-01-02T03:04:05.123456789Z",
        "deletedAt": None,
    }
    assert conformance.apply(record) is record


def test_nested_values_are_fitted_where_they_are(caplog: pytest.LogCaptureFixture) -> None:
    conformance = RecordConformance(USER, logging.getLogger("test"), "users")
    with caplog.at_level(logging.WARNING):
        fitted = conformance.apply(
            {
                "id": "u",
                "createdAt": "yesterday",
                "emails": ["a@example.com", {"address": "b@example.com"}],
                "emailSources": [{"appId": "x", "priority": "2", "value": 5}],
                "jobTitleSources": [{"appId": "x"}, "not an object"],
            }
        )
    assert fitted == {
        "id": "u",
        "emails": ["a@example.com", '{"address":"b@example.com"}'],
        "emailSources": [{"appId": "x", "priority": 2, "value": "5"}],
    }
    assert sorted(r.getMessage().split(" (said")[0] for r in caplog.records) == [
        "users.createdAt: sent a string where the schema says date-time: dropped",
        "users.emailSources[].value: sent a number where the schema says string: kept as JSON text",
        "users.emails[]: sent an object where the schema says string: kept as JSON text",
        "users.jobTitleSources: an item does not fit: the whole array dropped",
        "users.jobTitleSources[]: sent a string where the schema says object: dropped",
    ]


def test_a_date_time_in_digits_other_than_ascii_fits_nothing() -> None:
    """RFC 3339 writes ASCII digits; a pattern's ``\\d`` matches any Unicode digit (fullwidth,
    Arabic-Indic...), which a loader's date parser rejects. Such a value is dropped like any
    other misfit, and is no timestamp the tap reads (a feed date, a bookmark, a setting)."""
    fullwidth_year = "\uff12\uff10\uff12\uff16-01-02T03:04:05Z"
    arabic_indic_fraction = "2026-01-02T03:04:05.\u0661\u0662\u0663Z"
    conformance = RecordConformance(APP, logging.getLogger("test"), "apps")
    for value in (fullwidth_year, arabic_indic_fraction):
        assert conformance.apply({"id": "a", "createdAt": value}) == {"id": "a"}
        with pytest.raises(ValueError, match="Invalid isoformat"):
            normalize_timestamp(value)
