"""The grant feed: ``POST /api/v1/grants/feed``, incremental on ``feed.date``."""

from __future__ import annotations

import concurrent.futures
import itertools
import re
import typing as t
from operator import itemgetter

from singer_sdk.exceptions import FatalAPIError
from singer_sdk.helpers.conform import TypeConformanceLevel
from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.paging import BodyPaging, page_body
from tap_accessgov.streams.grant_feed_windows import (
    Window,
    WindowReader,
    filters_digest,
    initial_windows,
    pieces,
)
from tap_accessgov.streams.windowed import WindowedStream
from tap_accessgov.timestamps import from_ns, normalize_timestamp, to_ns

if t.TYPE_CHECKING:
    import requests
    from singer_sdk.helpers.types import Context

    from tap_accessgov.streams.workers import Workers

UNSPECIFIED_EVENT = "GRANT_EVENT_TYPE_UNSPECIFIED"
# Which record field each `$.expanded[N]` path of a feed entry fills.
EXPANDED_FIELDS = {
    "appPath": "app",
    "appUserPath": "appUser",
    "entitlementPath": "entitlement",
    "ticketPath": "ticket",
}
_EXPANDED_PATH = re.compile(r"^\$\.expanded\[(\d+)\]$")
_DAY = 86_400 * 1_000_000_000  # ns
# How far back from the sync's start the probes for the earliest event look (days), at once.
PROBE_DAYS = (1, 4, 16, 64, 256, 1024, 4096, 16384)


def _window_context(window: Window) -> dict[str, t.Any]:
    """The request context of one window: its bounds as sent (no personal data: the SDK
    writes contexts into its METRIC lines)."""
    after, before = window.bounds()
    return {"after": after, "before": before}


class GrantFeedStream(BodyPaging, WindowedStream):
    """Grant events from ``POST /api/v1/grants/feed``, incremental on ``feed.date``.

    The feed is not documented as sorted, so the stream is unsorted: the bookmark (the latest
    date seen) is only committed when a sync completes. The feed is read in time windows
    (grant_feed_windows.py) whose completion is saved in the state as they complete, so an
    interrupted sync resumes from its last STATE. ``after`` is inclusive, so each run re-reads
    the events at the bookmark instant: targets dedupe on the primary key.
    """

    name = "grant_feed"
    path = "/api/v1/grants/feed"
    http_method = "POST"
    replication_key = "date"
    is_sorted = False
    primary_keys = ("appId", "appEntitlementId", "appUserId", "eventType", "date")
    schema = schemas.GRANT_FEED
    # parse_response builds every record from JSON strings and objects that already match the
    # schema; re-checking each value was the largest cost in a profile (docs/performance.md).
    TYPE_CONFORMANCE_LEVEL = TypeConformanceLevel.NONE

    @override
    def records(self, context: Context | None) -> t.Iterable[dict[str, t.Any]]:
        """With ``max_concurrency`` > 1, the feed in concurrent time windows (see
        grant_feed_windows.py); with 1, one request after another as a single query."""
        if int(self.config["max_concurrency"]) < 2 or context:
            return self.request_records(context)
        return self._windowed_records()

    def _windowed_records(self) -> t.Iterator[dict[str, t.Any]]:
        """Every event of the run's range, window by window, with a STATE as each completes."""
        config = self.config
        workers = int(config["max_concurrency"])
        lower = self.get_starting_replication_key_value(None)
        lower_ns = to_ns(lower) if lower else None
        upper_ns = to_ns(end) if (end := config.get("end_date")) else None
        high = upper_ns if upper_ns is not None else to_ns(self.run_start)
        pool = self.start_workers(workers, "grant-feed")
        try:
            # After a bookmark the events go on from there: probes only for a first sync.
            bookmarked = self.stream_state.get("replication_key_value") is not None
            low, sample = (
                (lower_ns, None)
                if bookmarked and lower_ns is not None
                else self._where_events_are(lower_ns, upper_ns, high, pool, workers)
            )
        except BaseException:
            pool.close()
            raise
        high = max(high, low + 1)
        run = self.resumable_run(filters_digest(config))
        windows = run.remaining(initial_windows(lower_ns, upper_ns, low, high, workers, sample))
        reader = WindowReader(
            read=lambda window: self.request_records(_window_context(window)),
            split=lambda window, delivered, typical: pieces(window, delivered, typical, low, high),
            page_size=self.page_size,
            workers=pool,
            count=workers,
        )
        # An event changed at its ``date`` (parse_response normalized it).
        yield from run.delivered(reader.records(windows, run.complete), itemgetter("date"))
        run.finish()

    def _where_events_are(
        self, after: int | None, upper: int | None, before: int, workers: Workers, slots: int
    ) -> tuple[int, list[int] | None]:
        """Where the events of the run's range begin (``after`` None: no bookmark and no
        start_date), so the windows are cut where the data is, not over years before it, and
        a sample of their dates. One round of requests at once:

        - probes (pages of 10): is there an event in ``[after, instant)`` for each instant
          ``PROBE_DAYS`` back from ``before`` (as many as there are requests in flight but
          one)? The first instant with none before it is where the windows are cut from (the
          earliest event lies within a quarter of the distance from there to ``before``).
          The windows still tile the whole range (the oldest one reaches down to ``after``,
          or has no ``after`` at all), so an event the service adds meanwhile is not lost;
        - the first page of the whole range ``[after, upper)`` (a full page, not delivered):
          served in no date order, a sample of the range's dates, which ``initial_windows``
          cuts at; in date order, one end of the range, which it ignores.

        Returns where to cut from, and the sample's dates (None unless the page was full)."""
        lowest = 0 if after is None else after
        instants = [before - days * _DAY for days in PROBE_DAYS if before - days * _DAY > lowest]
        instants = instants[: max(slots - 1, 1)]
        sample_context = {
            "after": None if after is None else from_ns(after),
            "before": None if upper is None else from_ns(upper),
        }
        sampling = workers.submit(self._first_page, sample_context)
        probes = [workers.submit(self._any_event_between, after, instant) for instant in instants]
        # The first failure ends the round (the caller closes the workers: waits end at once).
        round_: list[concurrent.futures.Future[t.Any]] = [sampling, *probes]
        concurrent.futures.wait(round_, return_when=concurrent.futures.FIRST_EXCEPTION)
        for future in round_:
            if future.done() and (failure := future.exception()) is not None:
                raise failure
        found = [probe.result() for probe in probes]
        page = sampling.result()
        low = next(
            (
                instant
                for instant, any_before in zip(instants, found, strict=True)
                if not any_before
            ),
            lowest,
        )
        self.logger.info(
            "The earliest grant event after %s is on or after %s (%d requests); the windows "
            "are cut from there",
            "the start" if after is None else from_ns(after),
            from_ns(low),
            len(instants) + 1,
        )
        full = len(page) >= self.page_size
        return low, [to_ns(record["date"]) for record in page] if full else None

    def _first_page(self, context: dict[str, t.Any]) -> list[dict[str, t.Any]]:
        """The records of the first page of a query (at most ``page_size``)."""
        records = iter(self.request_records(context))
        try:
            return list(itertools.islice(records, self.page_size))
        finally:
            if isinstance(records, t.Generator):
                records.close()

    def _any_event_between(self, after: int | None, before: int) -> bool:
        context = {"after": None if after is None else from_ns(after), "before": from_ns(before)}
        records = iter(self.request_records({**context, "probe": True}))
        try:
            return next(records, None) is not None
        finally:
            if isinstance(records, t.Generator):
                records.close()

    @override
    def search_filters(self, context: Context | None) -> dict[str, t.Any]:
        """A window's or a probe's bounds (a probe: a small page), else the run's; the
        settings' filters and expand mask."""
        config = self.config
        body: dict[str, t.Any] = {}
        if context is not None and "before" in context:  # a window or a probe
            if context.get("probe"):
                body["pageSize"] = 10
            if context.get("after"):
                body["after"] = context["after"]
            if context["before"]:
                body["before"] = context["before"]
        else:
            if after := self.get_starting_replication_key_value(context):
                body["after"] = normalize_timestamp(after)
            if before := config.get("end_date"):
                body["before"] = normalize_timestamp(before)
        if app_ids := config.get("app_ids"):
            body["appRefs"] = [{"id": app_id} for app_id in app_ids]
        if refs := config.get("app_entitlement_refs"):
            body["appEntitlementRefs"] = [
                {"appId": r["app_id"], "id": r["app_entitlement_id"]} for r in refs
            ]
        if refs := config.get("app_user_refs"):
            body["appUserRefs"] = [{"appId": r["app_id"], "id": r["id"]} for r in refs]
        if user_ids := config.get("user_ids"):
            body["userRefs"] = [{"id": user_id} for user_id in user_ids]
        if paths := config.get("expand_mask"):
            body["expandMask"] = {"paths": list(paths)}
        return body

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[dict[str, t.Any]]:
        """Feed entries with their keys lifted to the top and expanded objects resolved."""
        page = page_body(response)
        expanded = page.get("expanded") or []
        referenced: set[int] = set()
        for entry in page.get("list") or []:
            feed = entry.get("feed") or {}
            try:
                date = normalize_timestamp(feed["date"])
            except (KeyError, TypeError, ValueError):
                msg = f"a grant feed entry has no readable feed.date: {entry!r}"
                raise FatalAPIError(msg) from None
            record: dict[str, t.Any] = {
                "date": date,
                "appId": feed.get("appId"),
                "appEntitlementId": feed.get("appEntitlementId"),
                "appUserId": feed.get("appUserId"),
                "eventType": feed.get("eventType") or UNSPECIFIED_EVENT,
                "feed": feed,
            }
            for path_field, object_field in EXPANDED_FIELDS.items():
                if path := entry.get(path_field):
                    record[path_field] = path
                    record[object_field] = self._resolve(path, expanded, referenced)
            yield record
        if len(referenced) < len(expanded):
            self.logger.warning(
                "%d expanded object(s) on a grant feed page are referenced by no entry",
                len(expanded) - len(referenced),
            )

    def _resolve(
        self, path: str, expanded: list[dict[str, t.Any]], referenced: set[int]
    ) -> dict[str, t.Any] | None:
        match = _EXPANDED_PATH.match(path)
        if match is None or int(match[1]) >= len(expanded):
            self.logger.warning("Grant feed path %r does not point into the page's expanded", path)
            return None
        referenced.add(int(match[1]))
        return expanded[int(match[1])]
