"""Access reviews (campaigns): ``GET /api/v1/access_reviews``, full table like the catalog.

A review's decisions are its certify tasks (the ``tasks`` stream); this stream holds the
campaigns: when each ran, who created it, whether it is closed. The service has no "changed
since" for them and a tenant has few, so every run reads them whole as a snapshot
(snapshots.py).
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.stream import AccessGovStream
from tap_accessgov.paging import QueryPaging, viewed_objects

if t.TYPE_CHECKING:
    import requests

Record = dict[str, t.Any]


class AccessReviewsStream(QueryPaging, AccessGovStream):
    """``GET /api/v1/access_reviews``: the ``accessReview`` of each view, as sent."""

    name = "access_reviews"
    path = "/api/v1/access_reviews"
    primary_keys = ("id",)
    schema = schemas.ACCESS_REVIEW

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``accessReview`` of each view; one without an id is skipped, with a warning."""
        return viewed_objects(response, "accessReview", self.logger)
