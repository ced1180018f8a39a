"""The base stream: address, shared authenticator, paging, retry policy and page parsing.

Every endpoint of the service pages the same way (``nextPageToken`` until it is empty or
absent) and answers protobuf-JSON, so all of that lives here; ``streams.py`` only says what
differs per endpoint.
"""

from __future__ import annotations

import json
import logging
import time
import typing as t
import weakref

import backoff
import requests
from singer_sdk import metrics
from singer_sdk.exceptions import FatalAPIError, RetriableAPIError
from singer_sdk.pagination import BaseAPIPaginator
from singer_sdk.streams import RESTStream, Stream
from typing_extensions import override

from tap_accessgov.errors import (
    RETRIED_ERRORS,
    exponential_waits,
    retry_after_seconds,
    service_message,
)

if t.TYPE_CHECKING:
    from types import TracebackType

    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.auth import AccessGovAuthenticator

# Parsed bodies, keyed by response, so that validation, records and paging read one parse.
_PAGES: weakref.WeakKeyDictionary[requests.Response, dict[str, t.Any]] = weakref.WeakKeyDictionary()


class MalformedPageError(RetriableAPIError):
    """A 200 whose body is not a JSON object (truncated or garbled): worth another try."""


def page_body(response: requests.Response) -> dict[str, t.Any]:
    """The JSON object of a page, parsed once per response."""
    body = _PAGES.get(response)
    if body is None:
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            msg = f"{_where(response)} answered 200 with a body that is not a JSON object"
            raise MalformedPageError(msg, response)
        _PAGES[response] = body
    return body


def _where(response: requests.Response) -> str:
    request = response.request
    path = request.path_url.split("?", 1)[0] if request.path_url else "?"
    return f"{request.method} {path}"


def _failed(request: requests.PreparedRequest, exc: BaseException | None) -> str:
    path = (request.path_url or "").split("?", 1)[0]
    return f"{request.method} {path} failed: {type(exc).__name__}"


class RepeatedPageTokenError(FatalAPIError):
    """The service answered a page token it had already returned: following it would loop."""


class NextPageTokenPaginator(BaseAPIPaginator[str | None]):
    """Follows ``nextPageToken`` until it is empty or missing.

    Unlike the SDK's JSONPathPaginator it reads the already-parsed page, keeps going over an
    empty page that still carries a token, and refuses a token it has seen before anywhere in
    the traversal (not only the previous one), so a cycling server cannot loop us forever.
    """

    def __init__(self) -> None:
        super().__init__(None)
        self._seen: set[str] = set()

    @override
    def get_next(self, response: requests.Response) -> str | None:
        token = page_body(response).get("nextPageToken") or None
        if token is not None:
            if token in self._seen:
                msg = (
                    f"{_where(response)} returned a page token it had already returned; "
                    "stopping instead of looping forever"
                )
                raise RepeatedPageTokenError(msg)
            self._seen.add(token)
        return t.cast("str | None", token)

    @override
    def continue_if_empty(self, response: requests.Response) -> bool:
        return bool(page_body(response).get("nextPageToken"))


class DryRunLimit:
    """``--test`` syncs each stream with the SDK's ``ABORT_AT_RECORD_COUNT`` (1) set, and the SDK
    stops a stream that reaches it by raising, which it logs as "An unhandled error occurred"
    at ERROR although the test passed. A stream that ends by itself at the limit never
    reaches that abort."""

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._emitted = 0

    def apply(self, records: t.Iterable[dict[str, t.Any]]) -> t.Iterator[dict[str, t.Any]]:
        limit = self._stream.ABORT_AT_RECORD_COUNT
        if limit is None:
            yield from records
            return
        iterator = iter(records)
        try:
            while self._emitted < limit:
                try:
                    record = next(iterator)
                except StopIteration:
                    return
                self._emitted += 1
                yield record
        finally:
            if isinstance(iterator, t.Generator):
                iterator.close()


class ProgressCounter(metrics.Counter):
    """The SDK's record counter, plus a plain progress line with the stream's running total.

    The SDK's METRIC line counts only the records since its previous line and Meltano's
    console drops its stream tag; on a long run a data engineer wants "how far" in words.
    """

    def __init__(
        self, stream: str, logger: logging.Logger, log_interval: float, endpoint: str | None
    ) -> None:
        tags: dict[str, t.Any] = {metrics.Tag.STREAM: stream}
        if endpoint:
            tags[metrics.Tag.ENDPOINT] = endpoint
        super().__init__(metrics.Metric.RECORD_COUNT, tags, log_interval=log_interval)
        self.stream = stream
        self.progress_logger = logger
        self.total = 0
        self._started = self._last_progress = time.monotonic()

    @override
    def increment(self, value: int = 1) -> None:
        super().increment(value)
        self.total += value
        now = time.monotonic()
        if now - self._last_progress >= self.log_interval:
            self._last_progress = now
            self.progress_logger.info(
                "%s: %s records so far (%.0f s)",
                self.stream,
                f"{self.total:,}",
                now - self._started,
            )

    @override
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        super().__exit__(exc_type, exc_val, exc_tb)
        if exc_type is None:
            self.progress_logger.info(
                "%s: %s records in %.1f s",
                self.stream,
                f"{self.total:,}",
                time.monotonic() - self._started,
            )


class ApiConnection(t.Protocol):
    """What every stream needs from the tap: where the API is, and the run's one authenticator
    (both built lazily: discovery must work before the client id is valid)."""

    @property
    def api_url(self) -> str: ...

    @property
    def authenticator(self) -> AccessGovAuthenticator: ...


class AccessGovStream(RESTStream[str | None]):
    """Base stream for the service's API.

    Per-record costs left in a profile of a 50k-event grant_feed sync are the SDK's (0.54.9),
    with no public hook to avoid them, so they stay rather than be patched: the pruning of
    deselected properties (~9%: `pop_deselected_record_properties` walks every record, nested
    `feed` included, even when every property is selected) and the state bookkeeping of each
    record (~8%: `Stream._increment_stream_state`).
    """

    def __init__(self, tap: Tap, *, connection: ApiConnection) -> None:
        super().__init__(tap)
        self.connection = connection
        # The SDK sends prepared requests, which skips requests' environment settings: trust
        # the CA bundle a user names (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE) as the token call
        # does. Verification itself is never turned off. No URL: `verify` does not depend on
        # it (only proxies do, and send() resolves those), and discovery must work before
        # the client id is valid.
        session = self.requests_session
        session.verify = session.merge_environment_settings("", {}, None, None, None)["verify"]
        self.dry_run_limit = DryRunLimit(self)

    @override
    def get_records(self, context: Context | None) -> t.Iterable[dict[str, t.Any]]:
        return self.dry_run_limit.apply(super().get_records(context))

    @property
    @override
    def url_base(self) -> str:
        return self.connection.api_url

    @property
    @override
    def authenticator(self) -> AccessGovAuthenticator:
        return self.connection.authenticator

    @property
    @override
    def http_headers(self) -> dict[str, str]:
        return {"Accept": "application/json"}

    @property
    def page_size(self) -> int:
        """Results per page, from the ``page_size`` setting (10-100)."""
        return int(self.config["page_size"])

    @property
    @override
    def timeout(self) -> int:
        return int(self.config["request_timeout"])

    @override
    def backoff_max_tries(self) -> int:
        return int(self.config["max_retries"]) + 1

    def pin_proxies(self) -> None:
        """Resolve the proxy for the one API host once, instead of on every request.

        requests re-reads the proxy environment (HTTPS_PROXY, NO_PROXY ...) and ~/.netrc on
        every send of a session that trusts the environment: ~8% of a grant_feed sync in a
        profile. Every call of a run goes to the same host, so the environment's answer for
        it is pinned on the session and the session stops asking. The CA bundle was pinned
        in __init__; the Authorization header comes from the authenticator, never ~/.netrc.
        Called when a sync starts (api_url is valid then; discovery must not need it).
        """
        session = self.requests_session
        if session.trust_env:
            settings = session.merge_environment_settings(self.url_base, {}, None, None, None)
            session.proxies.update(settings["proxies"])
            session.trust_env = False

    @override
    def request_decorator(self, func: t.Callable[..., t.Any]) -> t.Callable[..., t.Any]:
        """The SDK's retry policy through its hooks (backoff_wait_generator, backoff_max_tries,
        backoff_jitter, backoff_handler), then one clear fatal error naming the call and what
        failed last.

        Built here rather than by the SDK's own decorator, which also hands backoff the
        stream's logger: backoff then logs every retry a second time and the give-up at
        ERROR, next to the SDK handler's ERROR line with a Python repr of the call.
        """
        self.pin_proxies()
        retried = backoff.on_exception(
            self.backoff_wait_generator,
            RETRIED_ERRORS,
            max_tries=self.backoff_max_tries,
            on_backoff=self.backoff_handler,
            jitter=self.backoff_jitter,
            logger=None,
        )(func)
        tries = self.backoff_max_tries()

        def request(prepared_request: requests.PreparedRequest, context: t.Any) -> t.Any:
            try:
                return retried(prepared_request, context)
            except RetriableAPIError as exc:
                msg = f"{exc} (gave up after {tries} attempts)"
                raise FatalAPIError(msg) from exc
            except RETRIED_ERRORS as exc:
                msg = f"{_failed(prepared_request, exc)} (gave up after {tries} attempts)"
                raise FatalAPIError(msg) from exc

        return request

    @override
    def backoff_handler(self, details: t.Any) -> None:
        """One WARNING per retry: the call, what failed, the wait and which attempt it was."""
        exc = details.get("exception")
        prepared: requests.PreparedRequest = details["args"][0]
        response: requests.Response | None = getattr(exc, "response", None)
        what = str(exc) if isinstance(exc, RetriableAPIError) else _failed(prepared, exc)
        asked = (
            response is not None
            and response.status_code != 401
            and retry_after_seconds(response) is not None
        )
        why = " as its Retry-After asks" if asked else ""
        self.logger.warning(
            "%s; retrying in %.1f s%s (attempt %d of %d)",
            what,
            details["wait"],
            why,
            details["tries"],
            self.backoff_max_tries(),
        )

    @override
    def get_record_counter(
        self, *, endpoint: str | None = None, log_interval: float = metrics.DEFAULT_LOG_INTERVAL
    ) -> metrics.Counter:
        return ProgressCounter(self.name, self.logger, log_interval, endpoint)

    @override
    def get_new_paginator(self) -> NextPageTokenPaginator:
        return NextPageTokenPaginator()

    @override
    def generate_child_contexts(
        self, record: dict[str, t.Any], context: Context | None
    ) -> t.Iterable[Context | None]:
        """No contexts for a stream without child streams (grant_feed).

        The SDK's default yields the record itself as a context, which the SDK (0.54) then
        copies and hands to an empty loop over child streams: a dict copy and two generator
        steps per record for nothing (~10% of a grant_feed sync in a profile).
        """
        if not self.child_streams:
            return ()
        return super().generate_child_contexts(record, context)

    @override
    def validate_response(self, response: requests.Response) -> None:
        """SDK policy (5xx and 429 retried, other 4xx fatal), plus the service's specifics.

        A 401 means the token was revoked or expired early: renew it once and retry. A 200
        whose body does not parse is retried like a dropped connection.
        """
        if response.status_code == 401:
            refused = response.request.headers.get("Authorization", "").removeprefix("Bearer ")
            if self.authenticator.renew_after_unauthorized(refused):
                msg = f"{_where(response)} answered 401; retrying once with a new access token"
                raise RetriableAPIError(msg, response)
            msg = (
                f"{_where(response)} answered 401 to a newly issued access token: "
                f"{service_message(response)}. Check that the API credential is still valid "
                "and that its scope and allowed IPs permit this call."
            )
            raise FatalAPIError(msg)
        super().validate_response(response)
        page_body(response)
        self.authenticator.confirm_token()

    @override
    def response_error_message(self, response: requests.Response) -> str:
        return f"{_where(response)} answered {response.status_code}: {service_message(response)}"

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[dict[str, t.Any]]:
        """Entries of ``list``; a null or missing list is an empty page."""
        return page_body(response).get("list") or []

    @override
    def backoff_wait_generator(self) -> t.Generator[float, t.Any, None]:
        """The SDK's exponential backoff, but the service's Retry-After when it gives one, and
        no wait before retrying a 401 with a fresh token (the SDK ignores Retry-After, sdk#2012)."""
        exponential = exponential_waits()

        def wait(exception: Exception) -> float:
            response: requests.Response | None = getattr(exception, "response", None)
            if response is not None and response.status_code == 401:
                return 0.0
            if (retry_after := retry_after_seconds(response)) is not None:
                return retry_after
            return next(exponential)

        return self.backoff_runtime(value=wait)
