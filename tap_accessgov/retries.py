"""The retry policy: which failures get another try, how long to wait before it, and how a
failed call reads in the messages.

One policy for both kinds of call. The API calls apply it through the SDK's backoff hooks
(engine/stream.py: ``backoff_wait_generator``, ``backoff_handler``, the give-up around
``request_decorator``); the token call through urllib3's Retry on the authenticator's session
(auth.py). The vendor's own clients retry the same statuses, honour Retry-After and cap their
waits around 30 s.

How a failure reads (``where``, ``service_message``) lives here too: the retry warnings and the
give-up errors are its main readers, and paging.py and auth.py need it without importing the
stream (engine/stream.py imports both).
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import typing as t

import backoff
import requests
import urllib3
from singer_sdk.exceptions import RetriableAPIError
from urllib3.exceptions import InvalidHeader

RETRY_STATUSES = frozenset({429, *range(500, 600)})
FIRST_WAIT = 1.0  # seconds: the first exponential wait; then 2, 4 ...
BACKOFF_CAP = 30.0  # seconds: exponential waits stop growing here
RETRY_AFTER_CAP = 60.0  # seconds: the longest Retry-After the tap honours as asked
TOKEN_MAX_TRIES = 5
# What an API call is retried on: the SDK's RESTStream.request_decorator list (singer-sdk 0.54),
# which its decorator re-raises once the tries are used up.
RETRIED_ERRORS = (
    ConnectionResetError,
    RetriableAPIError,
    requests.exceptions.Timeout,
    requests.exceptions.ConnectionError,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
)
_RETRY_AFTER = urllib3.Retry()  # only its parser is used


def where(request: requests.PreparedRequest) -> str:
    """``METHOD /path`` of a call, without its query: how every message names a call."""
    return f"{request.method} {request.path_url.partition('?')[0]}"


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


def what_failed(request: requests.PreparedRequest, exc: BaseException | None) -> str:
    """What a failed attempt reads as: the service's answer, or the connection's failure."""
    if isinstance(exc, RetriableAPIError):
        return str(exc)
    return f"{where(request)} failed: {type(exc).__name__}"


def retry_after_seconds(response: requests.Response | None) -> float | None:
    """Retry-After (seconds or an HTTP date) as seconds, capped; None if absent or unreadable."""
    if response is None or not (value := response.headers.get("Retry-After")):
        return None
    try:
        seconds = _RETRY_AFTER.parse_retry_after(value)
    except InvalidHeader:
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


def _response_of(exc: BaseException | None) -> requests.Response | None:
    response = getattr(exc, "response", None)
    return response if isinstance(response, requests.Response) else None


class RetryWait(t.NamedTuple):
    """How long to wait before the next attempt, and whether the service asked for it."""

    seconds: float
    asked: bool


def retry_wait(exc: BaseException | None, attempt: int) -> RetryWait:
    """The wait after failed attempt number ``attempt`` (1, 2 ...), before jitter.

    No wait after a 401 (the retry carries a new token), the service's Retry-After when it gives
    one (the SDK ignores it, sdk#2012), else FIRST_WAIT, twice that, four times ... up to
    BACKOFF_CAP, counted by attempt so that it needs no state between attempts.
    """
    response = _response_of(exc)
    if response is not None and response.status_code == 401:
        return RetryWait(0.0, asked=False)
    if (retry_after := retry_after_seconds(response)) is not None:
        return RetryWait(retry_after, asked=True)
    return RetryWait(min(FIRST_WAIT * 2.0 ** (attempt - 1), BACKOFF_CAP), asked=False)


def retry_warning(
    request: requests.PreparedRequest,
    exc: BaseException | None,
    wait: float,
    attempt: int,
    attempts: int,
    *,
    asked: bool,
) -> str:
    """The one line a retry logs: the call, what failed, the wait (``asked``: the service's
    Retry-After) and which attempt it was."""
    why = " as its Retry-After asks" if asked else ""
    return (
        f"{what_failed(request, exc)}; retrying in {wait:.1f} s{why} "
        f"(attempt {attempt} of {attempts})"
    )


def gave_up(request: requests.PreparedRequest, exc: BaseException, attempts: int) -> str:
    """The one error of a call whose retries are used up: what failed last, and how often."""
    return f"{what_failed(request, exc)} (gave up after {attempts} attempts)"


class BackoffLogFilter(logging.Filter):
    """Drops the lines the backoff library logs itself (each retry at INFO, the give-up at
    ERROR) on the logger the SDK hands it, the stream's: ``retry_warning`` and ``gave_up``
    say the same in the tap's words, once. Told apart by the file that logs them, not by
    their text."""

    _backoff = str(pathlib.Path(backoff.__file__).parent) + os.sep

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.pathname.startswith(self._backoff)


QUIET_BACKOFF = BackoffLogFilter()  # one instance: addFilter adds it to a logger only once


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
