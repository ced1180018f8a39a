"""The vendor's own Python client (conductorone-sdk, generated from the service's OpenAPI)
against the emulator: what it parses without error, real tenants' clients expect. Every page
of the feed, the exclusions, the apps and the app entitlements must parse, both when unset
fields are omitted and when they are sent empty (and by default: empty on the catalog only),
and carry the values the emulator meant."""

from __future__ import annotations

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
