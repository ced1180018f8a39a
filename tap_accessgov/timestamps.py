"""The one timestamp form records and bookmarks carry: RFC 3339, UTC, 9 digits, ``Z``.

The service writes 0, 3, 6 or 9 fractional digits and the SDK compares bookmarks as strings, so
one fixed width keeps string order equal to time order without losing nanoseconds (which
``datetime``, and so every date library, would drop).
"""

from __future__ import annotations

import datetime
import re

# ASCII digits: a pattern's \d matches any Unicode digit, which no loader parses as a date.
_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$", re.ASCII
)


def normalize_timestamp(value: str) -> str:
    """``value`` in the fixed form; ValueError if it is not a date-time.

    RFC 3339 keeps every digit to the nanosecond (digits beyond it are dropped); other ISO
    8601 forms (a date alone, a naive time, as a config may hold) are read by the standard
    library as UTC. In UTC the form is checked, not the calendar (a month 13 passes): the
    service's are protobuf Timestamps, valid by construction, and a check per record would
    cost more than the rest of this function (measured: 0.9 against 1.6 us a call).
    """
    match = _RFC3339.match(value)
    if match is None:
        parsed = datetime.datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.UTC)
        return f"{parsed.astimezone(datetime.UTC):%Y-%m-%dT%H:%M:%S}.{parsed.microsecond:06d}000Z"
    date, time, fraction, offset = match.groups()
    fraction = (fraction or "")[:9].ljust(9, "0")
    if offset in ("Z", "z", "+00:00", "-00:00"):
        return f"{date}T{time}.{fraction}Z"
    shifted = datetime.datetime.fromisoformat(f"{date}T{time}{offset}").astimezone(datetime.UTC)
    return f"{shifted:%Y-%m-%dT%H:%M:%S}.{fraction}Z"


_NS = 1_000_000_000


def to_ns(value: str) -> int:
    """Nanoseconds since the epoch of any timestamp ``normalize_timestamp`` reads (exact)."""
    normal = normalize_timestamp(value)
    seconds = datetime.datetime.fromisoformat(normal[:19] + "+00:00")
    return int(seconds.timestamp()) * _NS + int(normal[20:29])


def from_ns(ns: int) -> str:
    """The fixed form of an instant in nanoseconds since the epoch."""
    seconds, fraction = divmod(ns, _NS)
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{fraction:09d}Z"
