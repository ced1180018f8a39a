"""Access reviews (campaigns) and their endpoint, ``GET /api/v1/access_reviews``.

A review's decisions are its certify tasks (emulator/tasks.py builds them from ``Review``);
this module holds only the campaigns: a few closed ones and one still open, so a client sees
decided and undecided certify tasks. The list pages with ``page_size``/``page_token`` in the
query, like every GET list of the service (AccessReviewService.List).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.paging import PageTokens, clamp_page_size, digest_of, paging_params
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns

DAY = 86_400 * NS
OPEN = "ACCESS_REVIEW_STATE_OPEN"
CLOSED = "ACCESS_REVIEW_STATE_CLOSED"
# The zero value of every field a review sends (EmitUnpopulated; emulator/unpopulated.py).
REVIEW_ZEROS: dict[str, Any] = {
    "closedAt": None,
    "completionDate": None,
    "createdAt": None,
    "createdById": "",
    "description": "",
    "displayName": "",
    "id": "",
    "policyId": "",
    "scopeType": "ACCESS_REVIEW_SCOPE_TYPE_UNSPECIFIED",
    "scopingVersion": "0",
    "startedAt": None,
    "state": "ACCESS_REVIEW_STATE_UNSPECIFIED",
    "updatedAt": None,
}


@dataclass(frozen=True)
class Review:
    """One campaign: when it ran (ns) and who created it (a user index)."""

    index: int
    id: str
    name: str
    started_at: int
    closed_at: int | None  # None: still open
    created_by: int

    @property
    def state(self) -> str:
        return OPEN if self.closed_at is None else CLOSED


class AccessReviews:
    """The tenant's campaigns: ``count`` of them, a quarter apart, the newest still open."""

    def __init__(self, seed: Seed, *, count: int, users: list[str], end_ns: int) -> None:
        self.users = users
        self.reviews: list[Review] = []
        for r in range(count):
            started = end_ns - (count - r) * 45 * DAY + seed.mix(60, r) % DAY
            closed = None if r == count - 1 else started + (14 + seed.mix(61, r) % 14) * DAY
            name = f"Quarterly access review {r + 1}"
            creator = seed.mix(62, r) % len(users)
            self.reviews.append(Review(r, seed.id("review", r), name, started, closed, creator))

    def record(self, review: Review) -> dict[str, Any]:
        """The AccessReview object, only its set fields."""
        obj: dict[str, Any] = {
            "id": review.id,
            "displayName": review.name,
            "description": f"{review.name}: every grant of the audited apps",
            "state": review.state,
            "createdAt": format_ns(review.started_at - 2 * DAY),
            "updatedAt": format_ns(review.closed_at or review.started_at),
            "startedAt": format_ns(review.started_at),
            "completionDate": format_ns(review.started_at + 30 * DAY),
            "createdById": self.users[review.created_by],
            "scopeType": "ACCESS_REVIEW_SCOPE_TYPE_BY_ENTITLEMENTS",
            "scopingVersion": "2",
        }
        if review.closed_at is not None:
            obj["closedAt"] = format_ns(review.closed_at)
        return obj


def list_access_reviews(
    reviews: AccessReviews,
    tokens: PageTokens,
    query: dict[str, list[str]],
    *,
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/access_reviews``; unset fields sent empty or omitted."""
    params = paging_params(query)
    digest = digest_of(["access_reviews"])
    start = tokens.decode(params.page_token, digest) if params.page_token else 0
    size = clamp_page_size(params.page_size)
    chosen = reviews.reviews[start : start + size]
    views = []
    for review in chosen:
        obj = reviews.record(review)
        view: dict[str, Any] = {"accessReview": obj}
        if emit_unpopulated:
            view = {
                "accessReview": REVIEW_ZEROS | obj,
                "createdByUserPath": "",
                "policyPath": "",
            }
        views.append(view)
    more = start + size < len(reviews.reviews)
    page: dict[str, Any] = {"list": views}
    token = tokens.encode(start + size, digest) if more else ""
    if emit_unpopulated:
        page |= {"expanded": [], "nextPageToken": token}
    elif token:
        page["nextPageToken"] = token
    return page
