"""GET /api/v1/apps/{app_id}/entitlements/{app_entitlement_id}/automation/exclusions.

Unlike the feed, the last page omits `nextPageToken` (protobuf drops empty strings), so
clients must treat "absent" and "" alike.
"""

from __future__ import annotations

from typing import Any

from emulator.dataset import Dataset
from emulator.errors import NOT_FOUND, ApiError, bad_request
from emulator.paging import PageTokens, clamp_page_size, digest_of

# Query names as gRPC-gateway accepts them: proto name or JSON name.
QUERY = {
    "page_size": "page_size",
    "pageSize": "page_size",
    "page_token": "page_token",
    "pageToken": "page_token",
}


def list_automation_exclusions(
    ds: Dataset,
    tokens: PageTokens,
    app_id: str,
    entitlement_id: str,
    query: dict[str, list[str]],
    ignore_paging: bool = False,
) -> dict[str, Any]:
    """One page of exclusions. With ``ignore_paging`` the paging parameters are ignored, as a
    gateway does with query parameters the operation does not declare (the published
    description of this operation declares none): every request gets the first page and the
    same ``nextPageToken``."""
    if ignore_paging:
        query = {key: values for key, values in query.items() if key not in QUERY}
    params: dict[str, str] = {}
    for key, values in query.items():
        name = QUERY.get(key)
        if name is None:
            raise bad_request(f'unknown query parameter "{key}"')
        if name in params or len(values) != 1:
            raise bad_request(f'query parameter "{name}" given more than once')
        params[name] = values[0]
    index = ds.entitlement_index(app_id, entitlement_id)
    if index is None or not ds.entitlement_exists(*index):
        raise ApiError(404, NOT_FOUND, "app entitlement not found")
    size_text = params.get("page_size", "") or "0"
    if not size_text.lstrip("-").isdigit():
        raise bad_request("page_size must be an integer")
    page_size = clamp_page_size(int(size_text))
    digest = digest_of(["exclusions", app_id, entitlement_id])
    token = params.get("page_token", "")
    start = tokens.decode(token, digest) if token else 0
    members = ds.exclusion_members(*index)
    end = start + page_size
    page = [ds.exclusion_entry(*index, u) for u in members[start:end]]
    response: dict[str, Any] = {"list": page or None}
    if end < len(members):
        response["nextPageToken"] = tokens.encode(end, digest)
    return response
