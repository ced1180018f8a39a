"""Record schemas, declared once and typed, with the API's own (camelCase) field names.

They follow the service's newest published shapes (docs/vendor-openapi/components.json;
tests/test_vendor_schemas.py compares every property with it). Enums (``eventType``,
``status``, ``directoryStatus``, ``type``) are plain strings: the service adds values over time
and the tap must pass unknown ones through. Free-form values (maps such as ``annotations``,
``profile``, nested messages the tap does not look into, protobuf Any) are objects that accept
any keys and values, so any JSON object passes. A value the service sends in a shape its
schema does not allow is handled once for every stream (conformance.py).
"""

from __future__ import annotations

import typing as t

from singer_sdk import typing as th

STRING = th.StringType
STRINGS = th.ArrayType(th.StringType)

# When the service created, last changed and deleted an object (unset: null).
_LIFETIME = (
    th.Property("createdAt", th.DateTimeType),
    th.Property("updatedAt", th.DateTimeType),
    th.Property("deletedAt", th.DateTimeType),
)

ATTRIBUTE_SOURCE = th.ObjectType(
    th.Property("appId", STRING),
    th.Property("appUserId", STRING),
    th.Property("appUserProfileAttributeKey", STRING),
    th.Property("priority", th.IntegerType),
    th.Property("userAttributeMappingId", STRING),
    th.Property("value", STRING),
)
SOURCES = th.ArrayType(ATTRIBUTE_SOURCE)
# A free-form object: a map (map<string, string> in the service's shapes), a nested message
# the tap passes on whole, a protobuf Struct. Any JSON object passes.
FREE_FORM = th.ObjectType(additional_properties=True)

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

# A directory user's fields but its id: a user, and an owner of an app or an entitlement.
_USER_FIELDS: tuple[th.Property[t.Any], ...] = (
    *_LIFETIME,
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
    th.Property(
        "origin", STRING, description="USER_ORIGIN_DIRECTORY, _LOCAL, _SYSTEM, ... (passed through)"
    ),
    th.Property("profile", FREE_FORM, description="Free-form (protobuf Struct)."),
    th.Property("roleIds", STRINGS),
    th.Property("status", STRING, description="UNKNOWN, ENABLED, DISABLED, DELETED, ..."),
    th.Property("type", STRING, description="USER_TYPE_HUMAN, USER_TYPE_SERVICE, ..."),
    th.Property("username", STRING),
    th.Property("usernameSources", SOURCES),
    th.Property("usernames", STRINGS),
)
USER = th.PropertiesList(th.Property("id", STRING, required=True), *_USER_FIELDS).to_dict()

# int64 values, which protobuf JSON sends as strings: integers in the records (a warehouse
# sums them; a bigint holds every int64), converted by conformance.py.
INT64 = th.IntegerType
OBJECTS = th.ArrayType(FREE_FORM)

APP = th.PropertiesList(
    th.Property("id", STRING, required=True),
    th.Property("displayName", STRING),
    th.Property("description", STRING),
    th.Property(
        "accessModel",
        STRING,
        description="APP_ACCESS_MODEL_CLASSIC, _HYBRID, _SPARSE, ... (unknown values pass through)",
    ),
    th.Property("annotations", FREE_FORM, description="Key/value map (string values)."),
    th.Property("appAccountId", STRING),
    th.Property("appAccountName", STRING),
    th.Property("appOwners", OBJECTS, description="Users (free-form)."),
    th.Property("appUserMapper", FREE_FORM),
    th.Property("certifyPolicyId", STRING),
    th.Property("connectorVersion", th.IntegerType),
    *_LIFETIME,
    th.Property("defaultRequestCatalogId", STRING),
    th.Property("enableConnectorSourcedOwnership", th.BooleanType),
    th.Property("fieldMask", STRING),
    th.Property("grantPolicyId", STRING),
    th.Property("iconUrl", STRING),
    th.Property("identityMatching", STRING),
    th.Property("instructions", STRING),
    th.Property("isDirectory", th.BooleanType),
    th.Property("isManuallyManaged", th.BooleanType),
    th.Property("logoUri", STRING),
    th.Property("matchBatonRef", FREE_FORM),
    th.Property("monthlyCostUsd", th.IntegerType),
    th.Property("parentAppId", STRING),
    th.Property("revokeGrantSources", th.BooleanType),
    th.Property("revokePolicyId", STRING),
    th.Property("strictAccessEntitlementProvisioning", th.BooleanType),
    th.Property("userCount", INT64, description="int64, sent as a string by the service."),
).to_dict()

APP_ENTITLEMENT = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("id", STRING, required=True, description="Unique only within its app."),
    th.Property("displayName", STRING),
    th.Property("description", STRING),
    th.Property("alias", STRING),
    th.Property("slug", STRING),
    th.Property("annotations", FREE_FORM, description="Key/value map (string values)."),
    th.Property("appResourceId", STRING),
    th.Property("appResourceTypeId", STRING),
    th.Property("certifyPolicyId", STRING),
    th.Property("complianceFrameworkValueIds", STRINGS),
    *_LIFETIME,
    th.Property("defaultValuesApplied", th.BooleanType),
    th.Property("deprovisionerPolicy", FREE_FORM),
    th.Property("provisionerPolicy", FREE_FORM),
    th.Property(
        "durationGrant", STRING, description="A duration such as 3600s (or durationUnset)."
    ),
    th.Property("durationUnset", FREE_FORM),
    th.Property("emergencyGrantEnabled", th.BooleanType),
    th.Property("emergencyGrantPolicyId", STRING),
    th.Property("externalId", STRING),
    th.Property("grantCount", INT64, description="int64, sent as a string by the service."),
    th.Property("grantPolicyId", STRING),
    th.Property("isAutomationEnabled", th.BooleanType),
    th.Property("isManuallyManaged", th.BooleanType),
    th.Property("matchBatonId", STRING),
    th.Property("overrideAccessRequestsDefaults", th.BooleanType),
    th.Property(
        "purpose",
        STRING,
        description="APP_ENTITLEMENT_PURPOSE_VALUE_ASSIGNMENT, _PERMISSION, ... (passed through)",
    ),
    th.Property("requestSchemaId", STRING),
    th.Property("revokePolicyId", STRING),
    th.Property("riskLevelValueId", STRING),
    th.Property("sourceConnectorIds", FREE_FORM, description="Key/value map (string values)."),
    th.Property("systemBuiltin", th.BooleanType),
    th.Property("userEditedMask", STRING),
).to_dict()

APP_USER = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("id", STRING, required=True, description="Unique only within its app."),
    th.Property(
        "identityUserId",
        STRING,
        description="The account's owner, a user of `users`; empty for accounts nobody owns.",
    ),
    th.Property("displayName", STRING),
    th.Property("email", STRING),
    th.Property("emails", STRINGS),
    th.Property("username", STRING),
    th.Property("usernames", STRINGS),
    th.Property("employeeIds", STRINGS),
    th.Property(
        "appUserType",
        STRING,
        description="APP_USER_TYPE_USER, _SERVICE_ACCOUNT, _SYSTEM_ACCOUNT, ... (passed through)",
    ),
    th.Property(
        "status",
        th.ObjectType(
            th.Property("status", STRING, description="STATUS_ENABLED, _DISABLED, _DELETED, ..."),
            th.Property("details", STRING),
        ),
        description="The account's own status in its app.",
    ),
    th.Property("agentStatus", STRING),
    th.Property("nhiType", STRING),
    th.Property("nhiDetail", STRING),
    th.Property("isExternal", th.BooleanType),
    th.Property("profile", FREE_FORM, description="Free-form (protobuf Struct)."),
    *_LIFETIME,
).to_dict()

# A grant the service holds now: the AppEntitlementUserView without its appUser (the account
# is a record of `app_users`, the same for each of its grants).
GRANT = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("appEntitlementId", STRING, required=True),
    th.Property("appUserId", STRING, required=True),
    th.Property(
        "appEntitlementUserBindingCreatedAt",
        th.DateTimeType,
        description="When the grant began, per the service (older than the feed for some).",
    ),
    th.Property(
        "appEntitlementUserBindingDeprovisionAt",
        th.DateTimeType,
        description="When the grant is scheduled to end; null: no end scheduled.",
    ),
    th.Property(
        "grantSources",
        th.ArrayType(th.ObjectType(th.Property("appId", STRING), th.Property("id", STRING))),
        description="The app entitlements (groups, roles) it comes through; empty: direct.",
    ),
    th.Property("originatingTicketId", STRING, description="The task that made it, if any."),
).to_dict()


# A grant period that ended (search/past-grants' ``history``, streams/past_grants.py).
PAST_GRANT = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("appEntitlementId", STRING, required=True),
    th.Property("appUserId", STRING, required=True),
    th.Property("grantedAt", th.DateTimeType, required=True, description="When it began."),
    th.Property("revokedAt", th.DateTimeType, required=True, description="When it ended."),
    th.Property(
        "id",
        STRING,
        description="The service's id of the period (sent since August 2026); null before.",
    ),
).to_dict()


# A system log event (OCSF, streams/system_log.py): the columns every OCSF event has, typed
# at the top under their OCSF names (the event's own, snake_case), and the event whole.
SYSTEM_LOG_EVENT = th.PropertiesList(
    th.Property("uid", STRING, required=True, description="The event's id (metadata.uid)."),
    th.Property(
        "time",
        th.DateTimeType,
        description="When it happened (OCSF time: epoch milliseconds, or RFC 3339 text); null "
        "where the event has none (some event types lacked it before August 2026).",
    ),
    th.Property("class_uid", th.IntegerType, description="OCSF class: 6003 API Activity..."),
    th.Property("category_uid", th.IntegerType),
    th.Property("activity_id", th.IntegerType, description="1 create, 2 read, 3 update, 4 delete."),
    th.Property("type_uid", th.IntegerType, description="class_uid * 100 + activity_id."),
    th.Property("severity_id", th.IntegerType),
    th.Property("status_id", th.IntegerType, description="1 success, 2 failure."),
    th.Property("actor_user_uid", STRING, description="Who did it (actor.user.uid)."),
    th.Property("actor_user_email", STRING, description="actor.user.email_addr."),
    th.Property("src_endpoint_ip", STRING, description="Where from (src_endpoint.ip)."),
    th.Property("api_operation", STRING, description="The API call (api.operation)."),
    th.Property(
        "http_user_agent",
        STRING,
        description="The caller's user agent (http_request.user_agent): this tap's reads "
        "say tap-accessgov/<version>.",
    ),
    th.Property("event", FREE_FORM, required=True, description="The OCSF event as sent."),
).to_dict()


# Tasks (tickets): the Task object as sent; its type a oneof whose unknown members pass
# through, its policy's history the approval steps (streams/tasks.py).
def _task_subject(*extra: th.Property[t.Any]) -> th.ObjectType:
    """A task type about a grant (grant, revoke, certify): what it is about, its outcome."""
    return th.ObjectType(
        th.Property("appId", STRING),
        th.Property("appEntitlementId", STRING),
        th.Property("appUserId", STRING),
        th.Property("identityUserId", STRING, description="The user the task is about."),
        th.Property("outcome", STRING, description="Absent while the task is open."),
        th.Property("outcomeTime", th.DateTimeType),
        *extra,
        additional_properties=True,
    )


def _approval_action(at: str) -> th.ObjectType:
    return th.ObjectType(
        th.Property("userId", STRING), th.Property(at, th.DateTimeType), additional_properties=True
    )


TASK_POLICY_STEP = th.ObjectType(
    th.Property("id", STRING),
    th.Property("state", STRING),
    th.Property("policyGenerationId", STRING),
    th.Property(
        "approval",
        th.ObjectType(
            th.Property("state", STRING),
            th.Property("assignedAt", th.DateTimeType),
            th.Property(
                "approved", _approval_action("approvedAt"), description="Who approved, when."
            ),
            th.Property("denied", _approval_action("deniedAt"), description="Who denied, when."),
            additional_properties=True,
        ),
    ),
    additional_properties=True,
)

TASK = th.PropertiesList(
    th.Property("id", STRING, required=True),
    th.Property("numericId", INT64, description="The ticket number (int64, sent as a string)."),
    th.Property("displayName", STRING),
    th.Property("description", STRING, description="The requester's justification."),
    th.Property("state", STRING, description="TASK_STATE_OPEN, _CLOSED, ... (passed through)"),
    th.Property("processing", STRING),
    th.Property("origin", STRING, description="TASK_ORIGIN_WEBAPP, _JIRA, ... (passed through)"),
    th.Property("createdAt", th.DateTimeType),
    th.Property(
        "updatedAt",
        th.DateTimeType,
        description="As sent. Replication key: the bookmark is the instant a run started.",
    ),
    th.Property("deletedAt", th.DateTimeType),
    th.Property("createdByUserId", STRING, description="Who opened the task."),
    th.Property("userId", STRING, description="The user the task is about."),
    th.Property("approverIds", STRINGS),
    th.Property("stepApproverIds", STRINGS),
    th.Property("emergencyAccess", th.BooleanType),
    th.Property(
        "externalRefs",
        th.ArrayType(
            th.ObjectType(
                th.Property("externalRefSource", STRING),
                th.Property("name", STRING),
                th.Property("url", STRING),
            )
        ),
        description="External references, e.g. a Jira issue.",
    ),
    th.Property(
        "type",
        th.ObjectType(
            th.Property("grant", _task_subject(th.Property("grantDuration", STRING))),
            th.Property("revoke", _task_subject()),
            th.Property(
                "certify",
                _task_subject(
                    th.Property("accessReviewId", STRING),
                    th.Property("accessReviewSelection", STRING),
                ),
            ),
            th.Property(
                "offboarding",
                th.ObjectType(
                    th.Property("subjectUserId", STRING),
                    th.Property("outcome", STRING),
                    th.Property("outcomeTime", th.DateTimeType),
                ),
            ),
            th.Property("action", FREE_FORM),
            th.Property("finding", FREE_FORM),
            additional_properties=True,
        ),
        description="One member, named after the task's type; unknown types pass through.",
    ),
    th.Property(
        "policy",
        th.ObjectType(
            th.Property("history", th.ArrayType(TASK_POLICY_STEP), description="Steps done."),
            additional_properties=True,
        ),
    ),
    th.Property("actions", STRINGS),
    th.Property("analysisId", STRING),
    th.Property("annotations", OBJECTS),
    th.Property("commentCount", th.IntegerType),
    th.Property("data", FREE_FORM),
    th.Property("form", FREE_FORM),
    th.Property("insightIds", STRINGS),
    th.Property("policyGenerationId", STRING),
    th.Property("recommendation", STRING),
    th.Property("revocationTargets", OBJECTS),
).to_dict()

# Access reviews (campaigns): the AccessReview object (streams/access_reviews.py).
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

# ----- what an audit is scoped by -------------------------------------------------------------

APP_RESOURCE_TYPE = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("id", STRING, required=True, description="Unique only within its app."),
    th.Property("displayName", STRING),
    th.Property("traitIds", STRINGS),
    *_LIFETIME,
).to_dict()

APP_RESOURCE = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("appResourceTypeId", STRING, required=True),
    th.Property("id", STRING, required=True, description="Unique only within its app."),
    th.Property("displayName", STRING),
    th.Property("customDescription", STRING),
    th.Property("parentAppResourceId", STRING, description="The resource it sits in, if any."),
    th.Property("parentAppResourceTypeId", STRING),
    th.Property("accessConfigId", STRING),
    th.Property(
        "agentTrait",
        th.ObjectType(th.Property("identityAppUserId", STRING), th.Property("status", STRING)),
    ),
    th.Property("annotations", FREE_FORM, description="Key/value map (string values)."),
    th.Property("externalId", STRING),
    th.Property("grantCount", INT64, description="int64, sent as a string by the service."),
    th.Property("matchBatonId", STRING),
    th.Property("nhiDetail", STRING),
    th.Property("nhiType", STRING),
    th.Property("profile", FREE_FORM, description="Free-form (protobuf Struct)."),
    th.Property(
        "secretTrait",
        th.ObjectType(
            th.Property("createdByAppUserId", STRING),
            th.Property("credentialDetail", STRING),
            th.Property("identityAppUserId", STRING),
            th.Property("lastUsedAt", th.DateTimeType),
            th.Property("secretCreatedAt", th.DateTimeType),
            th.Property("secretExpiresAt", th.DateTimeType),
        ),
    ),
    *_LIFETIME,
).to_dict()

APP_OWNER = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("userId", STRING, required=True, description="The owner's user id."),
    *_USER_FIELDS,
).to_dict()

ENTITLEMENT_OWNER = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("appEntitlementId", STRING, required=True),
    th.Property("userId", STRING, required=True, description="The owner's user id."),
    *_USER_FIELDS,
).to_dict()

ATTRIBUTE_VALUE = th.PropertiesList(
    th.Property("id", STRING, required=True),
    th.Property("attributeTypeId", STRING),
    th.Property("value", STRING, description="The value's text: a risk level, a framework."),
    *_LIFETIME,
).to_dict()

IAM_ROLE = th.PropertiesList(
    th.Property("id", STRING, required=True),
    th.Property("name", STRING),
    th.Property("displayName", STRING),
    th.Property("permissions", STRINGS),
    th.Property("serviceRoles", STRINGS),
    th.Property("systemApiOnly", th.BooleanType),
    th.Property("systemBuiltin", th.BooleanType),
    *_LIFETIME,
).to_dict()

# A connector's ``config`` (its credentials for the app) and ``downloadUrl`` (a signed link)
# are never read into a record (streams/connectors.py).
CONNECTOR = th.PropertiesList(
    th.Property("appId", STRING, required=True),
    th.Property("id", STRING, required=True),
    th.Property("displayName", STRING),
    th.Property("catalogId", STRING),
    th.Property("canResumeSync", th.BooleanType),
    th.Property("configUpdatedAt", th.DateTimeType),
    th.Property("connectorApiVersion", th.IntegerType),
    th.Property(
        "connectorSyncCronSchedule",
        th.ObjectType(
            th.Property("cronSpec", STRING),
            th.Property("start", th.DateTimeType),
            th.Property("timezone", STRING),
        ),
    ),
    th.Property("disableCheckBadSync", th.BooleanType),
    th.Property(
        "oauthAuthorizedAs",
        th.ObjectType(
            th.Property("authEmail", STRING), th.Property("authorizedAt", th.DateTimeType)
        ),
    ),
    th.Property("parallelSyncWorkerCount", th.IntegerType),
    th.Property("profileAllowList", STRINGS),
    th.Property("profileIgnoreList", STRINGS),
    th.Property(
        "status",
        th.ObjectType(
            th.Property("status", STRING, description="SYNC_STATUS_DONE, _ERROR, ..."),
            th.Property("startedAt", th.DateTimeType),
            th.Property("completedAt", th.DateTimeType),
            th.Property("lastError", STRING),
            th.Property("updatedAt", th.DateTimeType),
        ),
        description="The last sync of the app's data.",
    ),
    th.Property("syncConfig", th.ObjectType(th.Property("syncResourceTypeIds", STRINGS))),
    th.Property("syncDisabledAt", th.DateTimeType),
    th.Property("syncDisabledCategory", STRING),
    th.Property("syncDisabledReason", STRING),
    th.Property("userIds", STRINGS, description="The connector's users (user ids)."),
    *_LIFETIME,
).to_dict()

# Every record of a full-table stream carries the run's snapshot (engine/snapshots.py).
SNAPSHOT_AT = "snapshotAt"
SNAPSHOT_AT_PROPERTY = th.Property(
    SNAPSHOT_AT,
    th.DateTimeType,
    required=True,
    description=(
        "When the run that read this row started (UTC): the snapshot it belongs to. Complete "
        "snapshots are listed in full_table_snapshots."
    ),
)

FULL_TABLE_SNAPSHOT = th.PropertiesList(
    th.Property("stream", th.StringType, required=True, description="The full-table stream."),
    th.Property(
        SNAPSHOT_AT,
        th.DateTimeType,
        required=True,
        description="The snapshot: the snapshotAt of that stream's rows in this run.",
    ),
    th.Property(
        "completedAt",
        th.DateTimeType,
        description="When the tap had written every row of the snapshot (UTC).",
    ),
    th.Property(
        "scope",
        th.StringType,
        description=(
            "What the snapshot covers, where a setting narrows it (null: the stream's whole "
            "listing). users: directory (the directory and the exclusions' users) or "
            "automation_exclusion_users (read_directory false: only the exclusions' users)."
        ),
    ),
).to_dict()
