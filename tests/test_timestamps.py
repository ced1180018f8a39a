"""The one timestamp form (tap_accessgov/timestamps.py) on known values, each written out here
(not computed by the module): every form the service or a config may write, the instant
kept to the nanosecond, and the same answers on a machine whose local time is not UTC."""

from __future__ import annotations

import calendar
import typing as t

import pytest

from tap_accessgov.timestamps import from_ns, normalize_timestamp, to_ns
from tests.conftest import local_time_zone

# (as written, in the one form)
FORMS = [
    ("2024-03-05T06:07:08Z", "2024-03-05T06:07:08.000000000Z"),
    ("2024-03-05T06:07:08.1Z", "2024-03-05T06:07:08.100000000Z"),
    ("2024-03-05T06:07:08.123Z", "2024-03-05T06:07:08.123000000Z"),
    ("2024-03-05T06:07:08.123456789Z", "2024-03-05T06:07:08.123456789Z"),
    ("2024-03-05T06:07:08.1234567891Z", "2024-03-05T06:07:08.123456789Z"),  # to the ns
    ("2024-03-05t06:07:08.5z", "2024-03-05T06:07:08.500000000Z"),  # RFC 3339 allows lower case
    ("2024-03-05 06:07:08Z", "2024-03-05T06:07:08.000000000Z"),  # and a space
    ("2024-03-05T06:07:08+00:00", "2024-03-05T06:07:08.000000000Z"),
    ("2024-03-05T06:07:08-00:00", "2024-03-05T06:07:08.000000000Z"),
    ("2024-03-05T06:07:08.987654321+05:30", "2024-03-05T00:37:08.987654321Z"),
    ("2024-03-05T23:07:08.000000001-02:00", "2024-03-06T01:07:08.000000001Z"),
    ("2024-12-31T23:59:59.999999999-00:01", "2025-01-01T00:00:59.999999999Z"),
    # not RFC 3339 (a config's start_date may be): read as UTC, to the microsecond
    ("2024-03-05", "2024-03-05T00:00:00.000000000Z"),
    ("2024-03-05T06:07:08", "2024-03-05T06:07:08.000000000Z"),
    ("2024-03-05T06:07:08.250", "2024-03-05T06:07:08.250000000Z"),
    ("2024-03-05T06:07:08.123456+01:00:00", "2024-03-05T05:07:08.123456000Z"),
]


def utc_ns(year: int, month: int, day: int, h: int, m: int, s: int, nanos: int = 0) -> int:
    return calendar.timegm((year, month, day, h, m, s, 0, 0, 0)) * 1_000_000_000 + nanos


@pytest.fixture(params=["UTC", "America/New_York", "Asia/Kolkata"])
def local_time(request: pytest.FixtureRequest) -> t.Iterator[str]:
    """This process's local time zone: the answers may not depend on it."""
    with local_time_zone(request.param):
        yield request.param


@pytest.mark.parametrize(("written", "normal"), FORMS)
def test_every_form_becomes_the_one_form(written: str, normal: str, local_time: str) -> None:
    assert normalize_timestamp(written) == normal


def test_instants_to_the_nanosecond_and_back(local_time: str) -> None:
    cases = {
        "2024-03-05T06:07:08.123456789Z": utc_ns(2024, 3, 5, 6, 7, 8, 123_456_789),
        "2024-03-05T06:07:08.9+01:00": utc_ns(2024, 3, 5, 5, 7, 8, 900_000_000),
        "1970-01-01T00:00:00Z": 0,
        "2099-12-31T23:59:59.000000001Z": utc_ns(2099, 12, 31, 23, 59, 59, 1),
    }
    for written, instant in cases.items():
        assert to_ns(written) == instant, written
        assert from_ns(instant) == normalize_timestamp(written)
    assert from_ns(utc_ns(2024, 3, 5, 6, 7, 8, 5)) == "2024-03-05T06:07:08.000000005Z"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "yesterday",
        "2024-13-01T00:00:00+01:00",  # with an offset the calendar is checked
        "2024-02-30T00:00:00.5-05:00",
        "2024-03-05T24:00:00+01:00",
        "2024-03-05T06:07:08+25:00",
        "\uff12\uff10\uff12\uff14-03-05T06:07:08Z",  # digits other than ASCII (fullwidth)
        "2024-03-05T06:07:08.\uff11\uff12Z",
    ],
)
def test_what_is_not_a_date_time_is_refused(value: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 (the standard library's message varies)
        normalize_timestamp(value)
