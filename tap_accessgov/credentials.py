"""The client id and client secret the service issues, parsed and checked before any request.

Client id: ``<random-id>@<hostname>/<use-case>``; the hostname names the tenant. Client secret:
``secret-token:<domain>:v1:<base64url JWK>`` holding an ed25519 private key. The key itself is
checked by PyJWT's ``PyJWK`` (kty, crv, base64url, that ``d`` belongs to ``x``); what is ours is
the secret's outer form and messages that name the setting and never carry its value.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

_HOST_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")


class CredentialError(ValueError):
    """A malformed client id or client secret; the message names the setting, not the value."""


@dataclass(frozen=True)
class ClientId:
    """The parts of a client id that matter: the whole id, the host (with port) and the aud."""

    value: str
    host: str
    audience: str

    @property
    def base_url(self) -> str:
        """Address of the tenant; the official clients always use https."""
        return f"https://{self.host}"


@dataclass(frozen=True)
class ClientSecret:
    """A parsed client secret. ``repr`` shows nothing secret."""

    value: str = field(repr=False)
    private_key: Ed25519PrivateKey = field(repr=False)

    def __repr__(self) -> str:
        return "ClientSecret(<redacted>)"


def parse_client_id(client_id: str) -> ClientId:
    """Split ``<random-id>@<hostname>/<use-case>``; host lowercased, ``aud`` without port."""
    if not isinstance(client_id, str) or not client_id.strip():
        raise CredentialError("client_id: is empty")
    if "@" not in client_id:
        raise CredentialError(
            "client_id: has no '@' (expected <random-id>@<hostname>/<use-case> "
            "as shown in the service's API settings)"
        )
    random_id, _, rest = client_id.partition("@")
    if not random_id:
        raise CredentialError("client_id: the part before '@' is empty")
    if "/" not in rest:
        raise CredentialError("client_id: has no '/<use-case>' after the hostname")
    host = rest.split("/", 1)[0].lower()
    if not host:
        raise CredentialError("client_id: the hostname between '@' and '/' is empty")
    hostname, sep, port = host.partition(":")
    if sep and (not port.isdigit() or not 0 < int(port) < 65536):
        raise CredentialError("client_id: the hostname has an invalid port")
    if not _HOST_RE.match(hostname):
        raise CredentialError(
            "client_id: the hostname between '@' and '/' is not a valid host name"
        )
    return ClientId(value=client_id, host=host, audience=hostname)


def parse_client_secret(secret: str) -> ClientSecret:
    """Parse ``secret-token:<domain>:v1:<base64url JWK>`` into an ed25519 private key."""
    if not isinstance(secret, str) or not secret:
        raise CredentialError("client_secret: is empty")
    parts = secret.split(":")
    if len(parts) != 4:
        raise CredentialError(
            f"client_secret: expected 4 ':'-separated parts "
            f"(secret-token:<domain>:v1:<key>), found {len(parts)}"
        )
    prefix, domain, version, encoded = parts
    if prefix != "secret-token":
        raise CredentialError("client_secret: does not start with 'secret-token:'")
    if not domain:
        raise CredentialError("client_secret: the domain part is empty")
    if version != "v1":
        raise CredentialError("client_secret: unsupported version marker (expected 'v1')")
    # The service writes base64url without padding; Python's decoder wants it, and would
    # silently skip characters outside the alphabet, so check the alphabet first.
    if not _B64URL_RE.fullmatch(encoded):
        raise CredentialError("client_secret: the key part is not base64url")
    try:
        jwk = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except (ValueError, binascii.Error):
        raise CredentialError("client_secret: the key part is not base64url-encoded JSON") from None
    if not isinstance(jwk, dict):
        raise CredentialError("client_secret: the key part is not a JSON Web Key object")
    if "d" not in jwk:
        raise CredentialError("client_secret: the key has no private part ('d'): a public key?")
    try:
        # PyJWT's own messages may quote the whole JWK (the secret): never pass them on.
        key = jwt.PyJWK(jwk, algorithm="EdDSA").key
    except (jwt.PyJWTError, ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise CredentialError(
            "client_secret: the key is not a valid Ed25519 private key (expected a JWK with "
            "kty 'OKP', crv 'Ed25519' and base64url 'x' and 'd' of one key pair)"
        )
    return ClientSecret(value=secret, private_key=key)
