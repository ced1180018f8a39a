"""POST /auth/v1/token and the access tokens it issues.

Both documented login methods are accepted; everything else about the request (grant type,
assertion type, repeated or missing fields, content type) is checked the way a strict OAuth
server would, so a client that only works against a lenient server fails here.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any
from urllib.parse import parse_qs

from emulator.credentials import ASSERTION_TYPE, Credential, verify_client_assertion
from emulator.errors import bad_request, unauthenticated

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
