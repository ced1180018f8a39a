"""The token endpoint: the assertion and secret checks, token expiry and revocation, the
credential format."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

from emulator import Emulator, make_credential
from emulator.tests.conftest import (
    CRED,
    DROP,
    FEED,
    OTHER,
    assertion,
    assertion_form,
    login,
    token_request,
)

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
