"""``system_log``: what happened in the service, ``POST /api/v1/systemlog/events`` (OCSF
events; the vendor's endpoint for synchronizing the log to external systems), incremental.

**Key: the event's uid** (OCSF ``metadata.uid``), unique per event. **Cursor: the latest
``time`` a run delivered**, as the grant feed's. A run reads the half-open range ``[bookmark,
run start)`` (``since`` inclusive, ``until`` exclusive; ``start_date`` or the log's beginning
on a first run, ``end_date`` below the run's start when set); the next one reads from its
bookmark, that instant included. A log written by many writers gets events late: one dated at
(or after) the last instant a run delivered but written after that run is delivered by the
next run; the events of that instant are delivered again, which the warehouse's models count
once (``stg_system_log`` keeps one row per uid). Many events at one instant, events without
``time`` (some event types before August 2026: they cannot move the cursor but are in the
range the service files them in) and either sort order change nothing: a range is read whole
before it counts. ``sinceEventUid`` is not used: "after this event" means nothing without an
order, and the default order is not documented. Events appended while a run reads (its own
reads among them) are after its ``until``: the next run reads them.

The range is read like the grant feed's (engine/windowed.py): concurrent half-open windows
cut where the events are, a large window split, a STATE as each completes, a killed run
resumed from it with the same upper bound (re-reading only the windows in flight). A run
asks for the oldest events first (``SORT_DIRECTION_ASC``, as the vendor's CLI does); its
correctness does not depend on the order it gets.

Each record has the event whole (``event``) and the columns every OCSF event has, typed at
the top; this tap's own reads say ``tap-accessgov/<version>`` in ``http_user_agent``. An
event that is not an object or has no uid is skipped, and a ``time`` that is neither epoch
milliseconds nor RFC 3339 text is left null, each with one warning per kind and run (never
a value of the event).
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.windowed import SINCE, ResumableRun, WindowedStream
from tap_accessgov.paging import BodyPaging, page_body
from tap_accessgov.timestamps import from_ns, normalize_timestamp, to_ns

if t.TYPE_CHECKING:
    import requests
    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.time_ranges import Key

Record = dict[str, t.Any]

WINDOWS_OF = "system log"  # completed windows are valid for this stream's one query
# The typed columns: (column, path in the event, type).
COLUMNS: tuple[tuple[str, tuple[str, ...], type], ...] = (
    ("class_uid", ("class_uid",), int),
    ("category_uid", ("category_uid",), int),
    ("activity_id", ("activity_id",), int),
    ("type_uid", ("type_uid",), int),
    ("severity_id", ("severity_id",), int),
    ("status_id", ("status_id",), int),
    ("actor_user_uid", ("actor", "user", "uid"), str),
    ("actor_user_email", ("actor", "user", "email_addr"), str),
    ("src_endpoint_ip", ("src_endpoint", "ip"), str),
    ("api_operation", ("api", "operation"), str),
    ("http_user_agent", ("http_request", "user_agent"), str),
)


class SystemLogStream(BodyPaging, WindowedStream):
    """Every event of the service's system log since the last run (module docstring)."""

    name = "system_log"
    path = "/api/v1/systemlog/events"
    http_method = "POST"
    replication_key = "time"
    is_sorted = False
    primary_keys = ("uid",)
    schema = schemas.SYSTEM_LOG_EVENT
    bound_names = ("since", "until")

    @override
    def windows_of(self) -> str:
        return WINDOWS_OF

    @override
    def window_key(self, record: Record) -> Key:
        return _key(record)

    @override
    def range_end(self) -> int:
        """The run's start (the interrupted run's, when resumed), or ``end_date`` when
        earlier: what is logged while the run reads is the next run's."""
        upper = to_ns(self.run_start)
        end = super().range_end()
        return upper if end is None else min(upper, end)

    @override
    def backfill_extra(self, run: ResumableRun) -> dict[str, t.Any]:
        """The run's start: a resumed run keeps this run's upper bound."""
        return {SINCE: self.run_start}

    @override
    def search_filters(self, context: Context | None) -> dict[str, t.Any]:
        """A window's or a probe's bounds (a probe: a small page), oldest first."""
        return {"sortDirection": "SORT_DIRECTION_ASC", **self.window_filters(context)}

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        for event in page_body(response).get("list") or []:
            if not isinstance(event, dict):
                self.warn_once("Skipping a system log event that is not a JSON object")
                continue
            uid = _at(event, ("metadata", "uid"), str)
            if not uid:
                self.warn_once("Skipping a system log event without metadata.uid")
                continue
            yield {
                "uid": uid,
                "time": self._time(event.get("time")),
                **{column: _at(event, path, kind) for column, path, kind in COLUMNS},
                "event": event,
            }

    def _time(self, value: t.Any) -> str | None:
        """OCSF ``time`` (epoch milliseconds; RFC 3339 text in some releases), normalized;
        None when absent or unreadable (warned of once)."""
        if value is None:
            return None
        try:
            if isinstance(value, int) and not isinstance(value, bool):
                return from_ns(value * 1_000_000)
            if isinstance(value, str):
                return normalize_timestamp(value)
        except (ValueError, OverflowError, OSError):
            pass
        self.warn_once(
            "A system log event's time is neither epoch milliseconds nor RFC 3339: left null"
        )
        return None


def _key(record: Record) -> Key:
    """An event's key for a window's split, its time (or None) last."""
    return (record["uid"], record["time"])


def _at(event: dict[str, t.Any], path: tuple[str, ...], kind: type) -> t.Any:
    """The value at ``path`` of ``event`` when it is of ``kind``, else None."""
    value: t.Any = event
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    if kind is int and isinstance(value, bool):
        return None
    return value if isinstance(value, kind) else None
