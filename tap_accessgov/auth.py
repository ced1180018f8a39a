"""The OAuth 2.0 client-credentials authenticator, one per run (credentials.py parses the id
and secret it uses).

Tokens come from
``POST /auth/v1/token`` either with a signed client assertion (RFC 7523 section 2.2, EdDSA) or
with the plain secret. The SDK's ``OAuthJWTAuthenticator`` is RS256 with the jwt-bearer *grant*,
so we build on ``OAuthAuthenticator`` and add what it lacks: a refresh margin, one shared token
across threads, retries of the token call, and errors that never carry the secret.
"""

from __future__ import annotations

import datetime
import logging
import secrets
import threading
import time
import typing as t

import jwt
import requests
from requests.adapters import HTTPAdapter
from singer_sdk.authenticators import OAuthAuthenticator
from typing_extensions import override

from tap_accessgov.credentials import ClientId, ClientSecret
from tap_accessgov.retries import service_message, token_retry

CLIENT_ASSERTION = "client_assertion"
CLIENT_SECRET = "client_secret"
AUTH_METHODS = (CLIENT_ASSERTION, CLIENT_SECRET)
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_LIFETIME = 120  # seconds either side of now, as the vendor's own clients do
TOKEN_REQUEST_TIMEOUT = 60


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
