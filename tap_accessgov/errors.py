"""How the service's failures read and which are worth another try: one policy for the API
calls (applied through the SDK's backoff hooks in client.py) and for the token call (urllib3's
Retry in auth.py), with urllib3's Retry-After parser for both."""

from __future__ import annotations

import json
import typing as t

import backoff
import requests
import urllib3
from singer_sdk.exceptions import RetriableAPIError
from urllib3.exceptions import InvalidHeader

# The vendor's own clients retry these, honour Retry-After and cap their waits around 30 s.
RETRY_STATUSES = frozenset({429, *range(500, 600)})
BACKOFF_CAP = 30.0  # seconds: exponential waits 1, 2, 4 ... stop growing here
RETRY_AFTER_CAP = 60.0  # seconds: the longest Retry-After the tap honours as asked
TOKEN_MAX_TRIES = 5
# What an API call is retried on: the SDK's RESTStream.request_decorator list (singer-sdk 0.54).
RETRIED_ERRORS = (
    ConnectionResetError,
    RetriableAPIError,
    requests.exceptions.Timeout,
    requests.exceptions.ConnectionError,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
)
_RETRY_AFTER = urllib3.Retry()  # only its parser is used


def retry_after_seconds(response: requests.Response | None) -> float | None:
    """Retry-After (seconds or an HTTP date) as seconds, capped; None if absent or unreadable."""
    if response is None or not (value := response.headers.get("Retry-After")):
        return None
    try:
        seconds = _RETRY_AFTER.parse_retry_after(value)
    except InvalidHeader:
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


def exponential_waits() -> t.Iterator[float]:
    """1, 2, 4 ... up to BACKOFF_CAP seconds, as backoff's own generator counts them."""
    waits = backoff.expo(base=2, factor=1, max_value=BACKOFF_CAP)
    next(waits)  # backoff generators first yield for their priming send()
    return waits


class _CappedRetry(urllib3.Retry):
    """urllib3's retry, honouring Retry-After only up to RETRY_AFTER_CAP."""

    def get_retry_after(self, response: t.Any) -> float | None:
        retry_after = super().get_retry_after(response)
        return None if retry_after is None else min(retry_after, RETRY_AFTER_CAP)


def token_retry() -> urllib3.Retry:
    """The token call's retries: the same statuses, Retry-After parser and caps as the API's."""
    return _CappedRetry(
        total=TOKEN_MAX_TRIES - 1,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=frozenset({"POST"}),
        backoff_factor=0.5,
        backoff_max=BACKOFF_CAP,
        raise_on_status=False,
    )


def service_message(response: requests.Response, limit: int = 300) -> str:
    """The service's error text: the JSON ``message`` when there is one, else the raw body."""
    text = response.text or response.reason or ""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        text = body["message"]
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "") if text else "(empty body)"
