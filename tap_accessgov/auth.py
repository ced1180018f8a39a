"""Login: the client id and client secret the service issues, parsed and checked before any
request, and the OAuth 2.0 client-credentials authenticator that uses them (one per run).

Client id: ``<random-id>@<hostname>/<use-case>``; the hostname names the tenant. Client secret:
``secret-token:<domain>:v1:<base64url JWK>`` holding an ed25519 private key. The key itself is
checked by PyJWT's ``PyJWK`` (kty, crv, base64url, that ``d`` belongs to ``x``); what is ours is
the secret's outer form and messages that name the setting and never carry its value.

Tokens come from ``POST /auth/v1/token`` either with a signed client assertion (RFC 7523
section 2.2, EdDSA) or with the plain secret. The SDK's ``OAuthJWTAuthenticator`` is RS256 with
the jwt-bearer *grant*, so we build on ``OAuthAuthenticator`` and add what it lacks: a refresh
margin, one shared token across threads, retries of the token call (retries.py), and errors
that never carry the secret.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import logging
import re
import secrets
import threading
import time
import typing as t
from dataclasses import dataclass, field

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from requests.adapters import HTTPAdapter
from singer_sdk.authenticators import OAuthAuthenticator
from typing_extensions import override

from tap_accessgov import USER_AGENT
from tap_accessgov.retries import service_message, token_retry

CLIENT_ASSERTION = "client_assertion"
CLIENT_SECRET = "client_secret"
AUTH_METHODS = (CLIENT_ASSERTION, CLIENT_SECRET)
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_LIFETIME = 120  # seconds either side of now, as the vendor's own clients do
TOKEN_REQUEST_TIMEOUT = 60

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


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class AuthenticationError(RuntimeError):
    """The token endpoint refused or could not issue a token."""


class AccessGovAuthenticator(OAuthAuthenticator):
    """Client-credentials authenticator shared by every stream of a run (one token).

    * ``oauth_request_body`` signs a fresh assertion for every token request.
    * ``is_token_valid`` renews *before* expiry: when less than 10% of the lifetime (at least
      30 s, at most half the lifetime) remains, because the official SDK's never-refreshed
      token is what breaks long extractions.
    * ``renew_after_unauthorized`` lets a stream retry once after a 401 with a new token.
    """

    def __init__(
        self,
        *,
        client_id: ClientId,
        client_secret: ClientSecret,
        auth_method: str,
        token_url: str,
    ) -> None:
        super().__init__(auth_endpoint=token_url, client_id=client_id.value)
        self._parsed_client_id = client_id
        self._secret = client_secret
        self._auth_method = auth_method
        self._lock = threading.RLock()
        self._renewed_after_401 = False
        self._failed: str | None = None  # why no token could be had, once that happened
        self.logger = logging.getLogger("tap-accessgov.auth")
        # Our own session for the token call: the SDK's retries only https and is private.
        self.token_session = requests.Session()
        self.token_session.headers["User-Agent"] = USER_AGENT
        for scheme in ("https://", "http://"):
            self.token_session.mount(scheme, HTTPAdapter(max_retries=token_retry()))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(client_id={self._parsed_client_id.value!r}, "
            f"auth_method={self._auth_method!r})"
        )

    def client_assertion(self) -> str:
        """A short-lived EdDSA JWT: iss = sub = client id, aud = host without port."""
        now = int(time.time())
        claims = {
            "iss": self._parsed_client_id.value,
            "sub": self._parsed_client_id.value,
            "aud": self._parsed_client_id.audience,
            "iat": now,
            "nbf": now - ASSERTION_LIFETIME,
            "exp": now + ASSERTION_LIFETIME,
            "nonce": secrets.token_hex(16),
        }
        return jwt.encode(claims, self._secret.private_key, algorithm="EdDSA")

    @property
    @override
    def oauth_request_body(self) -> dict[str, str]:
        body = {"grant_type": "client_credentials", "client_id": self._parsed_client_id.value}
        if self._auth_method == CLIENT_SECRET:
            body["client_secret"] = self._secret.value
        else:
            body["client_assertion_type"] = ASSERTION_TYPE
            body["client_assertion"] = self.client_assertion()
        return body

    @override
    def is_token_valid(self) -> bool:
        if not self.access_token or self.last_refreshed is None:
            return False
        if not self.expires_in:
            return True
        margin = min(max(30.0, self.expires_in * 0.1), self.expires_in / 2)
        age = (_utc_now() - self.last_refreshed).total_seconds()
        return age < self.expires_in - margin

    @override
    def authenticate_request(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        with self._lock:
            return super().authenticate_request(request)

    @override
    def update_access_token(self) -> None:
        """Fetch a token; 429/5xx/connection errors are retried by the session's urllib3 policy."""
        if self._failed is not None:
            self._fail(self._failed)
        who = f"client_id {self._parsed_client_id.value}"
        self.logger.info("Requesting a new access token (%s)", self._auth_method)
        requested_at = _utc_now()
        try:
            response = self.token_session.post(
                self.auth_endpoint,
                data=self.oauth_request_body,
                timeout=TOKEN_REQUEST_TIMEOUT,
            )
        except requests.RequestException as exc:
            self._fail(
                f"Authentication failed for {who}: could not reach the token endpoint "
                f"{self.auth_endpoint} ({type(exc).__name__})"
            )
        if response.status_code != 200:
            self._fail(
                f"Authentication failed for {who}: the token endpoint {self.auth_endpoint} "
                f"answered {response.status_code}: {service_message(response)}"
            )
        try:
            body = response.json()
            token = body.get("access_token") if isinstance(body, dict) else None
        except ValueError:
            token = None
        if not token or not isinstance(token, str):
            self._fail(
                f"Authentication failed for {who}: the token endpoint returned no access_token"
            )
        expires_in = body.get("expires_in")
        self.access_token = token
        self.expires_in = int(expires_in) if expires_in else None
        self.last_refreshed = requested_at
        self._renewed_after_401 = False
        self.logger.info("Access token obtained; it expires in %s s", self.expires_in)

    def _fail(self, msg: str) -> t.NoReturn:
        """No token (refused, or unreachable after retries): the run is failing, so no other
        thread asks again; each would wait out its own retries before the run can end."""
        self._failed = msg
        raise AuthenticationError(msg) from None

    def renew_after_unauthorized(self, refused_token: str | None) -> bool:
        """Called when the API answered 401; True if the request may be retried.

        Another thread may already have renewed the token (then just retry). A token that was
        itself fetched because of a 401 and is refused again means the credential is not
        accepted for this call: no more retries.
        """
        with self._lock:
            if refused_token != self.access_token:
                return True
            if self._renewed_after_401:
                return False
            self.update_access_token()
            self._renewed_after_401 = True
            return True

    def confirm_token(self) -> None:
        """A request succeeded with the current token: a later 401 may be retried again."""
        self._renewed_after_401 = False
