"""Opaque, unforgeable page tokens bound to the request they came from.

A token carries the scan position plus a digest of everything that shapes the result except
the page size (which may change between pages), sealed with an HMAC. Replaying it with other
filters is refused, like the real service does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from typing import Any, NamedTuple

from emulator.errors import bad_request

_MAC_SIZE = 16


def digest_of(shape: Any) -> str:
    """A short, canonical digest of a JSON-able request shape."""
    text = json.dumps(shape, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class PageTokens:
    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def _mac(self, raw: bytes) -> bytes:
        return hmac.new(self._key, raw, hashlib.sha256).digest()[:_MAC_SIZE]

    def encode(self, position: int, digest: str) -> str:
        raw = f"{position}:{digest}".encode()
        return base64.urlsafe_b64encode(raw + self._mac(raw)).rstrip(b"=").decode()

    def decode(self, token: str, digest: str) -> int:
        """The position in `token`; 400 if garbled, forged or from another request."""
        try:
            blob = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise bad_request("invalid page token") from None
        raw, mac = blob[:-_MAC_SIZE], blob[-_MAC_SIZE:]
        if len(blob) <= _MAC_SIZE or not hmac.compare_digest(mac, self._mac(raw)):
            raise bad_request("invalid page token")
        position, _, token_digest = raw.decode().partition(":")
        if token_digest != digest:
            raise bad_request("page token does not match request")
        return int(position)


def clamp_page_size(value: int) -> int:
    """0/absent → 25; below 10 → 10; above 100 → 100 (the spec's pagination rules)."""
    if value == 0:
        return 25
    return min(max(value, 10), 100)


# Query names as gRPC-gateway accepts them: proto name or JSON name.
PAGING_QUERY = {
    "page_size": "page_size",
    "pageSize": "page_size",
    "page_token": "page_token",
    "pageToken": "page_token",
}


class PagingParams(NamedTuple):
    page_size: int  # 0 = not given
    page_token: str


def paging_params(query: dict[str, list[str]]) -> PagingParams:
    """``page_size`` and ``page_token`` of a GET list's query string; 400 for any other
    parameter, a repeated one or a page size that is not an integer."""
    params: dict[str, str] = {}
    for key, values in query.items():
        name = PAGING_QUERY.get(key)
        if name is None:
            raise bad_request(f'unknown query parameter "{key}"')
        if name in params or len(values) != 1:
            raise bad_request(f'query parameter "{name}" given more than once')
        params[name] = values[0]
    size_text = params.get("page_size", "") or "0"
    if not size_text.lstrip("-").isdigit():
        raise bad_request("page_size must be an integer")
    return PagingParams(int(size_text), params.get("page_token", ""))


def page_range(
    tokens: PageTokens, digest: str, query: dict[str, list[str]], total: int
) -> tuple[range, str]:
    """The positions of one page of a GET list of ``total`` items (its query strict, see
    ``paging_params``) and the next page token ("" on the last page)."""
    params = paging_params(query)
    start = tokens.decode(params.page_token, digest) if params.page_token else 0
    end = min(start + clamp_page_size(params.page_size), total)
    return range(start, end), tokens.encode(end, digest) if end < total else ""


def list_page(
    items: list[dict[str, Any]], next_token: str, emit_unpopulated: bool, *, expanded: bool = True
) -> dict[str, Any]:
    """A GET list's answer: ``{"list", "expanded", "nextPageToken"}`` all sent under
    EmitUnpopulated (``expanded`` only on the lists whose message has it); otherwise an empty
    list is ``null`` and an empty token is left out, as protobuf JSON omits unset fields."""
    if emit_unpopulated:
        page: dict[str, Any] = {"list": items}
        if expanded:
            page["expanded"] = []
        page["nextPageToken"] = next_token
        return page
    page = {"list": items or None}
    if next_token:
        page["nextPageToken"] = next_token
    return page
