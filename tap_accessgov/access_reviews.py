"""Access reviews (campaigns): ``GET /api/v1/access_reviews``, full table like the catalog.

A review's decisions are its certify tasks (the ``tasks`` stream); this stream holds the
campaigns: when each ran, who created it, whether it is closed. The service has no "changed
since" for them and a tenant has few, so every run reads them whole as a snapshot
(snapshots.py).
"""

from __future__ import annotations

import typing as t

from singer_sdk import typing as th
from typing_extensions import override

from tap_accessgov.catalog import QueryPaging
from tap_accessgov.client import AccessGovStream
from tap_accessgov.paging import page_body
from tap_accessgov.schemas import FREE_FORM, INT64, STRING

if t.TYPE_CHECKING:
    import requests
    from singer_sdk.helpers.types import Context

Record = dict[str, t.Any]

ACCESS_REVIEW = th.PropertiesList(
    th.Property("id", STRING, required=True),
    th.Property("displayName", STRING),
    th.Property("description", STRING),
    th.Property(
        "state", STRING, description="ACCESS_REVIEW_STATE_OPEN, _CLOSED, ... (passed through)"
    ),
    th.Property("createdAt", th.DateTimeType),
    th.Property("updatedAt", th.DateTimeType),
    th.Property("scheduledStartDate", th.DateTimeType),
    th.Property("startedAt", th.DateTimeType),
    th.Property("closedAt", th.DateTimeType),
    th.Property("completionDate", th.DateTimeType, description="When it is due."),
    th.Property("connectorSourcesFrozenAt", th.DateTimeType),
    th.Property("createdById", STRING),
    th.Property("policyId", STRING),
    th.Property("accessReviewTemplateId", STRING),
    th.Property("scopeType", STRING),
    th.Property("scopingVersion", INT64, description="int64, sent as a string by the service."),
    th.Property("reviewInstructions", STRING),
    th.Property("defaultView", STRING),
    th.Property("errorState", STRING),
    th.Property("accuracyIssueAction", STRING),
    th.Property("autoCloseCampaign", th.BooleanType),
    th.Property("autoCloseDecision", STRING),
    th.Property("autoGenerateReport", th.BooleanType),
    th.Property("autoResolve", th.BooleanType),
    th.Property("autoStartCampaign", th.BooleanType),
    th.Property("exemptCertifiedAccessConflicts", th.BooleanType),
    th.Property("expectedTicketCount", th.IntegerType),
    th.Property("hasAccuracySupport", th.BooleanType),
    th.Property("usePolicyOverride", th.BooleanType),
    *(
        th.Property(name, FREE_FORM)
        for name in (
            "bindings",
            "campaignHealth",
            "campaignInsights",
            "columnConfig",
            "exclusionScope",
            "inclusionScope",
            "multiApp",
            "notificationConfig",
            "reviewerAttributeConfig",
            "scope",
            "scopeV2",
            "signatureConfig",
            "singleApp",
        )
    ),
).to_dict()


class AccessReviewsStream(QueryPaging, AccessGovStream):
    """``GET /api/v1/access_reviews``: the ``accessReview`` of each view, as sent."""

    name = "access_reviews"
    path = "/api/v1/access_reviews"
    primary_keys = ("id",)
    schema = ACCESS_REVIEW

    @override
    def get_records(self, context: Context | None) -> t.Iterable[Record]:
        return self.dry_run_limit.apply(self.request_records(context))

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``accessReview`` of each view; one without an id is skipped, with a warning."""
        for view in page_body(response).get("list") or []:
            review = (view or {}).get("accessReview") or {}
            if review.get("id"):
                yield review
            else:
                self.logger.warning("Skipping an access review without an id")
