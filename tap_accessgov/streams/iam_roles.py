"""``iam_roles``: the roles of the service itself (a directory user's ``roleIds``): who
administers the governance service, which auditors ask for first."""

from __future__ import annotations

from tap_accessgov import schemas
from tap_accessgov.engine.refused import RefusableStream
from tap_accessgov.paging import QueryPaging


class IamRolesStream(QueryPaging, RefusableStream):
    """``GET /api/v1/iam/roles``: every role, every field the service sends."""

    name = "iam_roles"
    path = "/api/v1/iam/roles"
    primary_keys = ("id",)
    schema = schemas.IAM_ROLE
