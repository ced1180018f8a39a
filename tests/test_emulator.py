"""The emulator against real HTTP: it must be as strict and as faithful as the service.

The tap's own tests trust this emulator, so here each rule of the contract is checked once
from the outside, with `requests`, and every traversal is compared with the Dataset's
ground truth.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

from emulator import Dataset, Emulator, lifecycle, make_credential
from emulator.timefmt import parse_rfc3339

ROOT = Path(__file__).resolve().parent.parent
END = "2025-06-01T00:00:00Z"
CRED = make_credential(seed=7, tenant="acme.accessgov.test")
OTHER = make_credential(seed=8, tenant="acme.accessgov.test")
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
FEED = "/api/v1/grants/feed"
DROP = object()


def small_dataset(**overrides: Any) -> Dataset:
    params: dict[str, Any] = {
        "seed": 1,
        "events": 3000,
        "apps": 5,
        "users": 300,
        "exclusion_entitlements": 12,
        "max_exclusions": 250,
        "end": END,
    }
    return Dataset(**(params | overrides))


@pytest.fixture(scope="module")
def ds() -> Dataset:
    return small_dataset()


@pytest.fixture(scope="module")
def emu(ds: Dataset):
    with Emulator(ds, credential=CRED, token_lifetime=600) as emulator:
        yield emulator


@pytest.fixture
def fresh():
    """A private emulator for tests that change data or tokens."""
    with Emulator(small_dataset(events=200), credential=CRED) as emulator:
        yield emulator


@pytest.fixture(autouse=True)
def _calm(emu: Emulator):
    emu.faults.clear()
    yield
    emu.faults.clear()
    emu.latency = 0


# ----- helpers ---------------------------------------------------------------------------


def assertion(cred=CRED, *, key: Any = None, alg: str = "EdDSA", **claims: Any) -> str:
    now = int(time.time())
    payload: dict[str, Any] = {
        "iss": cred.client_id,
        "sub": cred.client_id,
        "aud": cred.tenant,
        "iat": now,
        "nbf": now - 120,
        "exp": now + 120,
    }
    payload.update(claims)
    payload = {k: v for k, v in payload.items() if v is not DROP}
    return jwt.encode(payload, key if key is not None else cred.private_key, algorithm=alg)


def token_request(emu: Emulator, **form: str) -> requests.Response:
    return requests.post(f"{emu.url}/auth/v1/token", data=form, timeout=10)


def assertion_form(token: str, client_id: str = CRED.client_id) -> dict[str, str]:
    return {
        "grant_type": "client_credentials",
        "client_id": client_id,
        "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": token,
    }


def login(emu: Emulator) -> requests.Session:
    response = token_request(
        emu,
        grant_type="client_credentials",
        client_id=CRED.client_id,
        client_secret=CRED.client_secret,
    )
    assert response.status_code == 200, response.text
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {response.json()['access_token']}"
    return session


@pytest.fixture(scope="module")
def api(emu: Emulator) -> requests.Session:
    return login(emu)


def feed(api: requests.Session, emu: Emulator, body: Any) -> requests.Response:
    return api.post(emu.url + FEED, json=body, timeout=10)


def traverse(api: requests.Session, emu: Emulator, body: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    token = ""
    for _ in range(10_000):
        response = feed(api, emu, body | {"pageToken": token, "pageSize": 100})
        assert response.status_code == 200, response.text
        page = response.json()
        entries.extend(page["list"] or [])
        token = page["nextPageToken"]
        if not token:
            return entries
    raise AssertionError("feed never ended")


def exclusions_url(emu: Emulator, app_id: str, entitlement_id: str) -> str:
    return f"{emu.url}/api/v1/apps/{app_id}/entitlements/{entitlement_id}/automation/exclusions"


# ----- token endpoint --------------------------------------------------------------------


def test_client_assertion_login_gives_a_working_token(emu: Emulator) -> None:
    response = token_request(emu, **assertion_form(assertion()))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 600
    headers = {"Authorization": f"Bearer {body['access_token']}"}
    assert requests.post(emu.url + FEED, json={}, headers=headers, timeout=10).status_code == 200


def test_audience_may_be_a_one_element_list(emu: Emulator) -> None:
    response = token_request(emu, **assertion_form(assertion(aud=[CRED.tenant])))
    assert response.status_code == 200, response.text


def _none_alg_token() -> str:
    def part(obj: dict[str, Any]) -> str:
        return jwt.utils.base64url_encode(json.dumps(obj).encode()).decode()

    now = int(time.time())
    claims = {"iss": CRED.client_id, "sub": CRED.client_id, "aud": CRED.tenant, "exp": now + 60}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


REFUSED_ASSERTIONS = {
    "signed by another key": lambda: assertion(key=OTHER.private_key),
    "HS256": lambda: assertion(key="x" * 32, alg="HS256"),
    "alg none": _none_alg_token,
    "RS256": lambda: assertion(
        key=rsa.generate_private_key(public_exponent=65537, key_size=2048), alg="RS256"
    ),
    "wrong aud": lambda: assertion(aud="other.accessgov.test"),
    "aud with port": lambda: assertion(aud="acme.accessgov.test:443"),
    "two-element aud": lambda: assertion(aud=[CRED.tenant, CRED.tenant]),
    "exp too far": lambda: assertion(exp=int(time.time()) + 600),
    "exp missing": lambda: assertion(exp=DROP),
    "exp past": lambda: assertion(exp=int(time.time()) - 10),
    "iss differs from sub": lambda: assertion(iss=OTHER.client_id),
    "sub differs": lambda: assertion(sub="someone-else"),
    "nbf in the future": lambda: assertion(nbf=int(time.time()) + 60),
    "iat in the future": lambda: assertion(iat=int(time.time()) + 60),
    "not a JWT": lambda: "not-a-jwt",
}


@pytest.mark.parametrize("case", REFUSED_ASSERTIONS)
def test_bad_client_assertions_are_refused(emu: Emulator, case: str) -> None:
    response = token_request(emu, **assertion_form(REFUSED_ASSERTIONS[case]()))
    assert response.status_code == 401, response.text
    body = response.json()
    assert body["code"] == 16
    assert body["message"]
    assert CRED.client_secret.rsplit(":", 1)[1] not in response.text


def test_client_secret_login_and_stats(fresh: Emulator) -> None:
    good = token_request(
        fresh,
        grant_type="client_credentials",
        client_id=CRED.client_id,
        client_secret=CRED.client_secret,
    )
    assert good.status_code == 200
    bad = token_request(
        fresh, grant_type="client_credentials", client_id=CRED.client_id, client_secret="nope"
    )
    assert bad.status_code == 401
    assert bad.json()["code"] == 16
    token_request(fresh, **assertion_form(assertion()))
    stats = fresh.stats
    assert stats["token_requests"] == 3
    assert stats["token_requests_by_method"] == {"client_secret": 2, "client_assertion": 1}
    assert stats["token_failures"] == 1


@pytest.mark.parametrize(
    ("form", "status"),
    [
        ({"grant_type": "password"}, 400),
        ({"client_assertion_type": "urn:other"}, 400),
        ({"client_assertion": ""}, 400),
        ({"client_id": OTHER.client_id}, 401),
        ({"client_secret": CRED.client_secret}, 400),  # both methods at once
    ],
)
def test_malformed_token_requests(emu: Emulator, form: dict[str, str], status: int) -> None:
    response = token_request(emu, **(assertion_form(assertion()) | form))
    assert response.status_code == status, response.text


def test_token_request_needs_a_form(emu: Emulator) -> None:
    response = requests.post(
        f"{emu.url}/auth/v1/token", json=assertion_form(assertion()), timeout=10
    )
    assert response.status_code == 400
    assert token_request(emu, grant_type="client_credentials").status_code == 400
    assert requests.get(f"{emu.url}/auth/v1/token", timeout=10).status_code == 405


def test_expired_token_is_refused(fresh: Emulator) -> None:
    fresh.token_lifetime = 1
    session = login(fresh)
    assert session.post(fresh.url + FEED, json={}, timeout=10).status_code == 200
    time.sleep(1.1)
    response = session.post(fresh.url + FEED, json={}, timeout=10)
    assert response.status_code == 401
    assert response.json()["code"] == 16
    assert fresh.stats["unauthorized"] == 1


def test_revoked_and_missing_tokens_are_refused(fresh: Emulator) -> None:
    session = login(fresh)
    assert session.post(fresh.url + FEED, json={}, timeout=10).status_code == 200
    fresh.revoke_tokens()
    assert session.post(fresh.url + FEED, json={}, timeout=10).status_code == 401
    assert requests.post(fresh.url + FEED, json={}, timeout=10).status_code == 401
    assert login(fresh).post(fresh.url + FEED, json={}, timeout=10).status_code == 200


# ----- grant feed ------------------------------------------------------------------------


@pytest.mark.parametrize(("asked", "got"), [(5, 10), (500, 100), (None, 25), (0, 25), (40, 40)])
def test_feed_page_size_is_clamped(api, emu: Emulator, asked: int | None, got: int) -> None:
    body = {} if asked is None else {"pageSize": asked}
    page = feed(api, emu, body).json()
    assert len(page["list"]) == got
    assert page["nextPageToken"]


def test_full_traversal_equals_ground_truth(api, emu: Emulator, ds: Dataset) -> None:
    entries = traverse(api, emu, {})
    assert entries == ds.feed_entries()
    assert len(entries) == ds.total


def test_page_size_may_change_between_pages(api, emu: Emulator, ds: Dataset) -> None:
    first = feed(api, emu, {"pageSize": 10}).json()
    second = feed(api, emu, {"pageSize": 30, "pageToken": first["nextPageToken"]}).json()
    assert first["list"] + second["list"] == ds.feed_entries()[:40]


def test_filters_equal_ground_truth(api, emu: Emulator, ds: Dataset) -> None:
    shared_app, shared_entitlement = ds.entitlements[0]
    app1 = ds.apps[1]
    some = ds.feed_entries()[:7]
    app_users = [(e["feed"]["appId"], e["feed"]["appUserId"]) for e in some[:3]]
    users = sorted({ds.user_of_app_user(e["feed"]["appUserId"]) for e in some[3:]})
    cases = [
        ({"appRefs": [{"id": app1}]}, {"app_ids": [app1]}),
        (
            # The same entitlement id exists in apps 0 and 1: only app 1's events match.
            {"appEntitlementRefs": [{"appId": app1, "id": shared_entitlement}]},
            {"app_entitlement_refs": [(app1, shared_entitlement)]},
        ),
        (
            {"appUserRefs": [{"appId": a, "id": u} for a, u in app_users]},
            {"app_user_refs": app_users},
        ),
        ({"userRefs": [{"id": u} for u in users]}, {"user_ids": users}),
        (
            {"after": "2025-04-01T00:00:00Z", "before": "2025-04-20T12:00:00.5Z"},
            {"after": "2025-04-01T00:00:00Z", "before": "2025-04-20T12:00:00.5Z"},
        ),
        (
            {"after": "2025-03-01T00:00:00+02:00", "appRefs": [{"id": app1}, {"id": shared_app}]},
            {"after": "2025-02-28T22:00:00Z", "app_ids": [app1, shared_app]},
        ),
        ({"appRefs": None, "userRefs": []}, {}),
    ]
    for body, truth in cases:
        expected = ds.feed_entries(**truth)
        assert traverse(api, emu, body) == expected, body
        assert expected or body == {}, f"filter {body} should match something"
    app1_first = next(e for a, e in ds.entitlements if a == app1)
    assert app1_first == shared_entitlement  # ids are unique only within an app
    only_app1 = ds.feed_entries(app_entitlement_refs=[(app1, shared_entitlement)])
    assert {e["feed"]["appId"] for e in only_app1} == {app1}


def test_after_bound_is_inclusive_and_before_exclusive(api, emu: Emulator, ds: Dataset) -> None:
    instant = ds.feed_entries()[100]["feed"]["date"]
    assert instant in [e["feed"]["date"] for e in traverse(api, emu, {"after": instant})]
    assert instant not in [e["feed"]["date"] for e in traverse(api, emu, {"before": instant})]


def test_page_token_is_bound_to_the_request(api, emu: Emulator, ds: Dataset) -> None:
    body = {"appRefs": [{"id": ds.apps[0]}]}
    token = feed(api, emu, body).json()["nextPageToken"]
    assert feed(api, emu, body | {"pageToken": token, "pageSize": 50}).status_code == 200
    for other in (
        {},
        {"appRefs": [{"id": ds.apps[1]}]},
        body | {"expandMask": {"paths": ["app_id"]}},
    ):
        replay = feed(api, emu, other | {"pageToken": token})
        assert replay.status_code == 400
        assert replay.json() == {
            "code": 3,
            "message": "page token does not match request",
            "details": [],
        }
    forged = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    for garbled in ("not a token!", forged, "x"):
        assert feed(api, emu, body | {"pageToken": garbled}).status_code == 400


def test_empty_result_has_null_list(api, emu: Emulator) -> None:
    page = feed(api, emu, {"after": "2030-01-01T00:00:00Z"}).json()
    assert page == {"list": None, "expanded": None, "nextPageToken": ""}


def test_dates_are_unsorted_and_use_every_precision(ds: Dataset) -> None:
    dates = [e["feed"]["date"] for e in ds.feed_entries()]
    assert dates != sorted(dates)
    widths = Counter(len(d) for d in dates)  # 20, 24, 27, 30 chars: 0, 3, 6, 9 digits
    assert set(widths) == {20, 24, 27, 30}
    assert min(widths.values()) > len(dates) / 10
    assert max(map(parse_rfc3339, dates)) < parse_rfc3339(END)


def test_feed_entries_look_like_the_service(ds: Dataset) -> None:
    entries = [e["feed"] for e in ds.feed_entries()]
    with_ticket = sum("ticketId" in e for e in entries) / len(entries)
    assert 0.5 < with_ticket < 0.7
    kinds = Counter(e["eventType"] for e in entries)
    assert kinds["GRANT_EVENT_TYPE_ADDED"] > kinds["GRANT_EVENT_TYPE_UNSPECIFIED"] > 0
    assert kinds["GRANT_EVENT_TYPE_REMOVED"] > 0
    assert kinds["GRANT_EVENT_TYPE_MODIFIED"] > 0  # a value newer than the spec
    assert all(None not in e.values() for e in entries)


def test_expand_mask_paths_resolve(api, emu: Emulator, ds: Dataset) -> None:
    body = {"expandMask": {"paths": ["*"]}, "pageSize": 100}
    page = feed(api, emu, body).json()
    expanded = page["expanded"]
    keys = [(o["@type"], o.get("appId"), o["id"]) for o in expanded]
    assert len(keys) == len(set(keys))
    saw_ticketless = False
    for entry in page["list"]:
        f = entry["feed"]

        def at(path: str) -> dict[str, Any]:
            assert path.startswith("$.expanded[")
            return expanded[int(path[len("$.expanded[") : -1])]

        assert at(entry["appPath"])["@type"] == "type.googleapis.com/c1.api.app.v1.App"
        assert at(entry["appPath"])["id"] == f["appId"]
        entitlement = at(entry["entitlementPath"])
        assert entitlement["@type"].endswith("app.v1.AppEntitlement")
        assert (entitlement["appId"], entitlement["id"]) == (f["appId"], f["appEntitlementId"])
        app_user = at(entry["appUserPath"])
        assert (app_user["appId"], app_user["id"]) == (f["appId"], f["appUserId"])
        assert app_user["identityUserId"] == ds.user_of_app_user(f["appUserId"])
        if "ticketId" in f:
            assert at(entry["ticketPath"])["id"] == f["ticketId"]
            assert at(entry["ticketPath"])["@type"].endswith("ticket.v1.Ticket")
        else:
            saw_ticketless = True
            assert "ticketPath" not in entry
    assert saw_ticketless
    only_app = feed(api, emu, {"expandMask": {"paths": ["app_id"]}}).json()
    assert all(set(e) == {"appPath", "feed"} for e in only_app["list"])
    assert {o["@type"] for o in only_app["expanded"]} == {"type.googleapis.com/c1.api.app.v1.App"}
    plain = feed(api, emu, {}).json()
    assert plain["expanded"] is None
    assert all(set(e) == {"feed"} for e in plain["list"])


@pytest.mark.parametrize(
    "body",
    [
        {"unknownField": 1},
        {"after": "yesterday"},
        {"after": "2025-01-01"},
        {"before": "2025-01-01T00:00:00"},
        {"pageSize": "many"},
        {"pageSize": True},
        {"pageToken": 5},
        {"appRefs": {"id": "x"}},
        {"appRefs": [{"id": "x", "extra": 1}]},
        {"appEntitlementRefs": [{"id": "x"}]},
        {"expandMask": {"paths": ["user"]}},
        {"expandMask": {"paths": ["app"]}},
        {"expandMask": {"paths": ["app_entitlement"]}},
        {"expandMask": {"paths": ["app_user"]}},
        {"expandMask": {"paths": ["ticket"]}},
        {"expandMask": ["app_id"]},
        [],
    ],
)
def test_feed_rejects_bad_requests(api, emu: Emulator, body: Any) -> None:
    response = feed(api, emu, body)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == 3


def test_feed_protocol_errors(api, emu: Emulator) -> None:
    not_json = api.post(emu.url + FEED, data=b"{nope", timeout=10)
    assert not_json.status_code == 400
    assert api.get(emu.url + FEED, timeout=10).status_code == 405
    assert api.get(emu.url + "/api/v1/nothing", timeout=10).status_code == 404
    assert api.post(emu.url + FEED, data=b"", timeout=10).status_code == 200  # empty = {}


def test_after_near_the_end_of_a_big_feed_is_fast() -> None:
    started = time.perf_counter()
    big = Dataset(seed=2, events=1_000_000, apps=8, users=2000, end=END)
    built = time.perf_counter() - started
    flt = big.make_filter(after="2025-05-31T00:00:00Z")
    started = time.perf_counter()
    found, resume = big.scan(flt, 0, 100)
    assert time.perf_counter() - started < 0.2
    assert built < 3
    assert found
    assert resume is None or resume > 990_000


# ----- automation exclusions -------------------------------------------------------------


def traverse_exclusions(api, emu: Emulator, app_id: str, entitlement_id: str, **params: Any):
    entries, pages, token = [], [], None
    while True:
        query = params | ({"page_token": token} if token else {})
        response = api.get(exclusions_url(emu, app_id, entitlement_id), params=query, timeout=10)
        assert response.status_code == 200, response.text
        page = response.json()
        pages.append(page)
        entries.extend(page["list"] or [])
        token = page.get("nextPageToken")
        if not token:
            return entries, pages


def test_exclusions_equal_ground_truth(api, emu: Emulator, ds: Dataset) -> None:
    sizes = []
    for app_id, entitlement_id in ds.exclusion_entitlements:
        entries, pages = traverse_exclusions(api, emu, app_id, entitlement_id)
        assert entries == ds.exclusion_entries(app_id, entitlement_id)
        assert "nextPageToken" not in pages[-1]
        assert all(len(p["list"]) == 25 for p in pages[:-1])
        sizes.append(len(entries))
    assert 0 in sizes
    assert max(sizes) > 100
    big = ds.exclusion_entitlements[sizes.index(max(sizes))]
    entries, pages = traverse_exclusions(api, emu, *big, page_size=100)
    assert entries == ds.exclusion_entries(*big)
    assert len(pages) > 1
    _, small_pages = traverse_exclusions(api, emu, *big, page_size=5)
    assert len(small_pages[0]["list"]) == 10


def test_empty_exclusions_page(api, emu: Emulator, ds: Dataset) -> None:
    empty = next(k for k in ds.exclusion_entitlements if not ds.exclusion_entries(*k))
    response = api.get(exclusions_url(emu, *empty), timeout=10)
    assert response.json() == {"list": None}


def test_users_are_shared_and_varied(ds: Dataset) -> None:
    seen: Counter[str] = Counter()
    users = {}
    for key in ds.exclusion_entitlements:
        for entry in ds.exclusion_entries(*key):
            seen[entry["user"]["id"]] += 1
            users[entry["user"]["id"]] = entry["user"]
            assert ds.user_of_app_user(entry["appUserId"]) == entry["user"]["id"]
    assert max(seen.values()) >= 2
    records = list(users.values())
    assert {"SUSPENDED", "ENABLED"} <= {u["status"] for u in records}
    assert "USER_TYPE_ROBOT" in {u["type"] for u in records}
    assert any("deletedAt" in u for u in records)
    assert any("deletedAt" not in u for u in records)
    assert any("delegatedUserId" in u for u in records)
    assert any("profile" in u and isinstance(u["profile"].get("address"), dict) for u in records)
    assert all(None not in u.values() for u in records)
    assert ds.user(records[0]["id"]) == records[0]


def test_exclusions_not_found_and_token_binding(api, emu: Emulator, ds: Dataset) -> None:
    app0 = ds.apps[0]
    entitlement_of_app0 = [e for a, e in ds.entitlements if a == app0][1]
    for app_id, entitlement_id in [
        (app0, "nope"),
        ("nope", entitlement_of_app0),
        (ds.apps[2], entitlement_of_app0),
    ]:
        response = api.get(exclusions_url(emu, app_id, entitlement_id), timeout=10)
        assert response.status_code == 404
        assert response.json()["code"] == 5
    multi = [k for k in ds.exclusion_entitlements if len(ds.exclusion_entries(*k)) > 25]
    token = api.get(exclusions_url(emu, *multi[0]), timeout=10).json()["nextPageToken"]
    replay = api.get(exclusions_url(emu, *multi[1]), params={"page_token": token}, timeout=10)
    assert replay.status_code == 400
    bad = api.get(exclusions_url(emu, *multi[0]), params={"limit": 3}, timeout=10)
    assert bad.status_code == 400
    assert api.post(exclusions_url(emu, *multi[0]), timeout=10).status_code == 405


# ----- faults ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["429", "500", "502", "503", "504"])
def test_gateway_error_faults(api, emu: Emulator, ds: Dataset, kind: str) -> None:
    emu.reset_stats()
    emu.faults.add(kind=kind, path=FEED, times=2)
    for _ in range(2):
        response = feed(api, emu, {})
        assert response.status_code == int(kind)
        assert response.json()["code"] in (8, 13, 14)
        if kind == "429":
            assert response.headers["Retry-After"] == "1"
    assert feed(api, emu, {}).json()["list"] == ds.feed_entries()[:25]
    assert emu.stats["faults_by_kind"] == {kind: 2}
    assert emu.stats["faults_injected"] == 2


def test_retry_after_as_http_date(api, emu: Emulator) -> None:
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    emu.faults.add(kind="429", retry_after=date)
    assert feed(api, emu, {}).headers["Retry-After"] == date


def test_transport_faults(api, emu: Emulator, ds: Dataset) -> None:
    emu.faults.add(kind="drop")
    with pytest.raises(requests.ConnectionError):
        feed(api, emu, {})
    emu.faults.add(kind="malformed")
    malformed = feed(api, emu, {})
    assert malformed.status_code == 200
    with pytest.raises(ValueError, match="Expecting value"):
        malformed.json()
    emu.faults.add(kind="truncated")
    with pytest.raises((requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        feed(api, emu, {})
    emu.faults.add(kind="slow", delay=0.5)
    with pytest.raises(requests.ReadTimeout):
        api.post(emu.url + FEED, json={}, timeout=0.2)
    assert feed(api, emu, {}).json()["list"] == ds.feed_entries()[:25]


def test_faults_respect_paths(api, emu: Emulator, ds: Dataset) -> None:
    emu.faults.add(kind="503", path="/api/v1/apps", times=1)
    assert feed(api, emu, {}).status_code == 200
    assert (
        api.get(exclusions_url(emu, *ds.exclusion_entitlements[0]), timeout=10).status_code == 503
    )
    emu.faults.add(kind="503", times=1)  # any /api/ path, never the token endpoint
    assert login(emu) is not None
    assert feed(api, emu, {}).status_code == 503
    emu.faults.add(kind="500", path="/auth/v1/token")
    assert token_request(emu, **assertion_form(assertion())).status_code == 500


def test_random_faults_are_seeded(api, emu: Emulator) -> None:
    def run() -> list[int]:
        emu.faults.random(rate=0.5, kinds=("500", "503"), seed=3)
        return [feed(api, emu, {}).status_code for _ in range(20)]

    first = run()
    assert first == run()
    assert {200, 500, 503} <= set(first)
    emu.faults.clear()
    assert feed(api, emu, {}).status_code == 200


def test_latency(api, emu: Emulator) -> None:
    emu.latency = 0.2
    started = time.perf_counter()
    feed(api, emu, {})
    assert time.perf_counter() - started >= 0.2


# ----- added events and controls ---------------------------------------------------------


def test_added_events_are_visible(fresh: Emulator) -> None:
    ds = fresh.dataset
    session = login(fresh)
    # Compare instants, not strings: "…:36Z" sorts after "…:36.119Z" as text.
    latest = max((e["feed"]["date"] for e in ds.feed_entries()), key=parse_rfc3339)
    assert fresh.add_events(count=30) == 230
    new = [e for e in ds.feed_entries() if parse_rfc3339(e["feed"]["date"]) > parse_rfc3339(latest)]
    assert len(new) == 30
    assert new == ds.feed_entries()[200:]
    instants = [parse_rfc3339(e["feed"]["date"]) for e in new]
    assert instants == sorted(set(instants))
    assert instants[-1] < parse_rfc3339(END) + 60 * 10**9
    assert len({len(e["feed"]["date"]) for e in new}) > 1
    fresh.add_events(dates=[latest, "2025-05-01T10:00:00.123Z"])
    assert session.post(fresh.url + FEED, json={"after": latest, "pageSize": 100}, timeout=10).ok
    got = []
    body: dict[str, Any] = {"after": latest, "pageSize": 100}
    while True:
        page = session.post(fresh.url + FEED, json=body, timeout=10).json()
        got.extend(page["list"] or [])
        if not page["nextPageToken"]:
            break
        body["pageToken"] = page["nextPageToken"]
    assert got == ds.feed_entries(after=latest)
    assert sum(e["feed"]["date"] == latest for e in got) == 2
    assert ds.feed_entries()[-1]["feed"]["date"] == "2025-05-01T10:00:00.123Z"


def test_http_controls(fresh: Emulator) -> None:
    control = fresh.url + "/_emulator/"
    session = login(fresh)
    assert requests.post(control + "events", json={"count": 5}, timeout=10).json() == {"total": 205}
    requests.post(
        control + "faults", json={"kind": "429", "path": FEED, "retry_after": "2"}, timeout=10
    )
    response = session.post(fresh.url + FEED, json={}, timeout=10)
    assert (response.status_code, response.headers["Retry-After"]) == (429, "2")
    requests.post(
        control + "faults", json={"random": {"rate": 1.0, "kinds": ["502"], "seed": 1}}, timeout=10
    )
    assert session.post(fresh.url + FEED, json={}, timeout=10).status_code == 502
    requests.post(control + "faults", json={"clear": True}, timeout=10)
    assert session.post(fresh.url + FEED, json={}, timeout=10).status_code == 200
    stats = requests.get(control + "stats", timeout=10).json()
    assert stats["faults_by_kind"] == {"429": 1, "502": 1}
    assert stats["api_requests_by_path"] == {FEED: 3}
    settings = requests.post(
        control + "settings", json={"token_lifetime": 5, "latency": 0}, timeout=10
    )
    assert settings.json() == {
        "latency": 0.0,
        "token_lifetime": 5,
        "exclusions_ignore_page_token": False,
    }
    assert fresh.token_lifetime == 5
    requests.post(control + "revoke-tokens", timeout=10)
    assert session.post(fresh.url + FEED, json={}, timeout=10).status_code == 401
    requests.post(control + "reset-stats", timeout=10)
    assert requests.get(control + "stats", timeout=10).json()["api_requests"] == 0
    assert requests.post(control + "faults", json={"kind": "teapot"}, timeout=10).status_code == 400
    config = requests.get(control + "config", timeout=10).json()
    assert config["api_url"] == fresh.url


def test_credential_format() -> None:
    cred = make_credential(seed=7, tenant="acme.accessgov.test")
    random_id, rest = cred.client_id.split("@")
    assert len(random_id) == 20
    assert random_id.isalnum()
    assert random_id.islower()
    assert rest == "acme.accessgov.test/tap-accessgov"
    prefix, domain, version, jwk_text = cred.client_secret.split(":")
    assert (prefix, domain, version) == ("secret-token", "accessgov.test", "v1")
    assert "=" not in jwk_text
    jwk = json.loads(jwt.utils.base64url_decode(jwk_text))
    assert set(jwk) == {"kty", "crv", "x", "d"}
    assert (jwk["kty"], jwk["crv"]) == ("OKP", "Ed25519")
    assert len(jwk["x"]) == len(jwk["d"]) == 43
    assert make_credential(seed=7).client_secret == cred.client_secret
    assert make_credential(seed=8).client_id != cred.client_id
    assert "secret" not in repr(cred)


def test_dataset_is_deterministic() -> None:
    a, b = small_dataset(events=300), small_dataset(events=300)
    assert a.feed_entries() == b.feed_entries()
    assert a.exclusion_entitlements == b.exclusion_entitlements
    assert small_dataset(events=300, seed=2).feed_entries() != a.feed_entries()


def test_cli_serves_until_sigterm(tmp_path: Path) -> None:
    config, ready = tmp_path / "config.json", tmp_path / "ready"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emulator",
            "--port",
            "0",
            "--events",
            "500",
            "--users",
            "50",
            "--apps",
            "3",
            "--exclusion-entitlements",
            "5",
            "--write-config",
            str(config),
            "--ready-file",
            str(ready),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("emulator listening on http://127.0.0.1:")
        url = line.split()[-1]
        assert ready.read_text().strip() == url
        settings = json.loads(config.read_text())
        assert settings["api_url"] == url
        assert len(settings["exclusion_entitlements"]) == 5
        assert set(settings["exclusion_entitlements"][0]) == {"app_id", "app_entitlement_id"}
        response = requests.post(
            f"{url}/auth/v1/token",
            data={
                "grant_type": "client_credentials",
                "client_id": settings["client_id"],
                "client_secret": settings["client_secret"],
            },
            timeout=10,
        )
        assert response.status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def test_sparse_search_of_a_big_feed_answers_short_pages(ds: Dataset) -> None:
    counts = Counter((e["feed"]["appId"], e["feed"]["appUserId"]) for e in ds.feed_entries())
    ref, count = counts.most_common(1)[0]
    assert count >= 3
    flt = ds.make_filter(app_user_refs=[ref])
    found, resume = ds.scan(flt, 0, 100, budget=500)
    assert found
    assert resume is not None
    assert len(found) < count
    rest, end = ds.scan(flt, resume, ds.total)
    assert end is None
    feed = [{"feed": ds.feed_object(e)} for e in found + rest]
    assert feed == ds.feed_entries(app_user_refs=[ref])


def test_expand_mask_id_field_names_each_expand_their_object(api, emu: Emulator) -> None:
    everything = feed(api, emu, {"expandMask": {"paths": ["*"]}}).json()
    named = feed(
        api,
        emu,
        {"expandMask": {"paths": ["app_id", "app_entitlement_id", "app_user_id", "ticket_id"]}},
    ).json()
    assert (named["list"], named["expanded"]) == (everything["list"], everything["expanded"])
    for path, field in (
        ("app_entitlement_id", "entitlementPath"),
        ("app_user_id", "appUserPath"),
        ("ticket_id", "ticketPath"),
    ):
        page = feed(api, emu, {"expandMask": {"paths": [path]}}).json()
        assert {key for entry in page["list"] for key in entry} == {"feed", field}


def test_exclusions_can_ignore_the_page_token_like_a_lenient_gateway(ds: Dataset) -> None:
    with Emulator(ds, credential=CRED, exclusions_ignore_page_token=True) as lenient:
        session = login(lenient)
        app_id, entitlement_id = next(
            (a, e) for a, e in ds.exclusion_entitlements if len(ds.exclusion_entries(a, e)) > 25
        )
        url = exclusions_url(lenient, app_id, entitlement_id)
        first = session.get(url, timeout=10).json()
        again = session.get(
            url, params={"page_token": first["nextPageToken"], "page_size": 100}, timeout=10
        ).json()
        assert again == first
        assert len(first["list"]) == 25
        lenient.control("POST", "/_emulator/settings", b'{"exclusions_ignore_page_token": false}')
        second = session.get(url, params={"page_token": first["nextPageToken"]}, timeout=10).json()
        assert second["list"] != first["list"]


def test_the_command_line_can_ignore_the_exclusions_page_token() -> None:
    from emulator.__main__ import parse_args

    assert parse_args(["--exclusions-ignore-page-token"]).exclusions_ignore_page_token is True
    assert parse_args([]).exclusions_ignore_page_token is False


# ----- grant lifecycles and the ground truth of access -----------------------------------


def catalog_fingerprint(ds: Dataset) -> str:
    catalog = {
        "apps": [(ds.expanded_app(a), ds.entitlements) for a in range(len(ds.apps))],
        "users": ds.user_ids,
        "app_users": [
            ds.app_user_id(a, u) for a in range(len(ds.apps)) for u in range(len(ds.user_ids))
        ],
        "exclusions": [
            [key, [e["appUserId"] for e in ds.exclusion_entries(*key)]]
            for key in ds.exclusion_entitlements
        ],
    }
    return hashlib.sha256(json.dumps(catalog).encode()).hexdigest()[:16]


def test_lifecycles_leave_the_catalog_as_it_was() -> None:
    # Pinned from the generator before grant lifecycles (meltano.yml names the default
    # dataset's exclusion entitlements): events may change, apps/users/exclusions may not.
    assert catalog_fingerprint(Dataset(events=10, end=END)) == "44cedac7f09b21f5"
    assert catalog_fingerprint(small_dataset(events=10)) == "b52ff591fba327c4"


def history(*events: tuple[str, str, str | None], app_user: str = "u1") -> list[dict[str, Any]]:
    """Feed objects of one grant from (type, date, ticket id)."""
    return [
        {
            "appId": "a",
            "appEntitlementId": "e",
            "appUserId": app_user,
            "eventType": "GRANT_EVENT_TYPE_" + kind,
            "date": date,
        }
        | ({"ticketId": ticket} if ticket else {})
        for kind, date, ticket in events
    ]


T1, T2, T3, T4 = (f"2025-01-0{d}T00:00:00Z" for d in range(1, 5))


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # granted, revoked, granted again: two intervals, tickets on both ends
        (
            [("ADDED", T1, "t1"), ("REMOVED", T2, "t2"), ("ADDED", T3, None)],
            [(T1, T2, "t1", "t2"), (T3, None, None, None)],
        ),
        # first event REMOVED: held since before the data begins
        (
            [("REMOVED", T2, "t9"), ("ADDED", T3, "t3")],
            [(None, T2, None, "t9"), (T3, None, "t3", None)],
        ),
        # ADDED while held changes nothing; REMOVED while not held (not first) neither
        (
            [
                ("ADDED", T1, "t1"),
                ("ADDED", T2, "t2"),
                ("REMOVED", T3, None),
                ("REMOVED", T4, None),
            ],
            [(T1, T3, "t1", None)],
        ),
        # unknown types never change a grant; input order does not matter
        (
            [("MODIFIED", T2, None), ("UNSPECIFIED", T3, None), ("ADDED", T1, None)],
            [(T1, None, None, None)],
        ),
        # one instant: REMOVED applies before ADDED, while held (a re-grant) ...
        (
            [("ADDED", T1, None), ("ADDED", T2, "b"), ("REMOVED", T2, "a")],
            [(T1, T2, None, "a"), (T2, None, "b", None)],
        ),
        # ... and while not held: the grant is reported, not hidden
        (
            [
                ("ADDED", T1, None),
                ("REMOVED", T2, None),
                ("ADDED", T3, None),
                ("REMOVED", T3, None),
            ],
            [(T1, T2, None, None), (T3, None, None, None)],
        ),
        # ... also as the grant's first events
        (
            [("ADDED", T1, None), ("REMOVED", T1, None)],
            [(None, T1, None, None), (T1, None, None, None)],
        ),
        # at-least-once delivery: duplicates of the key count once, mixed precision is one instant
        (
            [("ADDED", T1, "t"), ("ADDED", "2025-01-01T00:00:00.000Z", "t"), ("REMOVED", T2, None)],
            [(T1, T2, "t", None)],
        ),
    ],
)
def test_lifecycle_rules(events, expected) -> None:
    got = lifecycle.intervals(history(*events))
    as_ns = [
        (None if g is None else parse_rfc3339(g), None if r is None else parse_rfc3339(r), gt, rt)
        for g, r, gt, rt in expected
    ]
    assert [
        (i.granted_at, i.revoked_at, i.granted_ticket_id, i.revoked_ticket_id) for i in got
    ] == as_ns
    assert all(i[:3] == ("a", "e", "u1") for i in got)


def test_held_at_an_instant() -> None:
    intervals = lifecycle.intervals(
        history(("REMOVED", T2, None), ("ADDED", T3, None))
        + history(("ADDED", T1, None), ("REMOVED", T3, None), app_user="u2")
    )

    def holders(at: str) -> list[str]:
        return sorted(i.app_user_id for i in lifecycle.held_at(intervals, parse_rfc3339(at)))

    assert holders("2024-12-31T00:00:00Z") == ["u1"]  # held since before the data
    assert holders(T1) == ["u1", "u2"]  # granted at the instant: held
    assert holders(T2) == ["u2"]  # revoked at the instant: not held
    assert holders(T3) == ["u1"]
    assert [i.app_user_id for i in lifecycle.held_at(intervals)] == ["u1"]


def state_changes(ds: Dataset) -> tuple[int, int]:
    """(ADDED/REMOVED events that changed their grant, all such events) among every grant's
    events after its first, replaying the rules in date order (REMOVED first at one instant)."""
    events = lifecycle.distinct_events(e["feed"] for e in ds.feed_entries())
    ordered = sorted(
        (date, kind == lifecycle.ADDED, grant)
        for (*grant_parts, kind, date), _ in events.items()
        if kind in (lifecycle.ADDED, lifecycle.REMOVED)
        for grant in [tuple(grant_parts)]
    )
    held: dict[tuple[str, ...], bool] = {}
    changed = 0
    followers = 0
    for _, is_added, grant in ordered:
        if grant in held:
            followers += 1
            changed += held[grant] != is_added
        held[grant] = is_added
    return changed, followers


def test_feed_tells_coherent_grant_lifecycles(ds: Dataset) -> None:
    changed, total = state_changes(ds)
    assert total > len(ds.feed_entries()) / 2
    assert changed / total > 0.9  # independent draws change about half
    intervals = ds.intervals()
    per_grant = Counter(i[:3] for i in intervals)
    assert sum(n > 1 for n in per_grant.values()) > len(per_grant) / 4  # re-granted
    assert any(i.granted_at is None for i in intervals)  # held since before the feed
    assert any(i.revoked_at is not None and i.granted_at is not None for i in intervals)
    current = ds.grants_at()
    assert 0 < len(current) < len(per_grant)
    entries = [e["feed"] for e in ds.feed_entries()]
    instants = Counter(
        (f["appId"], f["appEntitlementId"], f["appUserId"], f["date"]) for f in entries
    )
    pairs = [k for k, n in instants.items() if n > 1]
    assert pairs  # ADDED and REMOVED of one grant at one instant
    for app, entitlement, user, date in pairs:
        kinds = {
            f["eventType"]
            for f in entries
            if (f["appId"], f["appEntitlementId"], f["appUserId"], f["date"])
            == (app, entitlement, user, date)
        }
        assert kinds == {lifecycle.ADDED, lifecycle.REMOVED}
    # Grants with history only in the first or the last part of the window, not all spanning it.
    first = {}
    for f in entries:
        key = (f["appId"], f["appEntitlementId"], f["appUserId"])
        first[key] = min(first.get(key, parse_rfc3339(f["date"])), parse_rfc3339(f["date"]))
    span = (min(first.values()), max(first.values()))
    assert span[1] - span[0] > (parse_rfc3339(END) - span[0]) / 2


def test_excluded_users_hold_what_they_are_excluded_from() -> None:
    # The demo's dataset: its question about disabled excluded users must have answers.
    rows = Dataset(events=30_000, end=END).excluded_users()
    holding = [r for r in rows if r["holds_entitlement"]]
    assert 0 < len(holding) < len(rows)
    assert any(r["directory_status"] == "DISABLED" for r in holding)
    assert len({(r["app_id"], r["app_entitlement_id"]) for r in holding}) > 10


def test_added_events_continue_lifecycles(fresh: Emulator) -> None:
    ds = fresh.dataset
    before = ds.intervals()
    fresh.add_events(count=300)
    changed, total = state_changes(ds)
    assert changed / total > 0.9
    new = [ds.event(i) for i in range(200, ds.total)]
    toggles = [e for e in new if e.event_type in (lifecycle.ADDED, lifecycle.REMOVED)]
    assert len(toggles) > 200
    assert {e.event_type for e in new} > {lifecycle.ADDED, lifecycle.REMOVED}
    after = ds.intervals()
    assert len({i[:3] for i in after} - {i[:3] for i in before}) < len(toggles) / 3
    assert after != before


def test_a_million_events_cost_little_memory() -> None:
    tracemalloc.start()
    try:
        big = Dataset(seed=3, events=1_000_000, end=END)
        big.event(999_999)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
