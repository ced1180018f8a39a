"""Client credentials as the service issues them, and the checks its token endpoint makes.

A credential is derived from a seed so tests, the demo config and the emulator agree on it
without sharing files. Verification is deliberately as strict as the real service: EdDSA only,
exact iss/sub/aud, and a short-lived `exp`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import string
import time
from dataclasses import dataclass
from typing import Any

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

from emulator.errors import unauthenticated

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
