"""The vendor's own Python client (conductorone-sdk, generated from the service's OpenAPI)
against the emulator: what it parses without error, real tenants' clients expect. Every page
of the feed, the exclusions, the apps and the app entitlements, the directory, the app users,
the grants held now (both ways) and what an audit is scoped by (resources, owners, attributes,
the service's roles, connectors) must parse, both when unset
fields are omitted and when they are sent empty (and by default: empty on the catalog only),
and carry the values the emulator meant."""

from __future__ import annotations

import datetime
import typing as t

import pytest
import requests
from conductorone_sdk import SDK
from conductorone_sdk.models import operations, shared

from emulator import Dataset, Emulator
from emulator.timefmt import parse_rfc3339
from tests.conftest import CREDENTIAL, SMALL_DATASET


@pytest.fixture(params=[None, False, True], ids=["default", "omitted", "emitted"])
def client(request: pytest.FixtureRequest) -> t.Iterator[tuple[SDK, Emulator]]:
    with Emulator(
        Dataset(**SMALL_DATASET), credential=CREDENTIAL, emit_unpopulated=request.param
    ) as emulator:
        token = requests.post(
            f"{emulator.url}/auth/v1/token",
            data={
                "grant_type": "client_credentials",
                "client_id": CREDENTIAL.client_id,
                "client_secret": CREDENTIAL.client_secret,
            },
            timeout=10,
        ).json()["access_token"]
        security = shared.Security(bearer_auth=token, oauth=token)
        yield SDK(security=security, server_url=emulator.url), emulator


def all_pages(fetch: t.Callable[[str | None], t.Any]) -> list[t.Any]:
    """Every page, following next_page_token as the vendor's CLI does."""
    pages, token = [], None
    while True:
        pages.append(fetch(token))
        token = pages[-1].next_page_token
        if not token:
            return pages


def test_the_grant_feed_parses_with_the_values_meant(client) -> None:
    sdk, emulator = client
    pages = all_pages(
        lambda token: (
            sdk.app_entitlement_user_binding.search_grant_feed(
                request=shared.SearchGrantFeedRequest(page_size=100, page_token=token)
            ).search_grant_feed_response
        )
    )
    got = [view.app_entitlement_user_binding_feed for page in pages for view in page.list or []]
    expected = [entry["feed"] for entry in emulator.dataset.feed_entries()]
    assert len(got) == len(expected) > 1000
    for feed, meant in zip(got, expected, strict=True):
        assert (feed.app_id, feed.app_entitlement_id, feed.app_user_id, feed.event_type) == (
            meant["appId"],
            meant["appEntitlementId"],
            meant["appUserId"],
            meant["eventType"],
        )
        assert (feed.ticket_id or None) == meant.get("ticketId")
        # the client keeps microseconds: compare at that precision
        assert int(feed.date_.timestamp() * 1_000_000) == parse_rfc3339(meant["date"]) // 1000


def test_automation_exclusions_parse_with_the_values_meant(client) -> None:
    """The operation declares no paging parameters, so the vendor's client reads the first
    page only (25 entries)."""
    sdk, emulator = client
    ds = emulator.dataset
    for app_id, entitlement_id in ds.exclusion_entitlements:
        page = sdk.app_entitlements.list_automation_exclusions(
            request=operations.C1APIAppV1AppEntitlementsListAutomationExclusionsRequest(
                app_id=app_id, app_entitlement_id=entitlement_id
            )
        ).list_automation_exclusions_response
        views = page.list or []
        meant = ds.exclusion_entries(app_id, entitlement_id)[:25]
        assert [(v.app_user_id, v.user.id, v.user.display_name, v.user.status) for v in views] == [
            (m["appUserId"], m["user"]["id"], m["user"]["displayName"], m["user"]["status"])
            for m in meant
        ]


def test_apps_and_app_entitlements_parse_with_the_values_meant(client) -> None:
    sdk, emulator = client
    ds = emulator.dataset
    apps = [
        app
        for page in all_pages(
            lambda token: (
                sdk.apps.list(
                    request=operations.C1APIAppV1AppsListRequest(page_size=100, page_token=token)
                ).list_apps_response
            )
        )
        for app in page.list or []
    ]
    assert [(app.id, app.display_name) for app in apps] == [
        (app.id, app.display_name) for app in ds.catalog_apps
    ]
    assert apps[0].user_count == len(ds.user_ids)  # an int64 sent as a string
    automated = []
    for position, app in enumerate(ds.catalog_apps):
        views = [
            view
            for page in all_pages(
                lambda token, app_id=app.id: (
                    sdk.app_entitlements.list(
                        request=operations.C1APIAppV1AppEntitlementsListRequest(
                            app_id=app_id, page_size=100, page_token=token
                        )
                    ).list_app_entitlements_response
                )
            )
            for view in page.list or []
        ]
        assert [(v.app_entitlement.id, v.app_entitlement.display_name) for v in views] == list(
            zip(app.entitlement_ids, app.entitlement_names, strict=True)
        )
        automated += [
            (app.id, v.app_entitlement.id) for v in views if v.app_entitlement.is_automation_enabled
        ]
        assert all(
            bool(v.app_entitlement.is_automation_enabled) == ds.is_automated(position, k)
            for k, v in enumerate(views)
        )
    assert automated == ds.automated_entitlements


def micros(ns: int | None) -> int | None:
    """An instant at the vendor client's precision (it keeps microseconds)."""
    return None if ns is None else ns // 1000


def as_micros(value: t.Any) -> int | None:
    return None if value is None else int(value.timestamp() * 1_000_000)


def test_the_directory_parses_with_the_values_meant(client) -> None:
    sdk, emulator = client
    pages = all_pages(
        lambda token: (
            sdk.user.list(
                request=operations.C1APIUserV1UserServiceListRequest(
                    page_size=100, page_token=token
                )
            ).user_service_list_response
        )
    )
    got = [view.user for page in pages for view in page.list or []]
    meant = emulator.dataset.directory_users()
    assert len(got) == len(meant) > len(emulator.dataset.user_ids)
    # an omitted status is its enum's zero value, UNKNOWN
    assert [
        (u.id, u.display_name, u.status or "UNKNOWN", u.directory_status or "UNKNOWN") for u in got
    ] == [(m.user_id, m.display_name, m.status, m.directory_status) for m in meant]


def test_app_users_parse_with_the_values_meant(client) -> None:
    sdk, emulator = client
    ds = emulator.dataset
    got = []
    for app_id in ds.apps:
        pages = all_pages(
            lambda token, app_id=app_id: (
                sdk.app_user.list(
                    request=operations.C1APIAppV1AppUserServiceListRequest(
                        app_id=app_id, page_size=100, page_token=token
                    )
                ).app_user_service_list_response
            )
        )
        got += [view.app_user for page in pages for view in page.list or []]
    assert [
        (
            a.app_id,
            a.id,
            a.identity_user_id or None,
            a.app_user_type,
            (a.app_user_status.status if a.app_user_status else None) or "STATUS_UNSPECIFIED",
        )
        for a in got
    ] == [(m.app_id, m.app_user_id, m.user_id, m.app_user_type, m.status) for m in ds.app_users()]
    assert any(a.identity_user_id in (None, "") for a in got)


# The vendor's client marks ListUsers deprecated (a warning per call); the service still
# answers it, and the search is the other way.
@pytest.mark.filterwarnings("ignore:.*DEPRECATED:DeprecationWarning")
def test_the_grants_held_now_parse_both_ways_with_the_values_meant(client) -> None:
    """Per entitlement (ListUsers) and per app (SearchGrants); this release of the vendor's
    client reads a grant's account, start, scheduled end and sources (not its ids or ticket),
    so the grant is named by its account and, in a search, by the entitlement it carries."""
    sdk, emulator = client
    ds = emulator.dataset
    meant = [
        (
            g.app_id,
            g.app_entitlement_id,
            g.app_user_id,
            micros(g.created_at),
            micros(g.deprovision_at),
            g.sources,
        )
        for g in ds.current_grants()
    ]

    def fields(view: t.Any, entitlement_id: str) -> tuple[t.Any, ...]:
        account = view.app_user_view.app_user
        return (
            account.app_id,
            entitlement_id,
            account.id,
            as_micros(view.app_entitlement_user_binding_created_at),
            as_micros(view.app_entitlement_user_binding_deprovision_at),
            tuple((s.app_id, s.id) for s in view.grant_sources or []),
        )

    per_entitlement = []
    for app_id, entitlement_id in ds.entitlements:
        pages = all_pages(
            lambda token, app_id=app_id, entitlement_id=entitlement_id: (
                sdk.app_entitlements.list_users(
                    request=operations.C1APIAppV1AppEntitlementsListUsersRequest(
                        app_id=app_id,
                        app_entitlement_id=entitlement_id,
                        page_size=100,
                        page_token=token,
                    )
                ).list_app_entitlement_users_response
            )
        )
        per_entitlement += [
            fields(view, entitlement_id) for page in pages for view in page.list or []
        ]
    assert per_entitlement == meant

    per_app = []
    for app_id in ds.apps:
        pages = all_pages(
            lambda token, app_id=app_id: (
                sdk.app_entitlement_search.search_grants(
                    request=shared.AppEntitlementSearchServiceSearchGrantsRequest(
                        app_ids=[app_id], page_size=100, page_token=token
                    )
                ).app_entitlement_search_service_search_grants_response
            )
        )
        per_app += [
            fields(item.app_entitlement_user_view, item.app_entitlement_view.app_entitlement.id)
            for page in pages
            for item in page.list or []
        ]
    assert per_app == meant


def test_task_search_parses_with_the_values_meant(client) -> None:
    """Every task, the feed's grant and revoke tasks, certify, offboarding and newer types,
    open and closed, parses; the filters the client sends are the ones the emulator reads."""
    sdk, emulator = client
    ds = emulator.dataset

    def search(**filters: t.Any) -> list[t.Any]:
        pages = all_pages(
            lambda token: (
                sdk.task_search.search(
                    request=shared.TaskSearchRequest(page_size=100, page_token=token, **filters)
                ).task_search_response
            )
        )
        return [view.task for page in pages for view in page.list or []]

    meant = ds.tasks()
    got = search()
    assert [task.id for task in got] == [task["id"] for task in meant]
    for task, m in zip(got, meant, strict=True):
        assert task.numeric_id == int(m["numericId"])  # an int64 sent as a string
        kind = next(iter(m["type"]))
        parsed = getattr(task.task_type, f"task_type_{kind}")
        assert parsed is not None, kind
        outcome = m["type"][kind].get("outcome")
        parsed_outcome = getattr(parsed, "outcome", None) or ""
        # sent empty (EmitUnpopulated), an open task's outcome is the enum's zero value
        assert (None if parsed_outcome.endswith("_UNSPECIFIED") else parsed_outcome or None) == (
            outcome
        )
        assert int(task.created_at.timestamp() * 1_000_000) == (
            parse_rfc3339(m["createdAt"]) // 1000
        )
        history = task.policy_instance.history if task.policy_instance else None
        assert len(history or []) == len((m.get("policy") or {}).get("history", []))
    # (0.17.2 drops ``task_states`` from the body it sends: a type filter and refs it does send)
    certify = search(
        task_types=[shared.TaskTypeInput(task_type_certify=shared.TaskTypeCertifyInput())],
        refs=[shared.TaskRef(id=m["numericId"]) for m in meant[::7]],
    )
    assert [task.id for task in certify] == [m["id"] for m in meant[::7] if "certify" in m["type"]]
    assert certify


def test_past_grants_parse_with_the_values_meant(client) -> None:
    """SearchPastGrants app by app: this release of the vendor's client predates
    ``history.id``, so a period is named by its grant and dates."""
    sdk, emulator = client
    ds = emulator.dataset
    meant = sorted(
        (p.app_id, p.app_entitlement_id, p.app_user_id, micros(p.granted_at), micros(p.revoked_at))
        for p in ds.past_grants()
    )
    got = []
    for app_id in ds.apps:
        pages = all_pages(
            lambda token, app_id=app_id: (
                sdk.app_entitlement_user_binding.search_past_grants(
                    request=shared.SearchPastGrantsRequest(
                        app_ids=[app_id], page_size=100, page_token=token
                    )
                ).search_past_grants_response
            )
        )
        for page in pages:
            for view in page.list or []:
                period = view.app_entitlement_user_binding_history
                got.append(
                    (
                        period.app_id,
                        period.app_entitlement_id,
                        period.app_user_id,
                        as_micros(period.granted_at),
                        as_micros(period.revoked_at),
                    )
                )
    assert len(got) > 100
    assert sorted(got) == meant


def test_the_system_log_parses_with_the_values_meant(client) -> None:
    """ListEvents as the vendor's CLI calls it (oldest first, up to an instant): the events
    the log held then, in that order, whole; and resumed after one of them
    (``since_event_uid``)."""
    sdk, emulator = client
    until = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    meant = [
        event
        for event in emulator.dataset.system_log_objects()
        if event["time"] < until.timestamp() * 1000
    ]

    def read(**fields: t.Any) -> list[dict[str, t.Any]]:
        pages = all_pages(
            lambda token: (
                sdk.system_log.list_events(
                    request=shared.SystemLogServiceListEventsRequest(
                        page_size=100,
                        page_token=token,
                        until=until,
                        sort_direction=shared.SortDirection.SORT_DIRECTION_ASC,
                        **fields,
                    )
                ).system_log_service_list_events_response
            )
        )
        return [event for page in pages for event in page.list or []]

    got = read()
    assert len(got) == len(meant) > 1000
    assert got == meant
    middle = meant[len(meant) // 2]["metadata"]["uid"]
    assert read(since_event_uid=middle) == meant[len(meant) // 2 + 1 :]


def test_what_an_audit_is_scoped_by_parses_with_the_values_meant(client) -> None:
    """Resource types and resources, owners, attributes (risk levels, compliance frameworks),
    the service's roles and connectors, as the vendor's client lists them (this release has
    no v2 owner list): each parses, with the values the emulator meant."""
    sdk, emulator = client
    ds = emulator.dataset

    def items(method: t.Callable[..., t.Any], request: type, answer: str, **ids: str) -> list:
        pages = all_pages(
            lambda token: getattr(
                method(request=request(page_size=100, page_token=token, **ids)), answer
            )
        )
        return [item for page in pages for item in page.list or []]

    types, resources, connectors = [], [], []
    for app in ds.catalog_apps:
        views = items(
            sdk.app_resource_type.list,
            operations.C1APIAppV1AppResourceTypeServiceListRequest,
            "app_resource_type_service_list_response",
            app_id=app.id,
        )
        types += [view.app_resource_type for view in views]
        for view in views:
            resources += [
                listed.app_resource
                for listed in items(
                    sdk.app_resource.list,
                    operations.C1APIAppV1AppResourceServiceListRequest,
                    "app_resource_service_list_response",
                    app_id=app.id,
                    app_resource_type_id=view.app_resource_type.id,
                )
            ]
        connectors += [
            view.connector
            for view in items(
                sdk.connector.list,
                operations.C1APIAppV1ConnectorServiceListRequest,
                "connector_service_list_response",
                app_id=app.id,
            )
        ]
    assert [(r.app_id, r.id, r.display_name) for r in types] == [
        (m["appId"], m["id"], m["displayName"]) for m in ds.app_resource_types()
    ]
    assert [
        (r.app_id, r.id, r.parent_app_resource_id or "", r.grant_count or 0) for r in resources
    ] == [
        (m["appId"], m["id"], m["parentAppResourceId"], int(m["grantCount"]))
        for m in ds.app_resources()
    ]
    assert [
        (
            c.id,
            c.connector_status.status if c.connector_status else None,
            as_micros(c.connector_status.completed_at) if c.connector_status else None,
            c.sync_disabled_reason or "",
        )
        for c in connectors
    ] == [
        (
            m["id"],
            (m["status"] or {}).get("status"),
            micros(parse_rfc3339(m["status"]["completedAt"]))
            if (m["status"] or {}).get("completedAt")
            else None,
            m["syncDisabledReason"],
        )
        for m in ds.connectors()
    ]

    app_owners = {
        app.id: [
            user.id
            for user in items(
                sdk.app_owners.list,
                operations.C1APIAppV1AppOwnersListRequest,
                "list_app_owners_response",
                app_id=app.id,
            )
        ]
        for app in ds.catalog_apps
    }
    assert app_owners == {
        app_id: [user["id"] for user in users] for app_id, users in ds.app_owners().items()
    }
    meant = ds.entitlement_owners()
    for app_id, entitlement_id in ds.entitlements:
        owners = items(
            sdk.app_entitlement_owners.list,
            operations.C1APIAppV1AppEntitlementOwnersListRequest,
            "list_app_entitlement_owners_response",
            app_id=app_id,
            entitlement_id=entitlement_id,
        )
        assert [(u.id, u.status or "UNKNOWN") for u in owners] == [
            (m["id"], m["status"]) for m in meant[app_id, entitlement_id]
        ]

    attribute_types = items(
        sdk.attributes.list_attribute_types,
        operations.C1APIAttributeV1AttributesListAttributeTypesRequest,
        "list_attribute_types_response",
    )
    assert [(a.id, a.name) for a in attribute_types] == [
        (m["id"], m["name"]) for m in ds.attribute_types()
    ]
    values = [
        value
        for kind in attribute_types
        for value in items(
            sdk.attributes.list_attribute_values,
            operations.C1APIAttributeV1AttributesListAttributeValuesRequest,
            "list_attribute_values_response",
            attribute_type_id=kind.id,
        )
    ]
    assert [(v.id, v.attribute_type_id, v.value) for v in values] == [
        (m["id"], m["attributeTypeId"], m["value"]) for m in ds.attribute_values()
    ]
    for method, request, answer, name in (
        (
            sdk.attributes.list_risk_levels,
            operations.C1APIAttributeV1AttributesListRiskLevelsRequest,
            "list_risk_levels_response",
            "Risk Level",
        ),
        (
            sdk.attributes.list_compliance_frameworks,
            operations.C1APIAttributeV1AttributesListComplianceFrameworksRequest,
            "list_compliance_frameworks_response",
            "Compliance Framework",
        ),
    ):
        kind = next(a.id for a in attribute_types if a.name == name)
        assert [v.id for v in items(method, request, answer)] == [
            m["id"] for m in ds.attribute_values(kind)
        ]

    roles = items(sdk.roles.list, operations.C1APIIamV1RolesListRequest, "list_roles_response")
    assert [(r.id, r.name, r.display_name, bool(r.system_builtin)) for r in roles] == [
        (m["id"], m["name"], m["displayName"], m["systemBuiltin"]) for m in ds.iam_roles()
    ]


def test_the_cross_app_resource_searches_parse_with_the_values_meant(client) -> None:
    """SearchAppResourceTypes and SearchAppResources over the whole catalog, and filtered as
    the vendor's client sends a filter."""
    sdk, emulator = client
    ds = emulator.dataset

    def search(method: t.Callable[..., t.Any], request: type, answer: str, **fields: t.Any) -> list:
        pages = all_pages(
            lambda token: getattr(
                method(request=request(page_size=100, page_token=token, **fields)), answer
            )
        )
        return [item for page in pages for item in page.list or []]

    types = search(
        sdk.app_resource_search.search_app_resource_types,
        shared.SearchAppResourceTypesRequest,
        "search_app_resource_types_response",
    )
    assert [(r.app_id, r.id, r.display_name) for r in types] == [
        (m["appId"], m["id"], m["displayName"]) for m in ds.app_resource_types()
    ]
    app_id = ds.apps[1]  # this release's request names one app (app_id), not several
    views = search(
        sdk.app_resource_search.search_app_resources,
        shared.SearchAppResourcesRequest,
        "search_app_resources_response",
        app_id=app_id,
    )
    assert [(v.app_resource.id, v.app_resource.grant_count or 0) for v in views] == [
        (m["id"], int(m["grantCount"])) for m in ds.app_resources() if m["appId"] == app_id
    ]
