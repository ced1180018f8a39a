"""Field shapes across the service's releases, on every endpoint.

The service does not promise today's shapes: ``annotations`` on App and AppEntitlement was a
list in the releases the vendor's 2024 and 2025 SDKs describe and is a key/value map in the
newest published description (docs/vendor-openapi/), and fields appear in any release. The
tenant's objects are built in the newest shapes (catalog.py, users.py, feed.py); this module
turns one endpoint's answer into the shapes of another release, as the last step before it is
sent (``Emulator.shapes``):

- ``newest`` (default): as built, the vendor's newest published shapes;
- ``older``: a 2024-2025 release: ``annotations`` a list of protobuf Any objects, and none of
  the fields added since (App ``appUserMapper``, ``enableConnectorSourcedOwnership``,
  ``matchBatonRef``, ``revokeGrantSources``; AppEntitlement ``overrideAccessRequestsDefaults``,
  ``userEditedMask``; User ``origin``, the sources' ``priority``; AppResource
  ``accessConfigId``, ``agentTrait``, ``annotations``, ``externalId``, ``nhiDetail``,
  ``nhiType``, ``profile`` and its view's ``objectPermissions``; Connector
  ``configUpdatedAt``, ``connectorApiVersion``, ``connectorSyncCronSchedule``,
  ``parallelSyncWorkerCount``: what the vendor's 2025 Python SDK, 0.17.2, lacks), nor the v2
  owner list (service.py answers it 404);
- ``changed``: a release that changed a field's type on every endpoint, as a future one may:
  App ``monthlyCostUsd`` a google.type.Money and ``annotations`` back to a list;
  AppEntitlement ``durationGrant`` a protobuf Duration object and ``sourceConnectorIds`` a
  list; User ``department`` an object, ``createdAt`` epoch seconds, ``profile`` JSON text and
  ``managerIds`` references (in every list of Users: the directory, exclusions, owners, an
  app's ``appOwners``); an exclusion's ``appUserId`` an AppUserRef; a grant event's
  ``ticketId`` a number; AppResource ``grantCount`` a number and ``annotations`` a list;
  ``createdAt`` epoch seconds on AppResourceType, AttributeValue, Role and the v2 owner;
  AttributeType ``name`` a localized text object; ConnectorStatus ``status`` the enum's
  number.

Every answer is built anew for each request, so the changes are made on the answer itself.
"""

from __future__ import annotations

import json
from typing import Any

from emulator.timefmt import format_ns, parse_rfc3339

SHAPES = ("newest", "older", "changed")
ANNOTATION_TYPE = "type.googleapis.com/c1.api.app.v1.Annotation"
NEWER_APP_FIELDS = (
    "appUserMapper",
    "enableConnectorSourcedOwnership",
    "matchBatonRef",
    "revokeGrantSources",
)
NEWER_ENTITLEMENT_FIELDS = ("overrideAccessRequestsDefaults", "userEditedMask")
NEWER_RESOURCE_FIELDS = (
    "accessConfigId",
    "agentTrait",
    "annotations",
    "externalId",
    "nhiDetail",
    "nhiType",
    "profile",
)
NEWER_CONNECTOR_FIELDS = (
    "configUpdatedAt",
    "connectorApiVersion",
    "connectorSyncCronSchedule",
    "parallelSyncWorkerCount",
)
SYNC_STATUSES = (
    "SYNC_STATUS_UNSPECIFIED",
    "SYNC_STATUS_RUNNING",
    "SYNC_STATUS_DONE",
    "SYNC_STATUS_ERROR",
    "SYNC_STATUS_DISABLED",
)
SOURCES = (
    "departmentSources",
    "directoryStatusSources",
    "emailSources",
    "employeeIdSources",
    "employmentStatusSources",
    "employmentTypeSources",
    "jobTitleSources",
    "managerSources",
    "usernameSources",
)
Page = dict[str, Any]


def _listed(annotations: Any) -> Any:
    """The older shape of an annotations map: a list of Any objects, one per key."""
    if not isinstance(annotations, dict):
        return annotations
    return [{"@type": ANNOTATION_TYPE, "key": k, "value": v} for k, v in annotations.items()]


def _items(page: Page) -> list[Any]:
    return page.get("list") or []


def apps(page: Page, shapes: str) -> Page:
    """A page of ``GET /api/v1/apps`` in ``shapes``."""
    if shapes == "newest":
        return page
    for app in _items(page):
        if "annotations" in app:
            app["annotations"] = _listed(app["annotations"])
        for owner in app.get("appOwners") or []:
            user(owner, shapes)
        if shapes == "older":
            for name in NEWER_APP_FIELDS:
                app.pop(name, None)
        elif "monthlyCostUsd" in app:
            app["monthlyCostUsd"] = {"currencyCode": "USD", "units": str(app["monthlyCostUsd"])}
    return page


def app_entitlements(page: Page, shapes: str) -> Page:
    """A page of ``GET /api/v1/apps/{app_id}/entitlements`` in ``shapes``."""
    for view in _items(page):
        entitlement = view.get("appEntitlement") or {}
        if shapes == "older":
            if "annotations" in entitlement:
                entitlement["annotations"] = _listed(entitlement["annotations"])
            for name in NEWER_ENTITLEMENT_FIELDS:
                entitlement.pop(name, None)
        elif shapes == "changed":
            if "durationGrant" in entitlement:
                seconds = entitlement["durationGrant"].removesuffix("s")
                entitlement["durationGrant"] = {"seconds": seconds, "nanos": 0}
            if "sourceConnectorIds" in entitlement:
                entitlement["sourceConnectorIds"] = list(entitlement["sourceConnectorIds"])
    return page


def user(obj: dict[str, Any], shapes: str) -> dict[str, Any]:
    """A User (of the directory or inside an exclusion entry) in ``shapes``."""
    if shapes == "older":
        obj.pop("origin", None)
        for name in SOURCES:
            for source in obj.get(name) or []:
                source.pop("priority", None)
    elif shapes == "changed":
        if obj.get("department"):
            obj["department"] = {
                "id": f"dep-{obj['department'].lower()}",
                "name": obj["department"],
            }
        if obj.get("createdAt"):
            obj["createdAt"] = parse_rfc3339(obj["createdAt"]) // 1_000_000_000
        if "profile" in obj:
            obj["profile"] = json.dumps(obj["profile"])
        if obj.get("managerIds"):
            obj["managerIds"] = [{"id": manager} for manager in obj["managerIds"]]
    return obj


def directory(page: Page, shapes: str) -> Page:
    """A page of the directory (``GET /api/v1/users``) in ``shapes``: each view's User as the
    exclusion entries' users are."""
    for view in _items(page):
        if isinstance(view, dict) and isinstance(view.get("user"), dict):
            user(view["user"], shapes)
    return page


def automation_exclusions(page: Page, shapes: str) -> Page:
    """A page of automation exclusions in ``shapes``."""
    for entry in _items(page):
        if isinstance(entry.get("user"), dict):
            user(entry["user"], shapes)
        if shapes == "changed" and entry.get("appUserId"):
            entry["appUserId"] = {"appId": entry.get("appId", ""), "id": entry["appUserId"]}
    return page


def grant_feed(page: Page, shapes: str) -> Page:
    """A page of the grant feed in ``shapes`` (only ``changed`` differs)."""
    if shapes == "changed":
        for entry in _items(page):
            feed = entry.get("feed") or {}
            if feed.get("ticketId"):
                feed["ticketId"] = int.from_bytes(feed["ticketId"].encode()[-6:], "big")
    return page


def past_grants(page: Page, shapes: str) -> Page:
    """A page of ended grants in ``shapes``: an ``older`` release sends no ``history.id``
    (added in August 2026)."""
    if shapes == "older":
        for view in _items(page):
            (view.get("history") or {}).pop("id", None)
    return page


def system_log(page: Page, shapes: str) -> Page:
    """A page of system log events in ``shapes``: an ``older`` release sends sign-ins
    without ``time`` (some event types lacked it until August 2026); ``changed`` sends
    ``time`` as RFC 3339 text instead of epoch milliseconds."""
    for event in _items(page):
        if shapes == "older" and event.get("class_uid") == 3002:
            event.pop("time", None)
        elif shapes == "changed" and isinstance(event.get("time"), int):
            event["time"] = format_ns(event["time"] * 1_000_000)
    return page


def _epoch_seconds(obj: dict[str, Any], name: str = "createdAt") -> None:
    """A timestamp field as epoch seconds (a number) instead of RFC 3339 text."""
    if obj.get(name):
        obj[name] = parse_rfc3339(obj[name]) // 1_000_000_000


def resource_types(page: Page, shapes: str) -> Page:
    """A page of an app's resource types in ``shapes`` (only ``changed`` differs)."""
    if shapes == "changed":
        for view in _items(page):
            _epoch_seconds(view.get("appResourceType") or {})
    return page


def resource_type_search(page: Page, shapes: str) -> Page:
    """A page of the resource type search (bare AppResourceTypes) in ``shapes``."""
    if shapes == "changed":
        for item in _items(page):
            _epoch_seconds(item)
    return page


def resources(page: Page, shapes: str) -> Page:
    """A page of a resource type's resources in ``shapes``."""
    for view in _items(page):
        resource = view.get("appResource") or {}
        if shapes == "older":
            view.pop("objectPermissions", None)
            for name in NEWER_RESOURCE_FIELDS:
                resource.pop(name, None)
        elif shapes == "changed":
            if "grantCount" in resource:
                resource["grantCount"] = int(resource["grantCount"])
            if "annotations" in resource:
                resource["annotations"] = _listed(resource["annotations"])
    return page


def owners(page: Page, shapes: str) -> Page:
    """A page of an app's or an entitlement's owners (Users) in ``shapes``."""
    for owner in _items(page):
        user(owner, shapes)
    return page


def owner_users(page: Page, shapes: str) -> Page:
    """A page of the v2 owner list in ``shapes`` (an ``older`` release has no such list)."""
    for item in _items(page):
        if isinstance(item.get("user"), dict):
            user(item["user"], shapes)
        if shapes == "changed":
            _epoch_seconds(item)
    return page


def attribute_types(page: Page, shapes: str) -> Page:
    """A page of attribute types in ``shapes`` (only ``changed`` differs)."""
    if shapes == "changed":
        for item in _items(page):
            if "name" in item:
                item["name"] = {"text": item["name"], "locale": "en"}
    return page


def attribute_values(page: Page, shapes: str) -> Page:
    """A page of attribute values in ``shapes`` (only ``changed`` differs)."""
    if shapes == "changed":
        for item in _items(page):
            _epoch_seconds(item)
    return page


def roles(page: Page, shapes: str) -> Page:
    """A page of the service's roles in ``shapes`` (only ``changed`` differs)."""
    if shapes == "changed":
        for item in _items(page):
            _epoch_seconds(item)
    return page


def connectors(page: Page, shapes: str) -> Page:
    """A page of an app's connectors in ``shapes``."""
    for view in _items(page):
        connector = view.get("connector") or {}
        if shapes == "older":
            for name in NEWER_CONNECTOR_FIELDS:
                connector.pop(name, None)
        elif shapes == "changed" and isinstance(connector.get("status"), dict):
            status = connector["status"]
            if status.get("status") in SYNC_STATUSES:
                status["status"] = SYNC_STATUSES.index(status["status"])
    return page
