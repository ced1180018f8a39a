"""The base streams: what every stream of the tap shares (``TapStream``: progress lines,
snapshots, records made to fit their schema, ``--test``'s one-record limit around the
stream's ``records``, worker threads that end with the sync that started them), and what every
endpoint of the service shares (``AccessGovStream``: address, shared authenticator, the
request path, each attempt inside the run's request budget, retried through the SDK's backoff
hooks, answering a parsed page, the service's error answers, and the worker threads of a sync).

The retry policy itself is retries.py, what a page is and how it pages paging.py, partitions
fetched ahead partitions.py; each stream's module only says what differs for its endpoint,
and its class in ``STREAM_TYPES`` (``__init__.py``) makes it one of the tap's streams.
"""

from __future__ import annotations

import logging
import threading
import time
import typing as t
from functools import cached_property

import requests
from singer_sdk.exceptions import FatalAPIError, RetriableAPIError
from singer_sdk.helpers.conform import TypeConformanceLevel
from singer_sdk.singerlib import RecordMessage
from singer_sdk.streams import RESTStream, Stream
from typing_extensions import override

from tap_accessgov import USER_AGENT
from tap_accessgov.conformance import RecordConformance
from tap_accessgov.engine.batch_files import BatchFilesStream
from tap_accessgov.engine.concurrency import Workers
from tap_accessgov.engine.snapshots import SnapshotStream
from tap_accessgov.interrupt import InterruptibleAdapter, interruptible
from tap_accessgov.output import OutputClosedError, OutputWriter, record_messages
from tap_accessgov.paging import NextPageTokenPaginator, Page, page_body
from tap_accessgov.progress import ProgressReportingStream
from tap_accessgov.request_budget import RequestBudget, SyncStopped
from tap_accessgov.retries import (
    QUIET_BACKOFF,
    RETRIED_ERRORS,
    gave_up,
    retry_after_seconds,
    retry_wait,
    retry_warning,
    service_message,
    where,
)

if t.TYPE_CHECKING:
    from backoff.types import Details
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context, RequestFunc

    from tap_accessgov.auth import AccessGovAuthenticator
    from tap_accessgov.engine.concurrency import Concurrency

Record = dict[str, t.Any]


class StateWriting(t.Protocol):
    """The tap's ``state_writer`` (public in singer-sdk 0.54; its class lives in a private
    module, so only its one method is named here)."""

    def write_state(self, state: t.Any) -> None: ...


class ApiConnection(t.Protocol):
    """What every stream needs from the tap: where the API is, and the run's one authenticator
    (both built lazily: discovery must work before the client id is valid)."""

    @property
    def api_url(self) -> str: ...

    @property
    def authenticator(self) -> AccessGovAuthenticator: ...

    @property
    def request_budget(self) -> RequestBudget: ...

    @property
    def concurrency(self) -> Concurrency: ...

    @property
    def state_writer(self) -> StateWriting: ...


class Stopping(threading.Event):
    """Set while a stream's sync is stopping (concurrency.Workers sets it when it closes): every
    wait on it ends (the request budget's, a retry's: request_budget.py), and every call the
    stream's session has in flight is hung up (interrupt.py), so its worker threads end at
    once instead of waiting up to ``request_timeout`` for an answer."""

    def __init__(self, calls: InterruptibleAdapter) -> None:
        super().__init__()
        self._calls = calls

    @override
    def set(self) -> None:
        super().set()
        self._calls.hang_up()

    @override
    def clear(self) -> None:
        self._calls.resume()
        super().clear()


class DryRunLimit:
    """``--test`` syncs each stream with the SDK's ``ABORT_AT_RECORD_COUNT`` (1) set, and the SDK
    stops a stream that reaches it by raising, which it logs as "An unhandled error occurred"
    at ERROR although the test passed. A stream that ends by itself at the limit never
    reaches that abort."""

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._emitted = 0
        # Whether the limit ended the stream (a stream with exactly as many records as the
        # limit counts too: whether more would have come is not asked).
        self.cut_short = False

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
            self.cut_short = True
        finally:
            if isinstance(iterator, t.Generator):
                iterator.close()


class Discovered:
    """The streams built so far in a discovery, by class: how a stream is handed the streams
    it reads (``TapStream.reads``) when ``STREAM_TYPES`` is built in its order."""

    def __init__(self) -> None:
        self._streams: dict[type[TapStream], TapStream] = {}

    def add(self, stream: TapStream) -> None:
        self._streams[type(stream)] = stream

    def read_by(self, stream_type: type[TapStream]) -> dict[str, TapStream]:
        """The streams ``stream_type`` reads, by its constructor's keywords."""
        return {keyword: self._streams[read] for keyword, read in stream_type.reads.items()}

    def all(self) -> list[TapStream]:
        return list(self._streams.values())


class TapStream(ProgressReportingStream, SnapshotStream, BatchFilesStream):
    """What every stream of the tap shares apart from its HTTP (``AccessGovStream``, every
    stream's base, adds that): progress lines, full-table snapshots, ``--test``'s one-record
    limit around ``records``, records that always fit their SCHEMA, worker threads that end
    with the sync that started them, and the records it wrote out of the writer's chunk when
    its sync ends (output.py).

    A stream says what it reads in ``records``, and which streams it reads records of in
    ``reads`` (its constructor's keyword -> their class, listed before it in STREAM_TYPES)."""

    reads: t.ClassVar[t.Mapping[str, type[TapStream]]] = {}
    # Every record is decoded JSON (or strings the tap builds) and made to fit its schema
    # in post_process (conformance.py). The SDK's own pass turns Python-only values (dates,
    # decimals, bytes) into JSON ones, of which a record here holds none, and walked every
    # nested value of every record again: a fifth of a full sync's CPU in a profile, most of
    # it the system log's events (docs/performance.md).
    TYPE_CONFORMANCE_LEVEL = TypeConformanceLevel.NONE

    def __init__(self, tap: Tap) -> None:
        super().__init__(tap)
        self.output = tap.message_writer
        self._warned: set[str] = set()  # the warnings given this run (warn_once)

    @override
    def _generate_record_messages(self, record: Record) -> t.Generator[RecordMessage, None, None]:
        """The SDK's RECORD messages of ``record``, without its selection pass where the
        catalog selects every property (output.record_messages): the pass copies and walks
        every record, nested objects included, to remove nothing (in a profile, about a
        tenth of an in-process sync's CPU; docs/performance.md). Where a property is
        deselected, the SDK's own.

        A private of the SDK (0.54, 0.55): it has no public hook between ``post_process``
        and the message, and this is the one place the tap overrides it (the fourth bend
        listed in tap.py). tests/test_output.py compares both paths' messages for every
        stream."""
        if not self.selects_every_property:
            return super()._generate_record_messages(record)
        return record_messages(self, record)

    def warn_once(self, message: str) -> None:
        """Log ``message`` at WARNING the first time this run, not again: a record the
        stream cannot read comes in thousands where the service changed a shape. The
        message names the kind of problem, never a value of the record."""
        if message not in self._warned:
            self._warned.add(message)
            self.logger.warning("%s (further ones this run are not reported)", message)

    @override
    def get_records(self, context: Context | None) -> t.Iterable[Record]:
        """The stream's ``records``, ended at ``--test``'s one-record limit (DryRunLimit)."""
        return self.dry_run_limit.apply(self.records(context))

    def records(self, context: Context | None) -> t.Iterable[Record]:
        """Every record of the stream (of the partition ``context``): what each stream says."""
        raise NotImplementedError

    @cached_property
    def conformance(self) -> RecordConformance:
        """This stream's records made to fit its schema (the catalog's, once applied)."""
        return RecordConformance(self.schema, self.logger, self.name)

    @override
    def post_process(
        self, row: dict[str, t.Any], context: Context | None = None
    ) -> dict[str, t.Any] | None:
        """The SDK's per-record hook, for every stream: the snapshot stamp (snapshots.py),
        then the record made to fit the SCHEMA the tap sent, whatever shape the service used
        (conformance.py: the one place that decides it)."""
        stamped = super().post_process(row, context)
        return None if stamped is None else self.conformance.apply(stamped)

    @cached_property
    def dry_run_limit(self) -> DryRunLimit:
        """This stream's ``--test`` limit, which ``get_records`` applies."""
        return DryRunLimit(self)

    @property
    @override
    def synced_in_full(self) -> bool:
        return not self.dry_run_limit.cut_short

    @property
    def request_budget(self) -> RequestBudget:
        """The run's one budget of requests in flight (the tap's)."""
        raise NotImplementedError

    @override  # type: ignore[misc]  # final in the SDK: the second bend listed in tap.py
    def sync(self, context: Context | None = None) -> None:
        """The SDK's sync; however it ends, the worker threads this stream drives end with it,
        the records it wrote leave the writer's chunk (a failed sync's too, as a buffered
        stdout would at exit), and a failed run still says how the service slowed it down (a
        successful one says it at its end, ``TapAccessGov.sync_all``).

        The SDK marks ``sync`` final and has no hook at its end: a failure outside
        ``get_records`` (a stream map, a closed output) leaves the records generator suspended
        in the traceback, and its workers would go on fetching (and retrying) after the run.
        This is the one override of it.
        """
        failed = False
        try:
            super().sync(context)
        except BaseException:
            failed = True
            self.request_budget.report()
            raise
        finally:
            self.stop_workers()
            self.flush_output(failed=failed)

    def flush_output(self, *, failed: bool) -> None:
        """Write out the records waiting in the tap's writer (OutputWriter's chunk). After a
        failure an output that is closed (often the failure itself) is not a new one."""
        if isinstance(self.output, OutputWriter):
            try:
                self.output.flush()
            except OutputClosedError:
                if not failed:
                    raise

    def time_not_writing(self) -> float:
        """The run's time less what it spent writing its output (OutputWriter's clock; the
        plain monotonic clock under another writer): what the windows in flight read, so
        that a loader slower than the tap is not taken for the service's latency."""
        if isinstance(self.output, OutputWriter):
            return self.output.time_not_writing()
        return time.monotonic()

    def stop_workers(self) -> None:
        """End the worker threads this stream drives, if any (a failed run must not wait)."""


class AccessGovStream(TapStream, RESTStream[str | None]):
    """Base stream for the service's API.

    The SDK's per-record pruning of deselected properties is skipped where nothing is
    deselected (``TapStream._generate_record_messages``).
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
        # Set while this stream's sync is stopping (failed, interrupted, output closed): its
        # worker threads' requests, retry waits and calls in flight end at once.
        self.stopping = Stopping(interruptible(session))
        self.workers: Workers | None = None

    @classmethod
    def discovered(cls, tap: Tap, connection: ApiConnection, found: Discovered) -> t.Self:
        """This stream, built for ``tap`` on ``connection`` and handed the streams it
        ``reads`` (``found``)."""
        return cls(tap, connection=connection, **found.read_by(cls))

    @override
    def records(self, context: Context | None) -> t.Iterable[Record]:
        """The SDK's request loop: every page of the stream's request, parsed."""
        return self.request_records(context)

    @property
    def concurrency(self) -> Concurrency:
        """The run's one owner of concurrency (the tap's, from ``max_concurrency``)."""
        return self.connection.concurrency

    def start_workers(self, count: int, name: str) -> Workers:
        """``count`` worker threads for this sync, which call through this stream's request
        path (same session, retries and budget) and end with its sync (``stop_workers``):
        what ``concurrency`` runs a stream's requests in."""
        self.stop_workers()
        self.pin_proxies()  # before the threads: it changes the shared session
        self.workers = Workers(count, self.stopping, name)
        return self.workers

    @override
    def stop_workers(self) -> None:
        """End this sync's worker threads: waits end, their calls are hung up, they are joined."""
        if self.workers is not None:
            self.workers.close()

    @property
    @override
    def request_budget(self) -> RequestBudget:
        return self.connection.request_budget

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

    @cached_property
    @override
    def user_agent(self) -> str:
        """``tap-accessgov/<version>`` (the SDK's default names the SDK), so that the
        service's system log tells this tap's reads apart."""
        return str(self.config.get("user_agent") or USER_AGENT)

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
    def request_decorator(self, func: RequestFunc) -> RequestFunc:
        """The SDK's decorator (the backoff library, through the ``backoff_*`` hooks below)
        around one attempt, which runs inside the run's request budget and answers the page
        parsed (paging.Page); when the tries are used up, one fatal error naming the call, what
        failed last and how often it was tried."""
        self.pin_proxies()
        # super() hands backoff this stream's logger: drop backoff's own lines on it (once).
        # From singer-sdk 0.55 the stream's logger is a LoggerAdapter: the filter goes on the
        # logger it wraps, through which the adapter logs.
        logger = self.logger
        if isinstance(logger, logging.LoggerAdapter):
            logger = logger.logger
        logger.addFilter(QUIET_BACKOFF)
        budget = self.request_budget
        stopping = self.stopping

        def attempt(prepared_request: requests.PreparedRequest, context: Context | None) -> Page:
            with budget.attempt(stopping) as started_in:
                try:
                    response = func(prepared_request, context)
                except RetriableAPIError as exc:
                    if exc.response is not None and exc.response.status_code == 429:
                        budget.throttled(started_in, retry_after_seconds(exc.response))
                    raise
            page = Page.read(response)
            budget.succeeded()
            return page

        retried = super().request_decorator(t.cast("RequestFunc", attempt))

        def request(
            prepared_request: requests.PreparedRequest, context: Context | None
        ) -> requests.Response:
            try:
                return retried(prepared_request, context)
            except RETRIED_ERRORS as exc:  # backoff re-raises the last one when it gives up
                msg = gave_up(prepared_request, exc, self.backoff_max_tries())
                raise FatalAPIError(msg) from exc

        # The SDK types the call as answering a response; ours answers the Page, which the
        # SDK passes on untouched to parse_response and the paginator (see paging.Page).
        return request

    @override
    def backoff_wait_generator(self) -> t.Generator[float, t.Any, None]:
        """No wait in backoff itself: it sleeps with ``time.sleep``, which a stopping sync
        cannot cut short. backoff calls ``backoff_handler`` right before that sleep, and the
        retry's wait is done there instead, on the stream's ``stopping`` event."""
        return self.backoff_runtime(value=lambda _exception: 0.0)

    @override
    def backoff_jitter(self, value: float) -> float:
        """The SDK's jitter (up to 1 s more), but none on a wait of zero: backoff's own (see
        backoff_wait_generator), and a 401 retried at once with a new token."""
        return float(super().backoff_jitter(value)) if value else 0.0

    @override
    def backoff_handler(self, details: Details) -> None:
        """One WARNING per retry in the tap's words, then the retry's wait (retries.retry_wait:
        the service's Retry-After, none after a 401, else exponential), which ends at once
        (SyncStopped) when this stream's sync stops."""
        if self.stopping.is_set():
            raise SyncStopped  # the call failed because the sync hung it up: no retry, no line
        exc = details.get("exception")
        prepared_request: requests.PreparedRequest = details["args"][0]
        attempt = details["tries"]
        planned = retry_wait(exc, attempt)
        wait = self.backoff_jitter(planned.seconds)
        self.logger.warning(
            retry_warning(
                prepared_request, exc, wait, attempt, self.backoff_max_tries(), asked=planned.asked
            )
        )
        self.request_budget.sleep(wait, self.stopping)

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

        A 401 means the token was revoked or expired early: renew it once and retry. (A 200
        whose body does not parse is retried too: see paging.Page.)
        """
        if response.status_code == 401:
            refused = response.request.headers.get("Authorization", "").removeprefix("Bearer ")
            if self.authenticator.renew_after_unauthorized(refused):
                msg = (
                    f"{where(response.request)} answered 401; retrying once with a new access token"
                )
                raise RetriableAPIError(msg, response)
            msg = (
                f"{where(response.request)} answered 401 to a newly issued access token: "
                f"{service_message(response)}. Check that the API credential is still valid "
                "and that its scope and allowed IPs permit this call."
            )
            raise FatalAPIError(msg)
        super().validate_response(response)
        self.authenticator.confirm_token()

    def names_a_partition(self, response: requests.Response) -> bool:
        """Whether the request of ``response`` names one of the stream's partitions (its 404:
        a partition the service does not know; engine/partitions.py): not for a stream
        without partitions."""
        return False

    @override
    def response_error_message(self, response: requests.Response) -> str:
        return f"{where(response.request)} answered {response.status_code}: {service_message(response)}"

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[dict[str, t.Any]]:
        """Entries of ``list``; a null or missing list is an empty page. ``response`` is the
        Page the request path parsed (see paging.Page)."""
        return page_body(response).get("list") or []
