"""Parsing of the client id and client secret: every malformed variant has its own message,
and no message carries the secret."""

from __future__ import annotations

import base64
import json

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tap_accessgov.auth import (
    AccessGovAuthenticator,
    CredentialError,
    parse_client_id,
    parse_client_secret,
)
from tests.conftest import CREDENTIAL


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def secret_from_jwk(jwk: object, *, prefix: str = "secret-token:accessgov.test:v1:") -> str:
    return prefix + b64url(json.dumps(jwk).encode())


def good_jwk() -> dict[str, str]:
    encoded = CREDENTIAL.client_secret.rsplit(":", 1)[1]
    return json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))


@pytest.mark.parametrize(
    ("client_id", "host", "audience"),
    [
        ("abc@acme.accessgov.test/tap", "acme.accessgov.test", "acme.accessgov.test"),
        ("abc@ACME.AccessGov.Test/tap", "acme.accessgov.test", "acme.accessgov.test"),
        ("abc@acme.example:2443/tap", "acme.example:2443", "acme.example"),
        ("abc@acme.example/use/with/slashes", "acme.example", "acme.example"),
        ("a@b@acme.example/x", None, None),  # '@' inside the host part is not a host name
    ],
)
def test_client_id_parts(client_id: str, host: str | None, audience: str | None) -> None:
    if host is None:
        with pytest.raises(CredentialError, match=r"^client_id: "):
            parse_client_id(client_id)
        return
    parsed = parse_client_id(client_id)
    assert (parsed.host, parsed.audience, parsed.value) == (host, audience, client_id)
    assert parsed.base_url == f"https://{host}"


@pytest.mark.parametrize(
    ("client_id", "message"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("no-at-sign.example/tap", "has no '@'"),
        ("@acme.example/tap", "before '@' is empty"),
        ("abc@acme.example", "has no '/<use-case>'"),
        ("abc@/tap", "hostname between '@' and '/' is empty"),
        ("abc@acme.example:0/tap", "invalid port"),
        ("abc@acme.example:99999/tap", "invalid port"),
        ("abc@acme.example:https/tap", "invalid port"),
        ("abc@acme_example!/tap", "not a valid host name"),
    ],
)
def test_client_id_errors(client_id: str, message: str) -> None:
    with pytest.raises(CredentialError, match=f"^client_id: .*{message}"):
        parse_client_id(client_id)


def test_good_secret_parses_to_the_same_key() -> None:
    parsed = parse_client_secret(CREDENTIAL.client_secret)
    assert parsed.private_key.public_key().public_bytes(
        Encoding.Raw, PublicFormat.Raw
    ) == CREDENTIAL.public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert CREDENTIAL.client_secret not in repr(parsed)


def _variants() -> list[tuple[str, str]]:
    jwk = good_jwk()
    # another key, the same in every pytest-xdist worker (each collects the parameters)
    other_key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    other = other_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    encoded = CREDENTIAL.client_secret.rsplit(":", 1)[1]
    return [
        ("", "is empty"),
        ("secret-token:accessgov.test:v1", "4 ':'-separated parts .*found 3"),
        (CREDENTIAL.client_secret + ":extra", "found 5"),
        ("token:accessgov.test:v1:" + encoded, "does not start with 'secret-token:'"),
        ("secret-token::v1:" + encoded, "domain part is empty"),
        ("secret-token:accessgov.test:v2:" + encoded, "unsupported version marker"),
        ("secret-token:accessgov.test:v1:" + encoded + "==", "not base64url"),
        ("secret-token:accessgov.test:v1:" + encoded[:-3] + "+/!", "not base64url"),
        ("secret-token:accessgov.test:v1:" + b64url(b"not json"), "not base64url-encoded JSON"),
        (secret_from_jwk(["a", "list"]), "not a JSON Web Key object"),
        (secret_from_jwk({k: v for k, v in jwk.items() if k != "d"}), "no private part"),
        # The key itself is PyJWK's to check; each way it can be wrong gets the same message.
        *(
            (secret_from_jwk(bad), "not a valid Ed25519 private key")
            for bad in (
                {**jwk, "kty": "RSA"},
                {**jwk, "crv": "X25519"},
                {**jwk, "crv": "Ed448"},
                {**jwk, "d": "***"},
                {**jwk, "d": b64url(b"short")},
                {**jwk, "x": b64url(other)},
                {k: v for k, v in jwk.items() if k != "x"},
            )
        ),
    ]


VARIANTS = _variants()


# Named by what is wrong, not by the secret: a key would show in every test report.
@pytest.mark.parametrize(("secret", "message"), VARIANTS, ids=[message for _, message in VARIANTS])
def test_client_secret_errors(secret: str, message: str) -> None:
    with pytest.raises(CredentialError, match=f"^client_secret: .*{message}") as caught:
        parse_client_secret(secret)
    key_part = secret.rsplit(":", 1)[-1]
    if len(key_part) > 8:
        assert key_part not in str(caught.value)


def test_key_errors_never_carry_the_key() -> None:
    """PyJWT's own messages quote the JWK; ours must not, whatever is wrong with it."""
    jwk = good_jwk()
    for bad in ({**jwk, "kty": ""}, {**jwk, "crv": ""}, {**jwk, "x": "***"}):
        with pytest.raises(CredentialError) as caught:
            parse_client_secret(secret_from_jwk(bad))
        assert jwk["d"] not in str(caught.value)


def test_client_assertion_claims() -> None:
    authenticator = AccessGovAuthenticator(
        client_id=parse_client_id("abc@Acme.Example:2443/tap"),
        client_secret=parse_client_secret(CREDENTIAL.client_secret),
        auth_method="client_assertion",
        token_url="https://acme.example:2443/auth/v1/token",
    )
    first = authenticator.client_assertion()
    header = jwt.get_unverified_header(first)
    assert header["alg"] == "EdDSA"
    assert "kid" not in header
    claims = jwt.decode(first, CREDENTIAL.public_key, algorithms=["EdDSA"], audience="acme.example")
    assert claims["iss"] == claims["sub"] == "abc@Acme.Example:2443/tap"
    assert claims["aud"] == "acme.example"
    assert claims["exp"] - claims["iat"] == 120
    assert claims["iat"] - claims["nbf"] == 120
    assert len(claims["nonce"]) == 32
    second = jwt.decode(
        authenticator.client_assertion(),
        CREDENTIAL.public_key,
        algorithms=["EdDSA"],
        audience="acme.example",
    )
    assert second["nonce"] != claims["nonce"]
    body = authenticator.oauth_request_body
    assert body["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    assert "client_secret" not in body
    assert CREDENTIAL.client_secret not in repr(authenticator)


def test_the_tap_config_does_not_show_the_secret() -> None:
    from tap_accessgov.tap import TapAccessGov

    tap = TapAccessGov(
        config={"client_id": CREDENTIAL.client_id, "client_secret": CREDENTIAL.client_secret},
        parse_env_config=False,
    )
    key = CREDENTIAL.client_secret.rsplit(":", 1)[1]
    assert key not in repr(tap.config)
    assert key not in str(dict(tap.config))
    assert key not in repr(tap.authenticator)
    assert tap.config["client_secret"] == CREDENTIAL.client_secret  # still usable


def test_the_tap_leaves_the_given_config_as_it_was() -> None:
    """The secret is hidden by a read-only view: neither the caller's dict nor the SDK's copy
    of it is written to (the SDK keeps the dict it is given)."""
    from tap_accessgov.tap import TapAccessGov

    config = {"client_id": CREDENTIAL.client_id, "client_secret": CREDENTIAL.client_secret}
    tap = TapAccessGov(config=config, parse_env_config=False)
    assert type(config["client_secret"]) is str
    assert repr(config["client_secret"]) == repr(CREDENTIAL.client_secret)
    key = CREDENTIAL.client_secret.rsplit(":", 1)[1]
    stream_config = tap.streams["grant_feed"].config
    assert key not in repr(stream_config)
    assert stream_config["client_secret"] == CREDENTIAL.client_secret
