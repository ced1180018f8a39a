"""Shared pieces of the emulator's own tests: a small deterministic dataset, emulators, and
clients that speak to it over real HTTP, as the tap would."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests

from emulator import Dataset, Emulator, make_credential

ROOT = Path(__file__).resolve().parents[2]
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
