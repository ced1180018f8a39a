"""Records made to fit their SCHEMA (tap_accessgov/conformance.py), value by value: what fits
passes as it is, the service's int64 strings become integers, a string sent as another JSON
value is kept as its JSON text, anything else is dropped alone, a record without a key is
skipped; each change said once per field and run, never with its value. Every kind of
property the tap's schemas declare, through the one public path (``RecordConformance``)."""

from __future__ import annotations

import copy
import logging
import typing as t

import pytest

from tap_accessgov.conformance import DateTime, RecordConformance, fitting_class

SCHEMA: dict[str, t.Any] = {
    "type": "object",
    "required": ["id", "seen"],
    "properties": {
        "id": {"type": "string"},
        "seen": {"type": "string", "format": "date-time"},
        "name": {"type": ["string", "null"]},
        "at": {"type": ["string", "null"], "format": "date-time"},
        "count": {"type": ["integer", "null"]},
        "total": {"type": "integer"},
        "ratio": {"type": ["number", "null"]},
        "flag": {"type": ["boolean", "null"]},
        "tags": {"type": ["array", "null"], "items": {"type": "integer"}},
        "labels": {"type": "array", "items": {"type": "string"}},
        "profile": {"type": ["object", "null"]},  # free-form: any keys, any values
        "owner": {
            "type": ["object", "null"],
            "properties": {
                "id": {"type": ["string", "null"]},
                "since": {"type": ["string", "null"], "format": "date-time"},
                "seats": {"type": ["integer", "null"]},
            },
        },
        "anything": {},
        "either": {"type": ["string", "integer"]},
    },
}
BASE = {"id": "r1", "seen": "2024-03-05T06:07:08.000000000Z"}


def fitted(
    fields: dict[str, t.Any], caplog: pytest.LogCaptureFixture
) -> tuple[dict[str, t.Any] | None, list[str]]:
    """The record BASE with ``fields`` as the stream's conformance makes it, and its
    warnings."""
    conformance = RecordConformance(SCHEMA, logging.getLogger("conformance-test"), "things")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="conformance-test"):
        result = conformance.apply({**BASE, **copy.deepcopy(fields)})
    return result, [record.getMessage() for record in caplog.records]


FITS = [
    {"name": "Ada", "at": "2024-03-05T06:07:08+01:00", "count": 3, "total": 0},
    {"name": None, "at": None, "count": None, "ratio": None, "flag": None, "tags": None},
    {"ratio": 1, "flag": False, "tags": [1, 2], "labels": ["a", "b"], "profile": {"a": [1]}},
    {"ratio": 2.5, "profile": None, "owner": None, "anything": {"x": [1, "y"]}},
    {"owner": {"id": "u1", "since": "2024-01-01T00:00:00Z", "seats": 2, "extra": "kept"}},
    {"owner": {"id": None, "since": None, "seats": None}, "either": 7},
    {"either": "seven", "anything": None, "tags": [], "labels": []},
]


@pytest.mark.parametrize("fields", FITS)
def test_what_fits_passes_as_it_is(fields: dict[str, t.Any], caplog) -> None:
    result, warnings = fitted(fields, caplog)
    assert result == {**BASE, **fields}
    assert warnings == []


@pytest.mark.parametrize(
    ("fields", "made"),
    [
        ({"count": "42"}, {"count": 42}),
        ({"count": "-7", "total": "12"}, {"count": -7, "total": 12}),
        ({"count": ""}, {"count": None}),  # an unset int64
        ({"tags": ["1", 2]}, {"tags": [1, 2]}),
        ({"owner": {"seats": "3"}}, {"owner": {"seats": 3}}),
    ],
)
def test_int64_strings_become_integers_silently(
    fields: dict[str, t.Any], made: dict[str, t.Any], caplog
) -> None:
    result, warnings = fitted(fields, caplog)
    assert result == {**BASE, **made}
    assert warnings == []


WARNING = "things.{}: {} (said once per run; a newer tap may know this shape)"


@pytest.mark.parametrize(
    ("fields", "made", "said"),
    [
        (
            {"name": 12},
            {"name": "12"},
            ("name", "sent a number where the schema says string: kept as JSON text"),
        ),
        (
            {"name": {"b": 1, "a": "é"}},
            {"name": '{"b":1,"a":"é"}'},
            ("name", "sent an object where the schema says string: kept as JSON text"),
        ),
        (
            {"name": [1, True]},
            {"name": "[1,true]"},
            ("name", "sent an array where the schema says string: kept as JSON text"),
        ),
        (
            {"name": False},
            {"name": "false"},
            ("name", "sent a boolean where the schema says string: kept as JSON text"),
        ),
        ({"at": "yesterday"}, {}, ("at", "sent a string where the schema says date-time: dropped")),
        ({"at": 1709618828}, {}, ("at", "sent a number where the schema says date-time: dropped")),
        ({"count": "12.5"}, {}, ("count", "sent a string where the schema says integer: dropped")),
        ({"count": 1.5}, {}, ("count", "sent a number where the schema says integer: dropped")),
        ({"count": True}, {}, ("count", "sent a boolean where the schema says integer: dropped")),
        (
            {"count": "2024-03-05T06:07:08Z"},  # a date-time where it is not declared
            {},
            ("count", "sent a string where the schema says integer: dropped"),
        ),
        (
            {"owner": {"seats": "2024-03-05T06:07:08Z"}},
            {"owner": {}},
            ("owner.seats", "sent a string where the schema says integer: dropped"),
        ),
        ({"total": ""}, {}, ("total", "sent a string where the schema says integer: dropped")),
        ({"total": None}, {}, ("total", "sent null where the schema says integer: dropped")),
        ({"ratio": "1.5"}, {}, ("ratio", "sent a string where the schema says number: dropped")),
        ({"ratio": True}, {}, ("ratio", "sent a boolean where the schema says number: dropped")),
        ({"flag": "true"}, {}, ("flag", "sent a string where the schema says boolean: dropped")),
        ({"flag": 1}, {}, ("flag", "sent a number where the schema says boolean: dropped")),
        ({"tags": {"a": 1}}, {}, ("tags", "sent an object where the schema says array: dropped")),
        ({"labels": None}, {}, ("labels", "sent null where the schema says array: dropped")),
        ({"tags": [1, "x"]}, {}, ("tags", "an item does not fit: the whole array dropped")),
        (
            {"profile": ["a"]},
            {},
            ("profile", "sent an array where the schema says object: dropped"),
        ),
        ({"owner": "u1"}, {}, ("owner", "sent a string where the schema says object: dropped")),
        (
            {"owner": {"id": "u1", "seats": "many"}},
            {"owner": {"id": "u1"}},
            ("owner.seats", "sent a string where the schema says integer: dropped"),
        ),
        (
            {"owner": {"since": "soon", "id": 5}},
            {"owner": {"id": "5"}},
            ("owner.since", "sent a string where the schema says date-time: dropped"),
        ),
    ],
)
def test_a_misfit_is_repaired_or_dropped_alone_and_said_once(
    fields: dict[str, t.Any], made: dict[str, t.Any], said: tuple[str, str], caplog
) -> None:
    result, warnings = fitted({"name": "kept", **fields}, caplog)
    assert result == {**BASE, "name": "kept", **made}
    assert WARNING.format(*said) in warnings
    assert all(str(value) not in "".join(warnings) for value in ("yesterday", "u1", "many"))


def test_each_change_is_said_once_per_run_and_unknown_fields_once_each(caplog) -> None:
    conformance = RecordConformance(SCHEMA, logging.getLogger("conformance-test"), "things")
    with caplog.at_level(logging.WARNING, logger="conformance-test"):
        for n in range(3):
            row = {**BASE, "count": 1.5, "newer": n, "older": n}
            assert conformance.apply(row) == BASE
        assert conformance.apply({**BASE, "newest": 1}) == BASE
    assert [record.getMessage() for record in caplog.records] == [
        "The service sent fields this tap does not know yet (things); they are not extracted: "
        "newer, older",
        WARNING.format("count", "sent a number where the schema says integer: dropped"),
        "The service sent fields this tap does not know yet (things); they are not extracted: "
        "newest",
    ]


@pytest.mark.parametrize(
    ("fields", "missing"),
    [
        ({"id": None}, "id"),
        ({"id": {"x": 1}}, None),  # kept as JSON text: still a key
        ({"seen": "last week"}, "seen"),
        ({"seen": None}, "seen"),
    ],
)
def test_a_record_without_a_usable_key_is_skipped(
    fields: dict[str, t.Any], missing: str | None, caplog
) -> None:
    result, warnings = fitted(fields, caplog)
    if missing is None:
        assert result == {**BASE, "id": '{"x":1}'}
        return
    assert result is None
    assert WARNING.format(missing, "missing or unusable: records without it are skipped") in (
        warnings
    )


def test_a_record_without_a_key_field_at_all_is_skipped(caplog) -> None:
    conformance = RecordConformance(SCHEMA, logging.getLogger("conformance-test"), "things")
    with caplog.at_level(logging.WARNING, logger="conformance-test"):
        assert conformance.apply({"seen": BASE["seen"], "name": "x"}) is None
    assert caplog.records[-1].getMessage() == WARNING.format(
        "id", "missing or unusable: records without it are skipped"
    )


@pytest.mark.parametrize(
    ("schema", "cls"),
    [
        ({"type": "string"}, str),
        ({"type": ["string", "null"], "format": "date-time"}, DateTime),
        ({"type": ["null", "integer"]}, int),
        ({"type": "boolean"}, bool),
        ({"type": ["object", "null"]}, dict),
        ({"type": ["object", "null"], "properties": {"a": {"type": "string"}}}, None),
        ({"type": ["number", "null"]}, None),  # an int and a float both fit: no one class
        ({"type": ["string", "integer"]}, None),
        ({"type": "array", "items": {}}, None),
        ({}, None),
    ],
)
def test_the_class_that_fits_as_it_is(schema: dict[str, t.Any], cls: type | None) -> None:
    """The per-record path's shortcut: a value of this class fits without a check."""
    assert fitting_class(schema) is cls


def test_a_schema_without_keys_and_an_array_of_anything() -> None:
    """No ``required`` (every record can be keyed) and an array without ``items`` (any item)."""
    schema = {"type": "object", "properties": {"list": {"type": ["array", "null"]}}}
    conformance = RecordConformance(schema, logging.getLogger("conformance-test"), "things")
    assert conformance.apply({"list": [1, "a", {"b": None}]}) == {"list": [1, "a", {"b": None}]}
    assert conformance.apply({}) == {}
