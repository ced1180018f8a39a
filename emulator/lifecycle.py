"""Grant lifecycles: how the emulator writes them into its feed (``LifecyclePlan``), and the
rules that read them back from a feed's history (the ground truth).

**The plan.** Events tell coherent grant lifecycles (the models' tests need histories, not
noise), still decoded in O(1) per event: position i belongs to lane `i % lanes`, round
`i // lanes`; a lane is a run of segments, each one grant's history, so a grant's events are
`lanes` steps apart in time. A segment's rounds come in pairs ("units"): a toggle unit flips
the grant and flips it back (ADDED then REMOVED, or REMOVED then ADDED for a grant held since
before the feed), a noise unit changes nothing (unspecified or unknown-future types, a
redundant ADDED or REMOVED). So the state before any round is known from its own unit alone.
A noise slot at an even position may take the next position's noise slot as its twin: the same
grant at the same instant with the opposite type (REMOVED and ADDED together). The feed
(emulator/feed.py) decodes each event's date and ticket around this plan.

**The rules** are the contract the dbt models implement in SQL (docs/models.md); the tests
compare the models with what this module computes from the emulator's own events, so they are
written as plainly as they are stated, and independently of the plan:

- a grant is (app id, app entitlement id, app user id); its events are its feed entries after
  deduplication on the grant feed's primary key (grant, event type, date);
- only ADDED and REMOVED change a grant; events apply in date order, and at one instant
  REMOVED applies before ADDED;
- ADDED while not held opens an interval, ADDED while held changes nothing; REMOVED while held
  closes it; a REMOVED with no earlier ADDED or REMOVED for the grant closes an interval whose
  start is unknown (held since before the data begins); any other REMOVED changes nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from emulator.seed import Seed
from emulator.timefmt import parse_rfc3339

ADDED = "GRANT_EVENT_TYPE_ADDED"
REMOVED = "GRANT_EVENT_TYPE_REMOVED"
UNSPECIFIED = "GRANT_EVENT_TYPE_UNSPECIFIED"
MODIFIED = "GRANT_EVENT_TYPE_MODIFIED"  # newer than the spec: clients must tolerate it
NOISE, TOGGLE = 0, 1
FEATURED_PER_ENTITLEMENT = 4  # excluded users whose excluded grant is held at the end

Grant = tuple[str, str, str]  # app id, app entitlement id, app user id
GrantIndex = tuple[int, int, int]  # app, entitlement, user: indexes into the catalog


class LifecyclePlan:
    """Lanes, segment lengths and the grant numbering: which grant each feed position belongs
    to and whether it is held before it (see the module docstring).

    Grant number x = entitlement (flattened) * users + user. Segment q = (segment index *
    lanes + lane) maps to a grant through an affine bijection, so no grant gets two
    overlapping histories; the first segments are reserved for ``featured`` grants (excluded
    users on the entitlement they are excluded from), which end held, so "excluded yet
    holding" has answers. Segments are made long enough that they stay fewer than the grants.
    """

    def __init__(
        self,
        seed: Seed,
        *,
        entitlements: Sequence[tuple[int, int]],
        users: int,
        featured: Iterable[GrantIndex],
        events: int,
    ) -> None:
        self._seed = seed
        self._entitlements = list(entitlements)  # (app, entitlement), flattened
        self._users = users
        self.events = events
        grants = len(self._entitlements) * users
        self._grants = grants
        self._seg_min = max(2, -(-3 * events // grants))
        rounds = 3 * self._seg_min + 9
        self.lanes = max(1, -(-events // rounds))
        multiplier = seed.mix(10, 0) % grants | 1
        while math.gcd(multiplier, grants) != 1:
            multiplier += 1
        self._multiplier, self._offset = multiplier, seed.mix(11, 0) % grants
        inverse = pow(multiplier, -1, grants)
        flat_index = {ent: n for n, ent in enumerate(self._entitlements)}
        numbers = [flat_index[(a, k)] * users + u for a, k, u in featured][: self.lanes]
        # tau: a permutation of segment numbers with pi(tau(i)) = numbers[i].
        wanted = [(x - self._offset) * inverse % grants for x in numbers]
        self._tau = dict(enumerate(wanted))
        taken, small = set(wanted), range(len(wanted))
        freed = sorted(set(small) - taken)
        self._tau.update(zip(sorted(taken - set(small)), freed, strict=True))
        self._featured = len(numbers)
        max_rounds = -(-events // self.lanes) if events else 0
        if max(0, (max_rounds - 1) // self._seg_min + 1) * self.lanes > grants:
            raise ValueError("more grant histories than grants: add users or entitlements")
        self._added_held: dict[GrantIndex, bool] = {}  # grants added events touched -> held

    @property
    def segments(self) -> int:
        """An upper bound of the segment numbers the feed can use, run-time events included
        (they continue a lane's latest segment): segments from here on are grants the feed
        never touches."""
        max_rounds = -(-self.events // self.lanes) if self.events else 0
        return max(self.lanes, max(0, (max_rounds - 1) // self._seg_min + 1) * self.lanes)

    def untouched(self, count: int) -> list[GrantIndex]:
        """``count`` grants (fewer if the tenant has fewer) that no feed event names, old or
        added at run time: the segments past ``segments`` (a bijection maps segments to
        grants), for grants held since before the feed began."""
        first = self.segments
        return [self.grant(q) for q in range(first, min(first + count, self._grants))]

    def grant(self, segment: int) -> GrantIndex:
        """(app, entitlement, user) of a segment number."""
        x = (self._multiplier * self._tau.get(segment, segment) + self._offset) % self._grants
        e, u = divmod(x, self._users)
        a, k = self._entitlements[e]
        return a, k, u

    def slot(self, p: int) -> tuple[int, int, bool]:
        """Position p's own lane occurrence: (segment, NOISE or TOGGLE, held before it)."""
        lane, rnd = p % self.lanes, p // self.lanes
        seg_len = self._seg_min + self._seed.mix(1, lane) % (self._seg_min + 6)
        seg, offset = divmod(rnd, seg_len)
        q = seg * self.lanes + lane
        featured = q < self._featured
        held0 = featured or self._seed.mix(2, q) % 4 == 0
        unit, half = divmod(offset, 2)
        if featured and seg_len % 2 and unit == seg_len // 2:
            kind = NOISE  # a featured grant must end held: no half-done toggle at its end
        else:
            kind = TOGGLE if self._seed.mix(3, q * 4096 + unit) % 100 < 82 else NOISE
        return q, kind, held0 if half == 0 else held0 ^ (kind == TOGGLE)

    def twinned(self, p: int, draw: int) -> bool:
        """Whether even position p (a noise slot) takes position p+1 as its same-instant twin
        (``draw``: position p's twin draw, 0 for a twin)."""
        return (
            p % 2 == 0
            and p + 1 < self.events
            and draw == 0
            and self.slot(p)[1] == NOISE
            and self.slot(p + 1)[1] == NOISE
        )

    @staticmethod
    def event_type(kind: int, held: bool, twinned: bool, draw: int) -> str:
        """The type of a slot's event: a toggle (or a twin's first half) flips the grant; a
        noise slot is unspecified, of a newer type, or a redundant repeat (``draw``: 0-999)."""
        if kind == TOGGLE or twinned:
            return REMOVED if held else ADDED
        if draw < 400:
            return UNSPECIFIED
        if draw < 600:
            return MODIFIED
        return ADDED if held else REMOVED  # redundant: changes nothing

    def continue_lifecycle(self, i: int) -> tuple[GrantIndex, str, int]:
        """The event at position ``i`` added at run time: the next step of some lane's latest
        grant. Returns the grant, the event type and the draw left for the feed's own choices
        (its ticket). Callers serialise calls (the feed's lock): it remembers what it did."""
        lane = self._seed.mix(4, i) % self.lanes
        if lane < self.events:
            last = lane + (self.events - 1 - lane) // self.lanes * self.lanes
            q, kind, held = self.slot(last)
            held ^= kind == TOGGLE
        else:
            q, held = lane, False
        grant = self.grant(q)
        held = self._added_held.get(grant, held)
        draw = self._seed.mix(5, i)
        if draw % 100 < 85:
            event_type = REMOVED if held else ADDED
            self._added_held[grant] = not held
        elif draw % 100 < 93:
            event_type = UNSPECIFIED
        else:
            event_type = MODIFIED
        return grant, event_type, draw


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
