"""``attribute_values``: the values of the tenant's attributes, by which an app entitlement
says how risky it is (``riskLevelValueId``) and under which compliance frameworks it falls
(``complianceFrameworkValueIds``: SOX, SOC 2, ISO 27001...). The attribute types are listed
first (``GET /api/v1/attributes/types``), then each type's values: one partition per type."""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.refused import RefusablePartitionsStream
from tap_accessgov.paging import QueryPaging

if t.TYPE_CHECKING:
    import requests
    from singer_sdk.helpers.types import Context

Record = dict[str, t.Any]

TYPES_PATH = "/api/v1/attributes/types"


class AttributeValuesStream(QueryPaging, RefusablePartitionsStream):
    """``GET /api/v1/attributes/types/{attribute_type_id}/values`` for every attribute type."""

    name = "attribute_values"
    path = "/api/v1/attributes/types/{attributeTypeId}/values"
    primary_keys = ("id",)
    schema = schemas.ATTRIBUTE_VALUE

    @override
    def list_partitions(self) -> list[dict[str, t.Any]]:
        """One partition per attribute type (the list of types read through this stream's
        request loop: its own paging, retries and refusal)."""
        return [{"attributeTypeId": found["id"]} for found in self.request_records(None)]

    @override
    def get_url(self, context: Context | None) -> str:
        """The list of attribute types without a partition, else the partition's values."""
        if not context:
            return self.url_base + TYPES_PATH
        return super().get_url(context)

    @override
    def names_a_partition(self, response: requests.Response) -> bool:
        """Not the list of attribute types: its 404 refuses the stream (a release without
        attributes)."""
        return not response.request.path_url.split("?")[0].endswith(TYPES_PATH)

    @override
    def describe(self, context: Context) -> str:
        return f"attribute type {context['attributeTypeId']}"
