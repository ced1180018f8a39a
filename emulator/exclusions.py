"""GET /api/v1/apps/{app_id}/entitlements/{app_entitlement_id}/automation/exclusions.

Unlike the feed, the last page omits `nextPageToken` (protobuf drops empty strings), so
clients must treat "absent" and "" alike.
"""

from __future__ import annotations

from typing import Any

from emulator.dataset import Dataset
from emulator.errors import NOT_FOUND, ApiError
from emulator.paging import PAGING_QUERY, PageTokens, clamp_page_size, digest_of, paging_params


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
        query = {key: values for key, values in query.items() if key not in PAGING_QUERY}
    params = paging_params(query)
    if not ds.has_entitlement(app_id, entitlement_id):
        raise ApiError(404, NOT_FOUND, "app entitlement not found")
    index = ds.entitlement_index(app_id, entitlement_id)
    page_size = clamp_page_size(params.page_size)
    digest = digest_of(["exclusions", app_id, entitlement_id])
    start = tokens.decode(params.page_token, digest) if params.page_token else 0
    members = ds.exclusion_members(*index) if index is not None else []
    end = start + page_size
    page = [ds.exclusion_entry(*index, u) for u in members[start:end]] if index is not None else []
    response: dict[str, Any] = {"list": page or None}
    if end < len(members):
        response["nextPageToken"] = tokens.encode(end, digest)
    return response
