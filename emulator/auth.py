"""Logging in: API credentials as the service issues them, POST /auth/v1/token, the access
tokens it issues and the bearer check every API call passes.

A credential is derived from a seed so tests, the demo config and the emulator agree on it
without sharing files. Both documented login methods are accepted; everything else about the
token request (grant type, assertion type, repeated or missing fields, content type) is
checked the way a strict OAuth server would, and a client assertion as strictly as the real
service: EdDSA only, exact iss/sub/aud, and a short-lived `exp`. So a client that only works
against a lenient server fails here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import string
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from emulator.errors import bad_request, unauthenticated

TOKEN_PATH = "/auth/v1/token"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
MAX_ASSERTION_LIFETIME = 300  # seconds: "exp within five minutes of the current time"
CLOCK_SKEW = 5  # seconds tolerated for nbf/iat/exp against our clock


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Credential:
    """One API key: what the holder gets (client id + secret) and what the server keeps."""

    client_id: str
    client_secret: str
    private_key: Ed25519PrivateKey
    public_key: Ed25519PublicKey
    tenant: str

    @property
    def audience(self) -> str:
        """The `aud` a client assertion must carry: the hostname, lowercased, without port."""
        return self.tenant.split(":", 1)[0].lower()

    def __repr__(self) -> str:  # never show the secret
        return f"Credential(client_id={self.client_id!r}, tenant={self.tenant!r})"


def make_credential(
    seed: int = 7, tenant: str = "acme.accessgov.test", use_case: str = "tap-accessgov"
) -> Credential:
    """Build a deterministic credential: the same seed always gives the same key and ids."""
    material = hashlib.blake2b(f"credential:{seed}".encode(), digest_size=64).digest()
    private_key = Ed25519PrivateKey.from_private_bytes(material[:32])
    public_key = private_key.public_key()
    alphabet = string.ascii_lowercase + string.digits
    random_id = "".join(alphabet[b % len(alphabet)] for b in material[32:52])
    d = private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    x = public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url(x), "d": b64url(d)}
    host = tenant.split(":", 1)[0]
    service_domain = host.split(".", 1)[1] if "." in host else host
    encoded_jwk = b64url(json.dumps(jwk, separators=(",", ":")).encode())
    return Credential(
        client_id=f"{random_id}@{tenant}/{use_case}",
        client_secret=f"secret-token:{service_domain}:v1:{encoded_jwk}",
        private_key=private_key,
        public_key=public_key,
        tenant=tenant,
    )


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise unauthenticated(f"client assertion claim {name} must be a number")
    return float(value)


def verify_client_assertion(assertion: str, credential: Credential) -> None:
    """Check a method-2 client assertion; raise a 401 ApiError saying what is wrong.

    Messages name the failed rule, never the assertion or key material.
    """
    try:
        header = jwt.get_unverified_header(assertion)
    except jwt.PyJWTError:
        raise unauthenticated("client assertion is not a JWT") from None
    if header.get("alg") != "EdDSA":
        raise unauthenticated("client assertion must be signed with alg EdDSA")
    try:
        claims = jwt.decode(
            assertion,
            key=credential.public_key,
            algorithms=["EdDSA"],
            options={
                "verify_signature": True,
                "verify_aud": False,
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "verify_iss": False,
                "verify_sub": False,
                "verify_jti": False,
            },
        )
    except jwt.InvalidSignatureError:
        raise unauthenticated("client assertion signature is invalid") from None
    except jwt.PyJWTError:
        raise unauthenticated("client assertion could not be decoded") from None
    if claims.get("iss") != credential.client_id:
        raise unauthenticated("client assertion iss must be the client id")
    if claims.get("sub") != credential.client_id:
        raise unauthenticated("client assertion sub must be the client id")
    aud = claims.get("aud")
    if isinstance(aud, list) and len(aud) == 1:
        aud = aud[0]
    if aud != credential.audience:
        raise unauthenticated("client assertion aud must be the tenant hostname")
    now = time.time()
    exp = _number(claims, "exp")
    if exp is None:
        raise unauthenticated("client assertion must have exp")
    if exp <= now:
        raise unauthenticated("client assertion has expired")
    if exp > now + MAX_ASSERTION_LIFETIME + CLOCK_SKEW:
        raise unauthenticated("client assertion exp is more than five minutes away")
    nbf = _number(claims, "nbf")
    if nbf is not None and nbf > now + CLOCK_SKEW:
        raise unauthenticated("client assertion is not yet valid (nbf)")
    iat = _number(claims, "iat")
    if iat is not None and iat > now + CLOCK_SKEW:
        raise unauthenticated("client assertion iat is in the future")


# ----- the token endpoint ----------------------------------------------------------------

FORM_TYPE = "application/x-www-form-urlencoded"


class TokenStore:
    """Issued access tokens and their (monotonic) expiry times."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._expiry: dict[str, float] = {}
        self.issued: list[str] = []  # every token ever issued, for leak checks in tests

    def issue(self, lifetime: float) -> str:
        token = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self._lock:
            self._expiry = {t: e for t, e in self._expiry.items() if e > now}
            self._expiry[token] = now + lifetime
            self.issued.append(token)
        return token

    def valid(self, token: str) -> bool:
        with self._lock:
            expiry = self._expiry.get(token)
        return expiry is not None and time.monotonic() < expiry

    def revoke_all(self) -> None:
        with self._lock:
            self._expiry.clear()


def check_bearer(tokens: TokenStore, authorization: str | None) -> None:
    """401 unless the header is `Bearer <a live token>`."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not tokens.valid(token.strip()):
        raise unauthenticated()


def parse_form(content_type: str | None, body: bytes) -> dict[str, str]:
    """Decode the token request form; each field at most once."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != FORM_TYPE:
        raise bad_request(f"content type must be {FORM_TYPE}")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError):
        raise bad_request("request body is not a valid form") from None
    repeated = sorted(k for k, v in fields.items() if len(v) > 1)
    if repeated:
        raise bad_request(f"form fields given more than once: {', '.join(repeated)}")
    return {k: v[0] for k, v in fields.items()}


def login_method(form: dict[str, str]) -> str:
    """Which documented method the form uses: `client_assertion` or `client_secret`."""
    if form.get("grant_type") != "client_credentials":
        raise bad_request("grant_type must be client_credentials")
    if not form.get("client_id"):
        raise bad_request("client_id is required")
    has_assertion = "client_assertion" in form or "client_assertion_type" in form
    if has_assertion and "client_secret" in form:
        raise bad_request("send either client_secret or client_assertion, not both")
    if has_assertion:
        if form.get("client_assertion_type") != ASSERTION_TYPE:
            raise bad_request(f"client_assertion_type must be {ASSERTION_TYPE}")
        if not form.get("client_assertion"):
            raise bad_request("client_assertion is required")
        return "client_assertion"
    if form.get("client_secret"):
        return "client_secret"
    raise bad_request("client_secret or client_assertion is required")


def authenticate(form: dict[str, str], method: str, credential: Credential) -> None:
    """401 unless the form proves possession of `credential`."""
    if form["client_id"] != credential.client_id:
        raise unauthenticated("unknown client_id")
    if method == "client_secret":
        given, expected = form["client_secret"].encode(), credential.client_secret.encode()
        if not secrets.compare_digest(given, expected):
            raise unauthenticated("client_secret is not valid for this client")
    else:
        verify_client_assertion(form["client_assertion"], credential)


def token_response(tokens: TokenStore, lifetime: int) -> dict[str, Any]:
    return {"access_token": tokens.issue(lifetime), "token_type": "Bearer", "expires_in": lifetime}
