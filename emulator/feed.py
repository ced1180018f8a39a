"""POST /api/v1/grants/feed: request validation, cursor paging and the expand mask.

Validation is protobuf-JSON strict: unknown fields, wrong types and bad timestamps are a 400,
so a client that sends something the real service would reject fails here first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from emulator.dataset import Dataset, Event
from emulator.errors import bad_request
from emulator.paging import PageTokens, clamp_page_size, digest_of
from emulator.timefmt import parse_rfc3339

# JSON name -> proto name; protobuf JSON parsers accept either spelling.
FIELDS = {
    "after": "after",
    "before": "before",
    "appEntitlementRefs": "app_entitlement_refs",
    "appRefs": "app_refs",
    "appUserRefs": "app_user_refs",
    "userRefs": "user_refs",
    "expandMask": "expand_mask",
    "pageSize": "page_size",
    "pageToken": "page_token",
}
REF = {"id": "id"}
SCOPED_REF = {"appId": "app_id", "id": "id"}
# expandMask.paths the service accepts: `*`, or the id fields naming each related object (as on
# its other endpoints); any other path is a 400.
EXPAND_PATHS = ("app_id", "app_entitlement_id", "app_user_id", "ticket_id")
SCAN_BUDGET = 250_000  # events examined per page before answering a short page with a token


def _fields(obj: Any, names: dict[str, str], where: str) -> dict[str, Any]:
    """Map an object's keys (either spelling) to JSON names; 400 on unknown or duplicate."""
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


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise bad_request(f"{where} must be a string")
    return value


def _refs(value: Any, where: str, keys: dict[str, str]) -> list[tuple[str, ...]]:
    """Parse a ref list into tuples ordered like `keys`; every id is required."""
    if not isinstance(value, list):
        raise bad_request(f"{where} must be an array")
    refs = []
    for n, item in enumerate(value):
        fields = _fields(item, keys, f"{where}[{n}]")
        ref = tuple(_string(fields.get(k, ""), f"{where}[{n}].{k}") for k in keys)
        if not all(ref):
            raise bad_request(f"{where}[{n}] needs {' and '.join(keys)}")
        refs.append(ref)
    return refs


def _int32(value: Any, where: str) -> int:
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise bad_request(f"{where} must be an int32")
    return value


def _timestamp(value: Any, where: str) -> int:
    try:
        return parse_rfc3339(_string(value, where))
    except ValueError:
        raise bad_request(f"{where} is not an RFC 3339 date-time") from None


def _expand_paths(value: Any) -> list[str]:
    mask = _fields(value, {"paths": "paths"}, "expandMask")
    paths = mask.get("paths", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise bad_request("expandMask.paths must be an array of strings")
    for path in paths:
        if path != "*" and path not in EXPAND_PATHS:
            raise bad_request(f'unknown expandMask path "{path}"')
    return list(EXPAND_PATHS) if "*" in paths else sorted(set(paths))


def search_grant_feed(ds: Dataset, tokens: PageTokens, body: bytes) -> dict[str, Any]:
    try:
        request = json.loads(body) if body.strip() else {}
    except (ValueError, UnicodeDecodeError):
        raise bad_request("request body is not valid JSON") from None
    req = _fields(request, FIELDS, "request")
    after = _timestamp(req["after"], "after") if "after" in req else None
    before = _timestamp(req["before"], "before") if "before" in req else None
    ent_refs = _refs(req.get("appEntitlementRefs", []), "appEntitlementRefs", SCOPED_REF)
    app_refs = _refs(req.get("appRefs", []), "appRefs", REF)
    user_refs = _refs(req.get("appUserRefs", []), "appUserRefs", SCOPED_REF)
    person_refs = _refs(req.get("userRefs", []), "userRefs", REF)
    paths = _expand_paths(req["expandMask"]) if "expandMask" in req else []
    page_size = clamp_page_size(_int32(req.get("pageSize", 0), "pageSize"))
    page_token = _string(req.get("pageToken", ""), "pageToken")

    refs = [sorted(set(r)) for r in (ent_refs, app_refs, user_refs, person_refs)]
    digest = digest_of(["feed", after, before, refs, paths])
    start = tokens.decode(page_token, digest) if page_token else 0
    flt = ds.make_filter(
        after=after,
        before=before,
        app_ids=[r[0] for r in app_refs],
        app_entitlement_refs=[(r[0], r[1]) for r in ent_refs],
        app_user_refs=[(r[0], r[1]) for r in user_refs],
        user_ids=[r[0] for r in person_refs],
    )
    found, resume = ds.scan(flt, start, page_size, SCAN_BUDGET)
    entries, expanded = _expand(ds, found, paths)
    return {
        "list": entries or None,
        "expanded": expanded or None,
        "nextPageToken": "" if resume is None else tokens.encode(resume, digest),
    }


def _expand(
    ds: Dataset, events: list[Event], paths: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Serialise a page; each expanded object appears once per page, pointed at by path."""
    expanded: list[dict[str, Any]] = []
    where: dict[tuple[Any, ...], str] = {}

    def point(key: tuple[Any, ...], make: Callable[..., dict[str, Any]]) -> str:
        """Path of the object `make(*key[1:])`, expanding it on first use in this page."""
        if key not in where:
            where[key] = f"$.expanded[{len(expanded)}]"
            expanded.append(make(*key[1:]))
        return where[key]

    entries = []
    for e in events:
        entry: dict[str, Any] = {}
        if "app_id" in paths:
            entry["appPath"] = point(("app", e.app), ds.expanded_app)
        if "app_user_id" in paths:
            entry["appUserPath"] = point(("app_user", e.app, e.user), ds.expanded_app_user)
        if "app_entitlement_id" in paths:
            key = ("entitlement", e.app, e.entitlement)
            entry["entitlementPath"] = point(key, ds.expanded_entitlement)
        if "ticket_id" in paths and e.ticket >= 0:
            entry["ticketPath"] = point(("ticket", e.ticket), ds.expanded_ticket)
        entry["feed"] = ds.feed_object(e)
        entries.append(entry)
    return entries, expanded
