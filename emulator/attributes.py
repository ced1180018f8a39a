"""Attributes: the types and values an administrator rates app entitlements with, and their
endpoints ``GET /api/v1/attributes/types``, ``GET /api/v1/attributes/types/{id}/values``,
``GET /api/v1/attributes/risk_levels`` and ``GET /api/v1/attributes/compliance_frameworks``.

The tenant has a risk level type (Low ... Critical), a compliance framework type (SOX, SOC 2,
ISO 27001, ...) and a data sensitivity type nothing points at from an entitlement. Most app
entitlements carry one risk level (``riskLevelValueId``) and zero to three frameworks
(``complianceFrameworkValueIds``); some carry none (``""`` / ``[]``). The ratings draw from
generators of their own (``{seed}-scoping:...``), so the catalog's other fields keep their
values. Shapes from the vendor's published OpenAPI (``c1.api.attribute.v1.AttributeType``,
``AttributeValue``); an unknown type is 404.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from emulator import unpopulated
from emulator.errors import NOT_FOUND, ApiError
from emulator.paging import PageTokens, digest_of, list_page, page_range
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise

DAY = 86_400 * NS
RISK_LEVEL = "risk_level"
COMPLIANCE_FRAMEWORK = "compliance_framework"
# (key, name, values) of each type, in the order the service lists them.
TYPES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (RISK_LEVEL, "Risk Level", ("Low", "Medium", "High", "Critical")),
    (
        COMPLIANCE_FRAMEWORK,
        "Compliance Framework",
        (
            "SOX",
            "SOC 2",
            "ISO 27001",
            "HIPAA",
            "PCI DSS",
            "GDPR",
            "NIST 800-53",
            "FedRAMP",
            "CCPA",
            "DORA",
            "NIS2",
            "ISO 27701",
        ),
    ),
    ("data_sensitivity", "Data Sensitivity", ("Public", "Internal", "Confidential", "Restricted")),
)


class Rating(NamedTuple):
    """What an app entitlement is rated with: a risk level value id (or ``""``) and
    framework value ids."""

    risk_level: str
    frameworks: tuple[str, ...]


class Attributes:
    """The attribute types and their values, and each app entitlement's ratings (drawn per
    app on first use)."""

    def __init__(self, seed: Seed, end_ns: int) -> None:
        self._seed = seed.value
        self.end_ns = end_ns
        self.type_ids = [seed.id("attribute-type", key) for key, _, _ in TYPES]
        self.value_ids = [
            [seed.id("attribute-value", key, value) for value in values] for key, _, values in TYPES
        ]
        self._type_index = {type_id: t for t, type_id in enumerate(self.type_ids)}
        self._ratings: dict[int, list[Rating]] = {}

    def type_index(self, type_id: str) -> int | None:
        return self._type_index.get(type_id)

    def type_of(self, key: str) -> int:
        return next(t for t, (name, _, _) in enumerate(TYPES) if name == key)

    def type_record(self, t: int) -> dict[str, Any]:
        return {"id": self.type_ids[t], "name": TYPES[t][1]}

    def value_record(self, t: int, v: int) -> dict[str, Any]:
        """Value ``v`` of type ``t`` with every field present (EmitUnpopulated)."""
        rng = random.Random(f"{self._seed}-scoping:attribute-value:{t}:{v}")
        created = self.end_ns - rng.randrange(200, 900) * DAY - rng.randrange(DAY)
        created = precise(created, rng.choice((0, 3, 6, 9)))
        updated = created if rng.random() < 0.6 else created + rng.randrange(100 * DAY)
        return {
            "attributeTypeId": self.type_ids[t],
            "createdAt": format_ns(created),
            "deletedAt": None,
            "id": self.value_ids[t][v],
            "updatedAt": format_ns(precise(updated, rng.choice((0, 3, 6, 9)))),
            "value": TYPES[t][2][v],
        }

    def values(self, t: int) -> list[dict[str, Any]]:
        return [self.value_record(t, v) for v in range(len(TYPES[t][2]))]

    def ratings(self, position: int, count: int) -> list[Rating]:
        """The ratings of the ``count`` entitlements of the catalog's app at ``position``:
        four in five carry a risk level, seven in ten one to three frameworks."""
        if (found := self._ratings.get(position)) is not None and len(found) == count:
            return found
        rng = random.Random(f"{self._seed}-scoping:ratings:{position}")
        risks = self.value_ids[self.type_of(RISK_LEVEL)]
        frameworks = self.value_ids[self.type_of(COMPLIANCE_FRAMEWORK)]
        rated = []
        for _ in range(count):
            risk = rng.choices(risks, (4, 5, 3, 1))[0] if rng.random() < 0.8 else ""
            chosen = rng.sample(frameworks, rng.randint(1, 3)) if rng.random() < 0.7 else []
            rated.append(Rating(risk, tuple(chosen)))
        self._ratings[position] = rated
        return rated


def _items(objects: list[dict[str, Any]], emit_unpopulated: bool) -> list[dict[str, Any]]:
    return objects if emit_unpopulated else [unpopulated.stripped(obj) for obj in objects]


def list_attribute_types(
    attributes: Attributes,
    tokens: PageTokens,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/attributes/types``."""
    digest = digest_of(["attribute_types"])
    positions, next_token = page_range(tokens, digest, query, len(TYPES))
    types = [attributes.type_record(t) for t in positions]
    return list_page(_items(types, emit_unpopulated), next_token, emit_unpopulated, expanded=False)


def list_attribute_values(
    attributes: Attributes,
    tokens: PageTokens,
    type_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/attributes/types/{attribute_type_id}/values``; 404 for an
    unknown type."""
    t = attributes.type_index(type_id)
    if t is None:
        raise ApiError(404, NOT_FOUND, "attribute type not found")
    return _values_page(
        attributes, tokens, t, ["attribute_values", type_id], query, emit_unpopulated
    )


def list_type_values(
    attributes: Attributes,
    tokens: PageTokens,
    key: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/attributes/risk_levels`` (``key`` RISK_LEVEL) or
    ``.../compliance_frameworks`` (COMPLIANCE_FRAMEWORK): the values of that type."""
    t = attributes.type_of(key)
    return _values_page(attributes, tokens, t, [key], query, emit_unpopulated)


def _values_page(
    attributes: Attributes,
    tokens: PageTokens,
    t: int,
    shape: list[str],
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    values = attributes.values(t)
    positions, next_token = page_range(tokens, digest_of(shape), query, len(values))
    page = [values[p] for p in positions]
    return list_page(_items(page, emit_unpopulated), next_token, emit_unpopulated, expanded=False)
