"""Every property of every record schema the tap sends, against the service's newest published
shapes (docs/vendor-openapi/components.json): types, formats, int64 sent as strings,
nullability, maps versus lists, nested objects; and every field the service sends is declared.
A disagreement fails here, so the next change of the service's shapes is caught by CI (once
the vendored copy is updated), not by a user's loader."""

from __future__ import annotations

import copy
import json
import typing as t
from dataclasses import dataclass, field
from functools import cache

import pytest
from conductorone_sdk.models import shared

from tap_accessgov.streams.connectors import NEVER_READ
from tap_accessgov.tap import TapAccessGov
from tests.conftest import ROOT, shared_emulator, tap_config

VENDORED = ROOT / "docs" / "vendor-openapi" / "components.json"

# Properties of the tap's records that are not the service's, and why.
TAP_OWN = {
    "snapshotAt": "the run's snapshot, on every full-table stream (snapshots.py)",
}
# Properties the vendored document lost: the tool that removed descriptions from it removed
# every property named `description` too (no schema of it has one). The vendor's own client
# declares them; test_description_is_the_vendor_clients_string checks that (its 0.17 release
# predates access reviews: the AccessReview's is in the service notes' list of its fields).
LOST_IN_THE_DOCUMENT = {
    ("apps", "description"),
    ("app_entitlements", "description"),
    ("tasks", "description"),
    ("access_reviews", "description"),
}
# Where the tap knowingly differs, and why.
TAP_DECISIONS = {
    ("grant_feed", "date"): "the replication key: an entry without a readable feed.date stops "
    "the run (grant_feed.py), so the record's date is never null",
}


@dataclass
class Shape:
    """A schema reduced to what a loader sees: kind, nullability, items, properties."""

    kind: str  # string, date-time, int64-string, integer, number, boolean, array, object, free,
    # any (any JSON value)
    nullable: bool = False
    items: Shape | None = None
    properties: dict[str, Shape] = field(default_factory=dict)
    open: bool = False  # an object that takes undeclared keys


@cache
def document() -> dict[str, t.Any]:
    return json.loads(VENDORED.read_text())


def vendor_schema(name: str) -> dict[str, t.Any]:
    return document()["components"]["schemas"][name]


# Deeper than any schema of the tap declares properties; the vendor's messages refer to each
# other in cycles, so below this depth an object is taken as free-form.
DEPTH = 4


def vendor_shape(node: dict[str, t.Any], depth: int = 0) -> Shape:
    """The shape of a node of the vendor's document (OpenAPI 3.1)."""
    nullable = False
    if "oneOf" in node:
        members = [m for m in node["oneOf"] if m.get("type") != "null"]
        nullable = len(members) < len(node["oneOf"])
        (node,) = members
    while "$ref" in node:
        node = vendor_schema(node["$ref"].rsplit("/", 1)[1])
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else types
    nullable = nullable or "null" in types
    kinds = [k for k in types if k != "null"]
    if len(kinds) > 1:  # a protobuf Value (a task's tool output): any JSON value
        return Shape("any", nullable)
    (kind,) = kinds
    if kind == "string":
        fmt = node.get("format")
        if fmt in ("int64", "uint64"):
            return Shape("int64-string", nullable)
        return Shape("date-time" if fmt == "date-time" else "string", nullable)
    if kind == "array":
        return Shape("array", nullable, items=vendor_shape(node["items"], depth + 1))
    if kind == "object":
        if depth > DEPTH:
            return Shape("free", nullable)
        properties = {n: vendor_shape(s, depth + 1) for n, s in node.get("properties", {}).items()}
        if "additionalProperties" in node or not properties:
            # a map, a protobuf Any (only "@type" declared) or Struct, an empty message
            return Shape("free", nullable)
        return Shape("object", nullable, properties=properties)
    return Shape(kind, nullable)


def tap_shape(node: dict[str, t.Any]) -> Shape:
    """The shape of a node of a SCHEMA message of the tap (JSON schema)."""
    types = node.get("type", [])
    types = [types] if isinstance(types, str) else types
    nullable = "null" in types
    kinds = [k for k in types if k != "null"]
    if not kinds:
        return Shape("any", nullable)
    (kind,) = kinds
    if kind == "string":
        return Shape("date-time" if node.get("format") == "date-time" else "string", nullable)
    if kind == "array":
        return Shape("array", nullable, items=tap_shape(node["items"]))
    if kind == "object":
        properties = {n: tap_shape(s) for n, s in (node.get("properties") or {}).items()}
        is_open = node.get("additionalProperties") is True
        if not properties and is_open:
            return Shape("free", nullable)
        return Shape("object", nullable, properties=properties, open=is_open)
    return Shape(kind, nullable)


# The kind of the tap's property for each kind the service sends: int64 strings are emitted
# as integers (conformance.py converts them), everything else as sent.
EMITTED_AS = {"int64-string": "integer"}


def disagreements(vendor: Shape, tap: Shape, path: str) -> list[str]:
    """Where the tap's shape does not take every value of the vendor's as a loader would get
    it (after the tap's one conversion, int64 strings to integers)."""
    found = []
    if vendor.nullable and not tap.nullable:
        found.append(f"{path}: the service may send null, the tap's schema does not allow it")
    wanted = EMITTED_AS.get(vendor.kind, vendor.kind)
    if wanted == "any":
        if tap.kind != "any":
            found.append(f"{path}: the service sends any JSON value, the tap declares {tap.kind}")
        return found
    if wanted == "free" or (wanted == "object" and tap.kind == "free"):
        if tap.kind != "free" and not (tap.kind == "object" and tap.open):
            found.append(
                f"{path}: the service sends a free-form object (map, Any, message), "
                f"the tap declares {tap.kind}"
            )
        return found
    if tap.kind != wanted:
        found.append(f"{path}: the service sends {vendor.kind}, the tap declares {tap.kind}")
        return found
    if wanted == "array":
        assert vendor.items is not None
        assert tap.items is not None
        found += disagreements(vendor.items, tap.items, f"{path}[]")
    if wanted == "object":
        for name, sub in tap.properties.items():
            if name not in vendor.properties:
                found.append(f"{path}.{name}: declared by the tap, not in the service's shapes")
            else:
                found += disagreements(vendor.properties[name], sub, f"{path}.{name}")
        if not tap.open:
            found += [
                f"{path}.{name}: sent by the service, not declared by the tap (dropped)"
                for name in vendor.properties.keys() - tap.properties.keys()
            ]
    return found


def record_shapes() -> dict[str, Shape]:
    """What the service sends for each stream's records, as the streams build them."""
    feed = vendor_shape(vendor_schema("c1.api.app.v1.AppEntitlementUserBindingFeed"))
    view = vendor_shape(vendor_schema("c1.api.app.v1.AppEntitlementUserBindingFeedView"))
    expanded = vendor_schema("c1.api.app.v1.SearchGrantFeedResponse")["properties"]["expanded"]
    any_object = vendor_shape(expanded["items"])
    any_object.nullable = True  # set only when the expand mask asks, and the path resolves
    exclusion = vendor_shape(vendor_schema("c1.api.app.v1.UserWithAppEntitlementUserBindingView"))
    user = vendor_shape(vendor_schema("c1.api.user.v1.User"))
    binding = vendor_shape(vendor_schema("c1.api.app.v1.AppEntitlementUserView"))
    lifted = ("date", "appId", "appEntitlementId", "appUserId", "eventType")
    user_fields = {k: v for k, v in user.properties.items() if k != "id"}
    string = Shape("string")
    connector = vendor_shape(vendor_schema("c1.api.app.v1.Connector"))
    return {
        "grant_feed": Shape(
            "object",
            properties={name: feed.properties[name] for name in lifted}
            | view.properties
            | dict.fromkeys(("app", "appUser", "entitlement", "ticket"), any_object),
        ),
        "apps": vendor_shape(vendor_schema("c1.api.app.v1.App")),
        "app_entitlements": vendor_shape(vendor_schema("c1.api.app.v1.AppEntitlement")),
        # the entry's user goes whole to the users stream; the record keeps its id
        "automation_exclusions": Shape(
            "object",
            properties={k: v for k, v in exclusion.properties.items() if k != "user"}
            | {"userId": user.properties["id"]},
        ),
        "users": user,
        "app_users": vendor_shape(vendor_schema("c1.api.app.v1.AppUser")),
        # the binding without its account (a record of app_users)
        "grants": Shape(
            "object",
            properties={k: v for k, v in binding.properties.items() if k != "appUser"},
        ),
        # the ``task`` of each TaskView, the ``accessReview`` of each AccessReviewView
        "tasks": vendor_shape(vendor_schema("c1.api.task.v1.Task")),
        "access_reviews": vendor_shape(vendor_schema("c1.api.accessreview.v1.AccessReview")),
        # what an audit is scoped by: the object of each view, or of each list entry
        "app_resource_types": vendor_shape(vendor_schema("c1.api.app.v1.AppResourceType")),
        "app_resources": vendor_shape(vendor_schema("c1.api.app.v1.AppResource")),
        # an owner is a user, its id as userId, beside what it owns
        "app_owners": Shape(
            "object",
            properties={"appId": string, "userId": user.properties["id"]} | user_fields,
        ),
        "entitlement_owners": Shape(
            "object",
            properties={"appId": string, "appEntitlementId": string, "userId": string}
            | user_fields,
        ),
        "attribute_values": vendor_shape(vendor_schema("c1.api.attribute.v1.AttributeValue")),
        "iam_roles": vendor_shape(vendor_schema("c1.api.iam.v1.Role")),
        # never its credentials nor its signed link (streams/connectors.py)
        "connectors": Shape(
            "object",
            properties={k: v for k, v in connector.properties.items() if k not in NEVER_READ},
        ),
    }


@pytest.fixture(scope="module")
def sent_schemas() -> dict[str, dict[str, t.Any]]:
    """The SCHEMA of each stream as the tap sends it (discovery), with every expanded object
    asked for (without ``expand_mask`` the grant feed declares none: test_streams.py)."""
    config = {**tap_config(shared_emulator()), "expand_mask": ["*"]}
    tap = TapAccessGov(config=config, parse_env_config=False)
    return {entry["tap_stream_id"]: entry["schema"] for entry in tap.catalog_dict["streams"]}


def exempt(stream: str, schema: dict[str, t.Any]) -> dict[str, t.Any]:
    """The schema without the properties that are not the service's (TAP_OWN, and those the
    document lost), with TAP_DECISIONS taken as the service's."""
    schema = copy.deepcopy(schema)
    for name in list(schema["properties"]):
        if name in TAP_OWN or (stream, name) in LOST_IN_THE_DOCUMENT:
            del schema["properties"][name]
        elif (stream, name) in TAP_DECISIONS:
            types = schema["properties"][name]["type"]
            schema["properties"][name]["type"] = [
                *([types] if isinstance(types, str) else types),
                "null",
            ]
    return schema


@pytest.mark.parametrize("stream", list(record_shapes()))
def test_every_property_agrees_with_the_service_newest_shapes(stream, sent_schemas) -> None:
    vendor = record_shapes()[stream]
    assert disagreements(vendor, tap_shape(exempt(stream, sent_schemas[stream])), stream) == []


def test_the_comparison_finds_each_kind_of_disagreement(sent_schemas) -> None:
    """The shapes the tap declared before (annotations a list) and others a mistake could
    make are each reported."""
    schema = copy.deepcopy(sent_schemas["apps"])
    props = schema["properties"]
    props["annotations"] = {"type": ["array", "null"], "items": {"type": "object"}}
    props["userCount"] = {"type": ["string", "null"]}
    props["createdAt"] = {"type": ["string"], "format": "date-time"}
    props["updatedAt"] = {"type": ["string", "null"]}
    props["madeUp"] = {"type": ["string", "null"]}
    del props["revokeGrantSources"]
    found = disagreements(record_shapes()["apps"], tap_shape(exempt("apps", schema)), "apps")
    assert sorted(found) == sorted(
        [
            "apps.annotations: the service sends a free-form object (map, Any, message), the "
            "tap declares array",
            "apps.userCount: the service sends int64-string, the tap declares string",
            "apps.createdAt: the service may send null, the tap's schema does not allow it",
            "apps.updatedAt: the service sends date-time, the tap declares string",
            "apps.madeUp: declared by the tap, not in the service's shapes",
            "apps.revokeGrantSources: sent by the service, not declared by the tap (dropped)",
        ]
    )
    nested = copy.deepcopy(sent_schemas["users"])
    nested["properties"]["emailSources"]["items"]["properties"]["priority"] = {"type": "string"}
    found = disagreements(record_shapes()["users"], tap_shape(exempt("users", nested)), "users")
    assert found == [
        "users.emailSources[].priority: the service sends integer, the tap declares string"
    ]


@pytest.mark.parametrize(
    ("stream", "model"),
    [
        ("apps", shared.App),
        ("app_entitlements", shared.AppEntitlement),
        ("tasks", shared.Task),
    ],
)
def test_description_is_the_vendor_clients_string(stream, model, sent_schemas) -> None:
    """The one property the vendored document lost (LOST_IN_THE_DOCUMENT), from the vendor's
    generated client instead: an optional string."""
    assert (stream, "description") in LOST_IN_THE_DOCUMENT
    assert model.model_fields["description"].annotation == t.Optional[str]  # noqa: UP045
    assert sent_schemas[stream]["properties"]["description"]["type"] == ["string", "null"]
    assert "description" not in json.dumps(document()["components"]["schemas"])
