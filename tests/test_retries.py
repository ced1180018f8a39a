"""The retry policy's parts on known values (tap_accessgov/retries.py): how long each wait is,
when the service's Retry-After wins, how a failed call and the service's error read, and the
token call's retry settings. The behaviour of whole runs under faults is in
tests/test_reliability.py; these pin the numbers and the words."""

from __future__ import annotations

import json

import pytest
import requests
from singer_sdk.exceptions import FatalAPIError, RetriableAPIError

from tap_accessgov.retries import (
    BACKOFF_CAP,
    FIRST_WAIT,
    RETRY_AFTER_CAP,
    RETRY_STATUSES,
    TOKEN_MAX_TRIES,
    RetryWait,
    gave_up,
    retry_wait,
    retry_warning,
    service_message,
    token_retry,
    what_failed,
    where,
)


def response(status: int, body: str = "", reason: str = "", **headers: str) -> requests.Response:
    answer = requests.Response()
    answer.status_code = status
    answer._content = body.encode()
    answer.reason = reason
    answer.headers.update(headers)
    answer.request = request()
    return answer


def request(path: str = "/api/v1/grants/feed?page_token=abc") -> requests.PreparedRequest:
    return requests.Request("POST", f"https://tenant.example{path}").prepare()


def failed(status: int, **headers: str) -> RetriableAPIError:
    return RetriableAPIError(f"answered {status}", response(status, **headers))


@pytest.mark.parametrize(
    ("body", "reason", "read"),
    [
        (json.dumps({"code": 3, "message": "invalid  page\ntoken"}), "Bad", "invalid page token"),
        (json.dumps({"code": 3, "message": 7}), "", '{"code": 3, "message": 7}'),
        (json.dumps(["message"]), "", '["message"]'),
        ("upstream\tconnect  error", "Bad Gateway", "upstream connect error"),
        ("", "Service Unavailable", "Service Unavailable"),
        ("", "", "(empty body)"),
        ("   ", "", "(empty body)"),
        ("x" * 300, "", "x" * 300),
        ("x" * 301, "", "x" * 300 + "..."),
    ],
)
def test_the_services_error_reads_as_its_message_or_its_body(
    body: str, reason: str, read: str
) -> None:
    assert service_message(response(400, body, reason)) == read


def test_a_call_is_named_by_method_and_path_without_its_query() -> None:
    assert where(request()) == "POST /api/v1/grants/feed"
    assert where(request("/api/v1/apps")) == "POST /api/v1/apps"
    assert where(request("/api/v1/apps?page_token=a?b")) == "POST /api/v1/apps"


class Unanswered(Exception):
    """An error whose ``response`` is not an HTTP answer (as some libraries' errors carry)."""

    response = "not an answer"


@pytest.mark.parametrize(
    "error", [ConnectionResetError("reset by peer"), Unanswered(), RetriableAPIError("x")]
)
def test_an_error_without_an_answer_waits_as_a_dropped_connection(error: Exception) -> None:
    assert retry_wait(error, 2) == RetryWait(2 * FIRST_WAIT, asked=False)


def test_a_failed_attempt_reads_as_the_services_answer_or_the_connections_failure() -> None:
    assert what_failed(request(), failed(503)) == "answered 503"
    dropped = requests.exceptions.ConnectionError("reset")
    assert what_failed(request(), dropped) == "POST /api/v1/grants/feed failed: ConnectionError"
    fatal = FatalAPIError("answered 403")
    assert what_failed(request(), fatal) == "POST /api/v1/grants/feed failed: FatalAPIError"


@pytest.mark.parametrize(
    ("attempt", "seconds"),
    [(1, FIRST_WAIT), (2, 2 * FIRST_WAIT), (3, 4 * FIRST_WAIT), (5, 16 * FIRST_WAIT), (6, 30.0)],
)
def test_waits_double_from_the_first_up_to_the_cap(attempt: int, seconds: float) -> None:
    assert (FIRST_WAIT, BACKOFF_CAP) == (1.0, 30.0)
    assert retry_wait(failed(503), attempt) == RetryWait(seconds, asked=False)
    dropped = requests.exceptions.ConnectionError("reset")
    assert retry_wait(dropped, attempt) == RetryWait(seconds, asked=False)


def test_the_services_retry_after_wins_and_a_401_is_retried_at_once() -> None:
    assert retry_wait(failed(429, **{"Retry-After": "7"}), 5) == RetryWait(7.0, asked=True)
    assert retry_wait(failed(503, **{"Retry-After": "0"}), 3) == RetryWait(0.0, asked=True)
    capped = retry_wait(failed(429, **{"Retry-After": "3600"}), 1)
    assert capped == RetryWait(RETRY_AFTER_CAP, asked=True) == RetryWait(60.0, asked=True)
    assert retry_wait(failed(401, **{"Retry-After": "7"}), 4) == RetryWait(0.0, asked=False)
    assert retry_wait(failed(503, **{"Retry-After": "soon"}), 2) == RetryWait(2.0, asked=False)


def test_a_retry_and_a_give_up_read_in_one_line() -> None:
    asked = retry_warning(request(), failed(429), 7.04, 1, 6, asked=True)
    assert asked == "answered 429; retrying in 7.0 s as its Retry-After asks (attempt 1 of 6)"
    backed_off = retry_warning(request(), failed(503), 2.0, 2, 6, asked=False)
    assert backed_off == "answered 503; retrying in 2.0 s (attempt 2 of 6)"
    assert gave_up(request(), failed(503), 6) == "answered 503 (gave up after 6 attempts)"


def test_the_token_call_retries_what_the_api_calls_retry_as_long() -> None:
    retry = token_retry()
    assert {429, *range(500, 600)} == RETRY_STATUSES
    assert retry.total == TOKEN_MAX_TRIES - 1 == 4
    assert retry.status_forcelist == RETRY_STATUSES
    assert retry.allowed_methods == {"POST"}
    assert retry.raise_on_status is False
    assert (retry.backoff_factor, retry.backoff_max) == (0.5, BACKOFF_CAP)
    assert retry.get_retry_after(response(429, **{"Retry-After": "3600"})) == RETRY_AFTER_CAP
    assert retry.get_retry_after(response(429, **{"Retry-After": "12"})) == 12.0
    assert retry.get_retry_after(response(429)) is None
