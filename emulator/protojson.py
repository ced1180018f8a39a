"""Reading a POST search's body the way the service's protobuf-JSON parser does: either
spelling of a field name (JSON or proto), an unknown or repeated field, a wrong type or a
bad int32 is a 400 naming the field. The grant feed and the grant search read their bodies
here.
"""

from __future__ import annotations

import json
from typing import Any

from emulator.errors import bad_request
from emulator.timefmt import parse_rfc3339


def body_object(body: bytes) -> Any:
    """The parsed JSON body (an empty body is ``{}``); 400 if it is not JSON."""
    try:
        return json.loads(body) if body.strip() else {}
    except (ValueError, UnicodeDecodeError):
        raise bad_request("request body is not valid JSON") from None


def fields(obj: Any, names: dict[str, str], where: str) -> dict[str, Any]:
    """An object's fields by JSON name (``names``: JSON name -> proto name, either accepted);
    null fields are left out (unset); 400 on an unknown or repeated field."""
    if not isinstance(obj, dict):
        raise bad_request(f"{where} must be an object")
    by_alias = {alias: name for name, alias in names.items()} | {n: n for n in names}
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = by_alias.get(key)
        if name is None:
            raise bad_request(f'unknown field "{key}" in {where}')
        if name in out:
            raise bad_request(f'field "{name}" given twice in {where}')
        if value is not None:
            out[name] = value
    return out


def string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise bad_request(f"{where} must be a string")
    return value


def strings(value: Any, where: str) -> list[str]:
    """A repeated string field."""
    if not isinstance(value, list):
        raise bad_request(f"{where} must be an array")
    return [string(item, f"{where}[{n}]") for n, item in enumerate(value)]


def refs(value: Any, where: str, keys: dict[str, str]) -> list[tuple[str, ...]]:
    """A ref list as tuples ordered like ``keys``; every id of a ref is required."""
    if not isinstance(value, list):
        raise bad_request(f"{where} must be an array")
    found = []
    for n, item in enumerate(value):
        ref_fields = fields(item, keys, f"{where}[{n}]")
        ref = tuple(string(ref_fields.get(k, ""), f"{where}[{n}].{k}") for k in keys)
        if not all(ref):
            raise bad_request(f"{where}[{n}] needs {' and '.join(keys)}")
        found.append(ref)
    return found


def int32(value: Any, where: str) -> int:
    """An int32 as protobuf JSON accepts it: a number or a decimal string."""
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise bad_request(f"{where} must be an int32")
    return value


def timestamp(value: Any, where: str) -> int:
    """An RFC 3339 date-time field, in ns."""
    try:
        return parse_rfc3339(string(value, where))
    except ValueError:
        raise bad_request(f"{where} is not an RFC 3339 date-time") from None
