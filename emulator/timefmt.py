"""RFC 3339 timestamps the way protobuf JSON writes them, on integer nanoseconds.

The service is protobuf-JSON: a timestamp carries 0, 3, 6 or 9 fractional digits, the fewest
that represent the value exactly. Keeping dates as integer nanoseconds avoids float rounding.
"""

from __future__ import annotations

import calendar
import re
import time
from datetime import UTC, datetime

NS = 1_000_000_000
_UNITS = {0: NS, 3: 1_000_000, 6: 1_000, 9: 1}  # ns per last digit

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)


def format_ns(ns: int) -> str:
    """Format like protobuf JSON: UTC, `Z`, and 0/3/6/9 fractional digits."""
    secs, frac = divmod(ns, NS)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    if frac == 0:
        return text + "Z"
    if frac % 1_000_000 == 0:
        return f"{text}.{frac // 1_000_000:03d}Z"
    if frac % 1_000 == 0:
        return f"{text}.{frac // 1_000:06d}Z"
    return f"{text}.{frac:09d}Z"


def parse_rfc3339(text: str) -> int:
    """Parse an RFC 3339 date-time (as protobuf JSON accepts it) to nanoseconds.

    Raises ValueError for anything else (date only, missing zone, bad field values).
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 date-time: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    datetime(year, month, day, hour, minute, second)  # validates field ranges
    frac = int((match.group(7) or "").ljust(9, "0"))
    zone = match.group(8)
    offset = 0
    if zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            raise ValueError(f"bad zone offset: {text!r}")
        offset = sign * (hours * 3600 + minutes * 60)
    secs = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) - offset
    return secs * NS + frac


def to_ns(value: str | datetime | int) -> int:
    """Accept the forms ground-truth callers use: RFC 3339 text, aware datetime, or ns."""
    if isinstance(value, int):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        delta = value - datetime(1970, 1, 1, tzinfo=UTC)
        return (delta.days * 86_400 + delta.seconds) * NS + delta.microseconds * 1_000
    return parse_rfc3339(str(value))


def precise(ns: int, digits: int) -> int:
    """Round `ns` down so its shortest protobuf form has exactly `digits` (0/3/6/9) digits.

    Used by the generator so all four timestamp forms occur; may move the value up by one
    unit (to avoid a coarser form), never by more.
    """
    unit = _UNITS[digits]
    value = ns - ns % unit
    if digits and value % (unit * 1000) == 0:
        value += unit
    return value
