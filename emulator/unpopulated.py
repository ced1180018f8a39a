"""Unpopulated fields: omitted (protobuf JSON's default) or emitted empty (*EmitUnpopulated*).

Whether the real service omits unset fields or sends them empty is not settled: its SDKs'
models allow omission, its Terraform provider says the API marshals with EmitUnpopulated
("the API never omits the field"). The emulator does either (``Emulator.emit_unpopulated``:
True, every endpoint sends them; False, every endpoint omits them; None, the default, the
catalog endpoints send them and the feed and the exclusions omit them). Emitted, an unset string is ``""``, a bool ``false``, a
number ``0`` (an int64 ``"0"``), a list ``[]``, a map ``{}``, an enum its zero value, a
message or timestamp ``null``. A oneof member that is set is always sent, empty or not.
"""

from __future__ import annotations

from typing import Any

# The zero value of each field of the objects the emulator sends that may be unset.
USER: dict[str, Any] = {
    "createdAt": None,
    "updatedAt": None,
    "deletedAt": None,
    "delegatedUserId": "",
    "department": "",
    "departmentSources": [],
    "directoryIds": [],
    "directoryStatus": "UNKNOWN",
    "directoryStatusSources": [],
    "displayName": "",
    "email": "",
    "emailSources": [],
    "emails": [],
    "employeeIds": [],
    "employeeIdSources": [],
    "employmentStatus": "",
    "employmentStatusSources": [],
    "employmentType": "",
    "employmentTypeSources": [],
    "jobTitle": "",
    "jobTitleSources": [],
    "managerIds": [],
    "managerSources": [],
    "origin": "USER_ORIGIN_UNSPECIFIED",
    "profile": None,
    "roleIds": [],
    "status": "UNKNOWN",
    "type": "USER_TYPE_UNSPECIFIED",
    "username": "",
    "usernameSources": [],
    "usernames": [],
}
FEED = {"ticketId": ""}
FEED_ENTRY = {"appPath": "", "appUserPath": "", "entitlementPath": "", "ticketPath": ""}
ZERO_VALUES: tuple[Any, ...] = (None, "", False, 0, "0", [], {})


def filled(obj: dict[str, Any], zeros: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with every field of ``zeros`` it lacks, at its zero value (EmitUnpopulated)."""
    return {**{key: _copy(value) for key, value in zeros.items()}, **obj}


def stripped(obj: dict[str, Any], oneof_members: tuple[str, ...] = ()) -> dict[str, Any]:
    """``obj`` without its unpopulated fields (protobuf JSON's default): zero values and enum
    values ending in ``_UNSPECIFIED``; set oneof members stay."""
    return {
        key: value
        for key, value in obj.items()
        if key in oneof_members
        or not (
            any(value == zero and type(value) is type(zero) for zero in ZERO_VALUES)
            or (isinstance(value, str) and value.endswith("_UNSPECIFIED"))
        )
    }


def _copy(value: Any) -> Any:
    return [] if value == [] else {} if value == {} else value


def feed_page(page: dict[str, Any]) -> dict[str, Any]:
    """A grant feed page as EmitUnpopulated writes it."""
    entries = [
        filled({**entry, "feed": filled(entry["feed"], FEED)}, FEED_ENTRY)
        for entry in page.get("list") or []
    ]
    return {
        "list": entries,
        "expanded": page.get("expanded") or [],
        "nextPageToken": page.get("nextPageToken") or "",
    }


def exclusions_page(page: dict[str, Any]) -> dict[str, Any]:
    """An automation exclusions page as EmitUnpopulated writes it."""
    entries = [
        {**entry, "appUserId": entry.get("appUserId", ""), "user": filled(entry["user"], USER)}
        for entry in page.get("list") or []
    ]
    return {"list": entries, "nextPageToken": page.get("nextPageToken") or ""}
