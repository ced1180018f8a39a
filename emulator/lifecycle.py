"""Ground truth of access: the grant lifecycle rules applied, in Python, to a feed's history.

This is the contract the dbt models implement in SQL (README, "Models"); the tests compare
the models with what this module computes from the emulator's own events, so it is written
as plainly as the rules are stated:

- a grant is (app id, app entitlement id, app user id); its events are its feed entries after
  deduplication on the grant feed's primary key (grant, event type, date);
- only ADDED and REMOVED change a grant; events apply in date order, and at one instant
  REMOVED applies before ADDED;
- ADDED while not held opens an interval, ADDED while held changes nothing; REMOVED while held
  closes it; a REMOVED with no earlier ADDED or REMOVED for the grant closes an interval whose
  start is unknown (held since before the data begins); any other REMOVED changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from emulator.timefmt import parse_rfc3339

ADDED = "GRANT_EVENT_TYPE_ADDED"
REMOVED = "GRANT_EVENT_TYPE_REMOVED"
UNSPECIFIED = "GRANT_EVENT_TYPE_UNSPECIFIED"

Grant = tuple[str, str, str]  # app id, app entitlement id, app user id


class Interval(NamedTuple):
    """One stretch of time a grant was held; None = unknown start / still held."""

    app_id: str
    app_entitlement_id: str
    app_user_id: str
    granted_at: int | None  # ns since the epoch
    revoked_at: int | None
    granted_ticket_id: str | None
    revoked_ticket_id: str | None


def distinct_events(
    feed: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str, str, str, int], str | None]:
    """Feed objects deduplicated on the primary key -> ticket id (the greatest, if they differ)."""
    events: dict[tuple[str, str, str, str, int], str | None] = {}
    for f in feed:
        key = (
            f["appId"],
            f["appEntitlementId"],
            f["appUserId"],
            f.get("eventType", UNSPECIFIED),
            parse_rfc3339(f["date"]),
        )
        ticket = f.get("ticketId")
        known = events.get(key)
        events[key] = max(ticket, known) if ticket and known else (ticket or known)
    return events


def intervals(feed: Iterable[Mapping[str, Any]]) -> list[Interval]:
    """Every interval of every grant, sorted by grant then start (unknown start first)."""
    histories: dict[Grant, list[tuple[int, int, str | None]]] = defaultdict(list)
    for (app, entitlement, user, event_type, date), ticket in distinct_events(feed).items():
        if event_type in (ADDED, REMOVED):
            # At one instant REMOVED (0) applies before ADDED (1).
            histories[(app, entitlement, user)].append((date, event_type == ADDED, ticket))
    out: list[Interval] = []
    for grant, history in histories.items():
        history.sort(key=lambda e: (e[0], e[1]))
        held, opened_at, opened_ticket = False, None, None
        for n, (date, is_added, ticket) in enumerate(history):
            if is_added and not held:
                held, opened_at, opened_ticket = True, date, ticket
            elif not is_added and held:
                out.append(Interval(*grant, opened_at, date, opened_ticket, ticket))
                held = False
            elif not is_added and n == 0:
                out.append(Interval(*grant, None, date, None, ticket))
        if held:
            out.append(Interval(*grant, opened_at, None, opened_ticket, None))
    out.sort(key=lambda i: (i[:3], i.granted_at is not None, i.granted_at or 0))
    return out


def held_at(history: Iterable[Interval], at: int | None = None) -> list[Interval]:
    """The intervals that hold at instant `at` (ns; None = now, i.e. still open).

    At `at` every event dated at or before `at` has applied: an interval revoked exactly at
    `at` no longer holds, one granted exactly at `at` does.
    """
    if at is None:
        return [i for i in history if i.revoked_at is None]
    return [
        i
        for i in history
        if (i.granted_at is None or i.granted_at <= at)
        and (i.revoked_at is None or i.revoked_at > at)
    ]
