"""Record schemas, declared once and typed, with the API's own (camelCase) field names.

Enums (``eventType``, ``status``, ``directoryStatus``, ``type``) are plain strings: the service
adds values over time and the tap must pass unknown ones through.
"""

from __future__ import annotations

from singer_sdk import typing as th

STRING = th.StringType
STRINGS = th.ArrayType(th.StringType)

ATTRIBUTE_SOURCE = th.ObjectType(
    th.Property("appId", STRING),
    th.Property("appUserId", STRING),
    th.Property("appUserProfileAttributeKey", STRING),
    th.Property("userAttributeMappingId", STRING),
    th.Property("value", STRING),
)
SOURCES = th.ArrayType(ATTRIBUTE_SOURCE)

EXPANDED_OBJECT = th.ObjectType(
    th.Property("@type", STRING, description="Protobuf Any type URL of the expanded object."),
    th.Property("id", STRING),
    additional_properties=True,
)

GRANT_FEED = th.PropertiesList(
    th.Property(
        "date",
        th.DateTimeType,
        required=True,
        description="feed.date normalised to UTC with 9 fractional digits (replication key).",
    ),
    th.Property("appId", STRING, required=True, description="feed.appId (primary key part)."),
    th.Property(
        "appEntitlementId", STRING, required=True, description="feed.appEntitlementId (key part)."
    ),
    th.Property("appUserId", STRING, required=True, description="feed.appUserId (key part)."),
    th.Property(
        "eventType",
        STRING,
        required=True,
        description=(
            "feed.eventType (key part); GRANT_EVENT_TYPE_UNSPECIFIED when the service omits it. "
            "Unknown values are passed through."
        ),
    ),
    th.Property(
        "feed",
        th.ObjectType(
            th.Property("appEntitlementId", STRING),
            th.Property("appId", STRING),
            th.Property("appUserId", STRING),
            th.Property("date", th.DateTimeType, description="As sent by the service."),
            th.Property("eventType", STRING),
            th.Property("ticketId", STRING),
        ),
        description="The grant event exactly as the service sent it.",
    ),
    th.Property("appPath", STRING, description="JSONPath into the page's expanded objects."),
    th.Property("appUserPath", STRING),
    th.Property("entitlementPath", STRING),
    th.Property("ticketPath", STRING),
    th.Property("app", EXPANDED_OBJECT, description="The expanded app (expand_mask)."),
    th.Property("appUser", EXPANDED_OBJECT, description="The expanded app user (expand_mask)."),
    th.Property(
        "entitlement", EXPANDED_OBJECT, description="The expanded app entitlement (expand_mask)."
    ),
    th.Property("ticket", EXPANDED_OBJECT, description="The expanded ticket (expand_mask)."),
).to_dict()

AUTOMATION_EXCLUSION = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("appEntitlementId", STRING, required=True),
    th.Property("userId", STRING, required=True, description="user.id; the user is in `users`."),
    th.Property("appUserId", STRING),
).to_dict()

USER = th.PropertiesList(
    th.Property("id", STRING, required=True),
    th.Property("createdAt", th.DateTimeType),
    th.Property("updatedAt", th.DateTimeType),
    th.Property("deletedAt", th.DateTimeType),
    th.Property("delegatedUserId", STRING),
    th.Property("department", STRING),
    th.Property("departmentSources", SOURCES),
    th.Property("directoryIds", STRINGS),
    th.Property("directoryStatus", STRING, description="UNKNOWN, ENABLED, DISABLED, DELETED, ..."),
    th.Property("directoryStatusSources", SOURCES),
    th.Property("displayName", STRING),
    th.Property("email", STRING),
    th.Property("emailSources", SOURCES),
    th.Property("emails", STRINGS),
    th.Property("employeeIds", STRINGS),
    th.Property("employeeIdSources", SOURCES),
    th.Property("employmentStatus", STRING),
    th.Property("employmentStatusSources", SOURCES),
    th.Property("employmentType", STRING),
    th.Property("employmentTypeSources", SOURCES),
    th.Property("jobTitle", STRING),
    th.Property("jobTitleSources", SOURCES),
    th.Property("managerIds", STRINGS),
    th.Property("managerSources", SOURCES),
    th.Property("profile", th.ObjectType(additional_properties=True)),
    th.Property("roleIds", STRINGS),
    th.Property("status", STRING, description="UNKNOWN, ENABLED, DISABLED, DELETED, ..."),
    th.Property("type", STRING, description="USER_TYPE_HUMAN, USER_TYPE_SERVICE, ..."),
    th.Property("username", STRING),
    th.Property("usernameSources", SOURCES),
    th.Property("usernames", STRINGS),
).to_dict()
