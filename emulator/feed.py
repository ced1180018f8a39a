"""The grant feed: its events, decoded on demand from the seed, and the endpoint that searches
them, POST /api/v1/grants/feed (request validation, cursor paging and the expand mask).

Events are never stored: event i is decoded from a hash of (seed, i), and its date is
`base + i*step + jitter` with bounded jitter. That keeps 1,000,000 events free in memory,
keeps neighbours out of date order (the feed is not sorted), and still lets a search with
`after`/`before` jump straight to the index range that can match.

The service does not document the order of a search's results, so the feed can be served in
each order a client may meet (``ORDERS``): ``near`` (index order: near-chronological, the
default), ``ascending`` or ``descending`` by date, or ``none`` (ordered by a keyed hash of the
event, as a search ordered by some random id would return it). A search's server order is
the order of the index range its ``after``/``before`` allow (a narrow range decoded and sorted
on its own; a wide one, such as a client's probes of where the data begins, read from the whole
feed's order, decoded and sorted once: a service does not sort its data again for each wide
query; then cached), followed by the events added at run time in the order they were added. Which grant an event touches,
and its type, come from the lifecycle plan (emulator/lifecycle.py), which also holds the rules
that read the history back (the ground truth).

Dates are anchored on `end`: every initial event lies in the `span_days` before it. The
default `end` is the start of the previous hour (UTC), so "the last 30 days" has data, events
added at run time still lie in the past, and two Datasets built in the same hour agree; pass
`end` for full reproducibility.

Validation is protobuf-JSON strict: unknown fields, wrong types and bad timestamps are a 400,
so a client that sends something the real service would reject fails here first.
"""

from __future__ import annotations

import collections
import functools
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from emulator import lifecycle, unpopulated
from emulator.catalog import Catalog
from emulator.errors import bad_request
from emulator.paging import PageTokens, clamp_page_size, digest_of
from emulator.protojson import body_object
from emulator.protojson import fields as _fields
from emulator.protojson import int32 as _int32
from emulator.protojson import refs as _refs
from emulator.protojson import string as _string
from emulator.protojson import timestamp as _timestamp
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise, to_ns
from emulator.users import Users

TYPE_PREFIX = "type.googleapis.com/c1.api."  # of an expanded object (protobuf Any)
DIGITS = (0, 3, 6, 9)
TICKET_IDS = ("id", "mixed")
TICKET_STATES = ("TICKET_STATE_OPEN", "TICKET_STATE_RESOLVED", "TICKET_STATE_WONT_DO")
MARGIN = NS  # how far precision rounding can move a generated date

# How the initial events' dates spread over the span: knots (share of events, share of time).
# "skewed" is a real tenant's year: a sparse past (20% of the events over 60% of the time), one
# busy burst (30% in 2%, a few days of a half-year span) and a busier recent stretch.
# "recent": a tenant whose use took off lately, 70% of the events in the last tenth of the span.
DISTRIBUTIONS: dict[str, tuple[tuple[float, float], ...]] = {
    "uniform": ((0.0, 0.0), (1.0, 1.0)),
    "skewed": ((0.0, 0.0), (0.2, 0.6), (0.5, 0.62), (1.0, 1.0)),
    "recent": ((0.0, 0.0), (0.3, 0.9), (1.0, 1.0)),
}


ORDERS = ("near", "ascending", "descending", "none")
ORDER_TAG = 0x0D3E  # the seed.mix tag of the ``none`` order's keys
# Initial events kept decoded (the most recently asked): a client that reads a feed in date
# order as many narrow windows has each window's range decoded to sort it, then its pages,
# then its pieces' ranges again: 4.6 decodes per event of a 100,000-event backfill, three
# times the CPU per request of the index order, spent on the cores the client shares with
# the emulator on one machine (a service's own CPU is not the client's).
DECODED_EVENTS = 1 << 17
ORDER_CACHE = 256  # index ranges whose server order is kept (a backfill's windows)
# An index range of at least this share of the feed is read from the whole feed's order
# (``GrantFeed.server_order``): decoding and sorting each wide range again cost the emulator
# 0.3-0.5 s of CPU per round of a backfill's probes, which no indexed service spends.
WIDE_RANGE = 0.25


class _Warp:
    """A monotone piecewise-linear map of [0, length] ns onto itself (dates of evenly spaced
    positions -> dates of the distribution), and its inverse for index ranges."""

    def __init__(self, length: int, knots: tuple[tuple[float, float], ...]) -> None:
        self.length = length
        self._points = [(round(p * length), round(q * length)) for p, q in knots]

    def __call__(self, x: int) -> int:
        return self._map(x, 0, 1)

    def inverse(self, y: int) -> int:
        return self._map(y, 1, 0)

    def _map(self, v: int, src: int, dst: int) -> int:
        points = self._points
        if v <= 0 or v >= self.length:
            return v  # outside the initial span (added events, open bounds): unchanged
        for left, right in itertools.pairwise(points):
            if v <= right[src]:
                width = right[src] - left[src]
                return left[dst] + (v - left[src]) * (right[dst] - left[dst]) // max(width, 1)
        return v


class Event(NamedTuple):
    """One decoded grant feed event, as indexes into the catalog."""

    app: int
    entitlement: int
    user: int
    event_type: str
    ticket: int  # -1: no ticket
    date: int  # ns since the epoch


@dataclass(frozen=True)
class FeedFilter:
    """A feed search reduced to indexes. None = no filter; an empty set matches nothing."""

    after: int | None = None
    before: int | None = None
    apps: frozenset[int] | None = None
    entitlements: frozenset[tuple[int, int]] | None = None
    app_users: frozenset[tuple[int, int]] | None = None
    users: frozenset[int] | None = None

    def matches(self, e: Event) -> bool:
        return (
            (self.after is None or e.date >= self.after)
            and (self.before is None or e.date < self.before)
            and (self.apps is None or e.app in self.apps)
            and (self.entitlements is None or (e.app, e.entitlement) in self.entitlements)
            and (self.app_users is None or (e.app, e.user) in self.app_users)
            and (self.users is None or e.user in self.users)
        )


class GrantFeed:
    """The feed's events in server order (the initial ones decoded, those added at run time
    stored), their search, their expanded objects and the grant history they imply."""

    def __init__(
        self,
        seed: Seed,
        catalog: Catalog,
        users: Users,
        lifecycles: lifecycle.LifecyclePlan,
        *,
        events: int,
        end_ns: int,
        span_days: int,
        distribution: str,
        order: str = "near",
        ticket_ids: str = "id",
    ) -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}")
        self.seed = seed
        self.order = order
        self.catalog = catalog
        self.users = users
        self.lifecycles = lifecycles
        self.size = events
        self.end_ns = end_ns
        self._lock = threading.Lock()
        # Event i's date is base + i*step + jitter, jitter in [0, window), then rounded by
        # at most MARGIN; so the whole initial feed ends before `end`.
        span = span_days * 86_400 * NS
        self.step = max(span // max(events, 1), 1)
        self.window = 3 * self.step
        self.base = end_ns - events * self.step - self.window - 2 * MARGIN
        self._warp = _Warp(end_ns - self.base, DISTRIBUTIONS[distribution])
        self.tickets = max(20, events // 25)
        # What an event's ticketId carries: the task's id, or ("mixed") for a third of the
        # tickets its numericId (undocumented which; the service accepts both).
        if ticket_ids not in TICKET_IDS:
            raise ValueError(f"ticket_ids must be one of {', '.join(TICKET_IDS)}")
        self.numeric_tickets = ticket_ids == "mixed"
        self._added: list[Event] = []  # events added at run time, in server order
        self._added_at: list[int] = []  # when each was added (ns, the wall clock)
        self._decoded = functools.lru_cache(maxsize=max(min(events, DECODED_EVENTS), 1))(
            self._decode
        )
        tail = range(max(0, events - 2 - (self.window + 2 * MARGIN) // self.step), events)
        self._max_date = max((self.event(i).date for i in tail), default=self.base)
        self._orders: collections.OrderedDict[tuple[int, int], Sequence[int]] = (
            collections.OrderedDict()
        )
        self._whole_order: list[int] | None = None  # every initial event, once a wide range asks
        self._whole_lock = threading.Lock()

    @property
    def total(self) -> int:
        """Events in server order so far (initial plus added)."""
        return self.size + len(self._added)

    @property
    def first_date(self) -> int:
        """A lower bound of every initial event date (ns)."""
        return self.base - MARGIN

    # ----- decoding ---------------------------------------------------------------------------

    def _draws(self, i: int) -> tuple[int, int, int, int, int, int]:
        """Per-position randomness: (kind, ticket?, ticket, digits, twin, rest)."""
        h = self.seed.digest(i)
        h, kind = divmod(h, 1000)
        h, has_ticket = divmod(h, 10)
        h, ticket = divmod(h, self.tickets)
        h, digits = divmod(h, 4)
        h, twin = divmod(h, 3)
        return kind, has_ticket, ticket, digits, twin, h

    def event(self, i: int) -> Event:
        if i >= self.size:
            return self._added[i - self.size]
        return self._decoded(i)

    def _decode(self, i: int) -> Event:
        """Initial event ``i``, decoded from the seed (``event`` keeps the last ones)."""
        plan = self.lifecycles
        kind_draw, has_ticket, _, digits, twin_draw, h = self._draws(i)
        # Each event its own ticket (a task is about one grant: emulator/tasks.py).
        ticket = i if has_ticket < 6 else -1
        q, kind, held = plan.slot(i)
        if i % 2 and kind == lifecycle.NOISE and plan.twinned(i - 1, self._draws(i - 1)[4]):
            partner = self.event(i - 1)
            opposite = (
                lifecycle.ADDED if partner.event_type == lifecycle.REMOVED else lifecycle.REMOVED
            )
            return partner._replace(event_type=opposite, ticket=ticket)
        a, k, u = plan.grant(q)
        twinned = kind == lifecycle.NOISE and plan.twinned(i, twin_draw)
        event_type = plan.event_type(kind, held, twinned, kind_draw)
        # A twin partner's date must also lie in position i+1's range: it shares it.
        jitter = self.step + h % (self.window - self.step) if twinned else h % self.window
        date = precise(self.base + self._warp(i * self.step + jitter), DIGITS[digits])
        return Event(a, k, u, event_type, ticket, date)

    def feed_object(self, e: Event) -> dict[str, Any]:
        app = self.catalog.feed_apps[e.app]
        feed = {
            "appEntitlementId": app.entitlement_ids[e.entitlement],
            "appId": app.id,
            "appUserId": self.users.app_user_id(e.app, e.user),
            "date": format_ns(e.date),
            "eventType": e.event_type,
        }
        if e.ticket >= 0:
            numeric = self.numeric_tickets and self.seed.mix(43, e.ticket) % 3 == 0
            feed["ticketId"] = (
                self.numeric_ticket_id(e.ticket) if numeric else self.ticket_id(e.ticket)
            )
        return feed

    def add_events(
        self, count: int = 0, dates: Iterable[str | datetime | int] | None = None
    ) -> int:
        """Append events: at explicit instants, then `count` more dated after everything.

        Count-based dates strictly increase from the latest existing date, 1 ms to 1 s apart
        (so thousands still fit before "now") with mixed precision, so an incremental sync
        must find exactly them. Returns the new total.
        """
        with self._lock:
            now = time.time_ns()
            for value in dates or ():
                ns = to_ns(value)
                self._added.append(self._continue_lifecycle(self.total, ns))
                self._added_at.append(now)
                self._max_date = max(self._max_date, ns)
            for _ in range(count):
                rng = random.Random(f"{self.seed.value}:added:{self.total}")
                step = 1_000_000 + rng.randrange(NS)
                date = precise(self._max_date + step, rng.choice(DIGITS))
                if date <= self._max_date:  # rounding to a coarse form went back: use ns
                    date = precise(self._max_date + step, 9)
                self._added.append(self._continue_lifecycle(self.total, date))
                self._added_at.append(now)
                self._max_date = date
            return self.total

    def added_at(self, i: int) -> int | None:
        """When event ``i`` was added at run time (ns, the wall clock); None for an initial
        one. The service logs a change when it makes it: the system log's instant for it."""
        return self._added_at[i - self.size] if i >= self.size else None

    def _continue_lifecycle(self, i: int, date: int) -> Event:
        (a, k, u), event_type, draw = self.lifecycles.continue_lifecycle(i)
        ticket = i if (draw >> 7) % 10 < 6 else -1
        return Event(a, k, u, event_type, ticket, date)

    # ----- search -----------------------------------------------------------------------------

    def initial_range(self, flt: FeedFilter) -> tuple[int, int]:
        """Indexes [lo, hi) of initial events whose date can satisfy after/before."""
        lo, hi = 0, self.size
        if flt.after is not None:
            # One step of slack either side: the warp's integer rounding.
            after = self._warp.inverse(flt.after - self.base - MARGIN)
            lo = max(lo, (after - self.window) // self.step - 1)
        if flt.before is not None:
            before = self._warp.inverse(flt.before - self.base + MARGIN)
            hi = min(hi, max(0, before // self.step + 2))
        return min(lo, self.size), hi

    def server_order(self, lo: int, hi: int) -> Sequence[int]:
        """The initial events of the index range ``[lo, hi)`` in the feed's server order."""
        if self.order == "near":
            return range(lo, hi)
        with self._lock:
            if (cached := self._orders.get((lo, hi))) is not None:
                self._orders.move_to_end((lo, hi))
                return cached
        if hi - lo >= WIDE_RANGE * self.size:
            # The same order as sorting the range itself: the sorts are stable, ties in index order.
            ordered = [i for i in self._whole() if lo <= i < hi]
        else:
            ordered = self._sorted(lo, hi)
        with self._lock:
            self._orders[(lo, hi)] = ordered
            while len(self._orders) > ORDER_CACHE:
                self._orders.popitem(last=False)
        return ordered

    def _sorted(self, lo: int, hi: int) -> list[int]:
        """The initial events ``[lo, hi)`` sorted into the server order (not ``near``)."""
        if self.order == "none":
            return sorted(range(lo, hi), key=lambda i: self.seed.mix(ORDER_TAG, i))
        ordered = [i for _, i in sorted((self.event(i).date, i) for i in range(lo, hi))]
        if self.order == "descending":
            ordered.reverse()
        return ordered

    def _whole(self) -> list[int]:
        """Every initial event in the server order, sorted once (concurrent wide searches wait
        for the first to sort it)."""
        with self._whole_lock:
            if self._whole_order is None:
                self._whole_order = self._sorted(0, self.size)
            return self._whole_order

    def scan(
        self, flt: FeedFilter, start: int, limit: int, budget: int | None = None
    ) -> tuple[list[Event], int | None]:
        """Matching events from position `start` in server order, at most `limit` of them.

        Positions count the search's index range in server order (``server_order``), then
        the events added at run time. Returns the events and the position to resume from, or
        None when nothing is left. Once something matched, stops early (a short page, with a
        resume position) after examining `budget` events, so a sparse search of a huge feed
        answers in bounded time; a page is never empty unless the search is over.
        """
        lo, hi = self.initial_range(flt)
        order = self.server_order(lo, hi) if lo < hi else range(0)
        initial = len(order)
        found: list[Event] = []
        examined = 0
        position = start
        while position < initial + len(self._added):
            if len(found) >= limit or (found and budget is not None and examined >= budget):
                return found, position
            i = order[position] if position < initial else self.size + position - initial
            e = self.event(i)
            examined += 1
            position += 1
            if flt.matches(e):
                found.append(e)
        return found, None

    def make_filter(
        self,
        *,
        after: str | datetime | int | None = None,
        before: str | datetime | int | None = None,
        app_ids: Iterable[str] | None = None,
        app_entitlement_refs: Iterable[tuple[str, str]] | None = None,
        app_user_refs: Iterable[tuple[str, str]] | None = None,
        user_ids: Iterable[str] | None = None,
    ) -> FeedFilter:
        """Resolve ids to indexes; an empty or absent list means no filter (protobuf)."""

        def resolve(items: Iterable[Any] | None, lookup: Any) -> frozenset[Any] | None:
            values = list(items or ())
            if not values:
                return None
            return frozenset(r for r in (lookup(v) for v in values) if r is not None)

        def app_user(ref: tuple[str, str]) -> tuple[int, int] | None:
            found = self.users.app_user(ref[1])
            return found if found and self.catalog.feed_apps[found[0]].id == ref[0] else None

        return FeedFilter(
            after=None if after is None else to_ns(after),
            before=None if before is None else to_ns(before),
            apps=resolve(app_ids, self.catalog.feed_app_index),
            entitlements=resolve(
                app_entitlement_refs, lambda r: self.catalog.entitlement_index(*r)
            ),
            app_users=resolve(app_user_refs, app_user),
            users=resolve(user_ids, self.users.index),
        )

    def feed_entries(
        self,
        *,
        after: str | datetime | int | None = None,
        before: str | datetime | int | None = None,
        app_ids: Sequence[str] | None = None,
        app_entitlement_refs: Sequence[tuple[str, str]] | None = None,
        app_user_refs: Sequence[tuple[str, str]] | None = None,
        user_ids: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Ground truth: the raw feed entries a full traversal returns, in server order."""
        flt = self.make_filter(
            after=after,
            before=before,
            app_ids=app_ids,
            app_entitlement_refs=app_entitlement_refs,
            app_user_refs=app_user_refs,
            user_ids=user_ids,
        )
        found, _ = self.scan(flt, 0, self.total + 1)
        return [{"feed": self.feed_object(e)} for e in found]

    # ----- ground truth of access -------------------------------------------------------------

    def intervals(self) -> list[lifecycle.Interval]:
        """Every grant interval the feed so far implies (the lifecycle rules)."""
        return lifecycle.intervals(self.feed_object(self.event(i)) for i in range(self.total))

    def grants_at(self, at: str | datetime | int | None = None) -> list[lifecycle.Interval]:
        """The intervals holding at an instant (None: now, i.e. those not revoked)."""
        return lifecycle.held_at(self.intervals(), None if at is None else to_ns(at))

    # ----- expanded objects (protobuf Any style) ----------------------------------------------

    def expanded_app(self, a: int) -> dict[str, Any]:
        app = self.catalog.feed_apps[a]
        return {"@type": TYPE_PREFIX + "app.v1.App", "id": app.id, "displayName": app.display_name}

    def expanded_entitlement(self, a: int, k: int) -> dict[str, Any]:
        app = self.catalog.feed_apps[a]
        name = app.entitlement_names[k]
        return {
            "@type": TYPE_PREFIX + "app.v1.AppEntitlement",
            "id": app.entitlement_ids[k],
            "appId": app.id,
            "displayName": name,
            "slug": name.replace(" ", "-"),
        }

    def expanded_app_user(self, a: int, u: int) -> dict[str, Any]:
        first, last = self.users.person(u)
        return {
            "@type": TYPE_PREFIX + "app.v1.AppUser",
            "id": self.users.app_user_id(a, u),
            "appId": self.catalog.feed_apps[a].id,
            "identityUserId": self.users.ids[u],
            "email": self.users.email(u),
            "displayName": f"{first} {last}",
        }

    def ticket_id(self, t: int) -> str:
        return self.seed.id("ticket", t)

    def numeric_ticket_id(self, t: int) -> str:
        """The task's numericId (an int64 as a string)."""
        return str(1000 + t)

    def expanded_ticket(self, t: int) -> dict[str, Any]:
        rng = random.Random(f"{self.seed.value}:ticket:{t}")
        created = self.base + rng.randrange(max(self.end_ns - self.base, 1))
        return {
            "@type": TYPE_PREFIX + "ticket.v1.Ticket",
            "id": self.ticket_id(t),
            "displayName": f"Access request #{1000 + t}",
            "state": rng.choice(TICKET_STATES),
            "createdAt": format_ns(precise(created, rng.choice(DIGITS))),
        }


# ----- POST /api/v1/grants/feed -------------------------------------------------------------

# JSON name -> proto name; protobuf JSON parsers accept either spelling.
FIELDS = {
    "after": "after",
    "before": "before",
    "appEntitlementRefs": "app_entitlement_refs",
    "appRefs": "app_refs",
    "appUserRefs": "app_user_refs",
    "userRefs": "user_refs",
    "expandMask": "expand_mask",
    "pageSize": "page_size",
    "pageToken": "page_token",
}
REF = {"id": "id"}
SCOPED_REF = {"appId": "app_id", "id": "id"}
# expandMask.paths the service accepts: `*`, or the id fields naming each related object (as on
# its other endpoints); any other path is a 400.
EXPAND_PATHS = ("app_id", "app_entitlement_id", "app_user_id", "ticket_id")
SCAN_BUDGET = 250_000  # events examined per page before answering a short page with a token


def _expand_paths(value: Any) -> list[str]:
    mask = _fields(value, {"paths": "paths"}, "expandMask")
    paths = mask.get("paths", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise bad_request("expandMask.paths must be an array of strings")
    for path in paths:
        if path != "*" and path not in EXPAND_PATHS:
            raise bad_request(f'unknown expandMask path "{path}"')
    return list(EXPAND_PATHS) if "*" in paths else sorted(set(paths))


def search_grant_feed(
    feed: GrantFeed, tokens: PageTokens, body: bytes, *, emit_unpopulated: bool = False
) -> dict[str, Any]:
    """One page of a feed search; with ``emit_unpopulated`` unset fields are sent empty."""
    request = body_object(body)
    req = _fields(request, FIELDS, "request")
    after = _timestamp(req["after"], "after") if "after" in req else None
    before = _timestamp(req["before"], "before") if "before" in req else None
    ent_refs = _refs(req.get("appEntitlementRefs", []), "appEntitlementRefs", SCOPED_REF)
    app_refs = _refs(req.get("appRefs", []), "appRefs", REF)
    user_refs = _refs(req.get("appUserRefs", []), "appUserRefs", SCOPED_REF)
    person_refs = _refs(req.get("userRefs", []), "userRefs", REF)
    paths = _expand_paths(req["expandMask"]) if "expandMask" in req else []
    page_size = clamp_page_size(_int32(req.get("pageSize", 0), "pageSize"))
    page_token = _string(req.get("pageToken", ""), "pageToken")

    refs = [sorted(set(r)) for r in (ent_refs, app_refs, user_refs, person_refs)]
    digest = digest_of(["feed", after, before, refs, paths])
    start = tokens.decode(page_token, digest) if page_token else 0
    flt = feed.make_filter(
        after=after,
        before=before,
        app_ids=[r[0] for r in app_refs],
        app_entitlement_refs=[(r[0], r[1]) for r in ent_refs],
        app_user_refs=[(r[0], r[1]) for r in user_refs],
        user_ids=[r[0] for r in person_refs],
    )
    found, resume = feed.scan(flt, start, page_size, SCAN_BUDGET)
    entries, expanded = _expand(feed, found, paths)
    page = {
        "list": entries or None,
        "expanded": expanded or None,
        "nextPageToken": "" if resume is None else tokens.encode(resume, digest),
    }
    return unpopulated.feed_page(page) if emit_unpopulated else page


def _expand(
    feed: GrantFeed, events: list[Event], paths: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Serialise a page; each expanded object appears once per page, pointed at by path."""
    expanded: list[dict[str, Any]] = []
    where: dict[tuple[Any, ...], str] = {}

    def point(key: tuple[Any, ...], make: Callable[..., dict[str, Any]]) -> str:
        """Path of the object `make(*key[1:])`, expanding it on first use in this page."""
        if key not in where:
            where[key] = f"$.expanded[{len(expanded)}]"
            expanded.append(make(*key[1:]))
        return where[key]

    entries = []
    for e in events:
        entry: dict[str, Any] = {}
        if "app_id" in paths:
            entry["appPath"] = point(("app", e.app), feed.expanded_app)
        if "app_user_id" in paths:
            entry["appUserPath"] = point(("app_user", e.app, e.user), feed.expanded_app_user)
        if "app_entitlement_id" in paths:
            key = ("entitlement", e.app, e.entitlement)
            entry["entitlementPath"] = point(key, feed.expanded_entitlement)
        if "ticket_id" in paths and e.ticket >= 0:
            entry["ticketPath"] = point(("ticket", e.ticket), feed.expanded_ticket)
        entry["feed"] = feed.feed_object(e)
        entries.append(entry)
    return entries, expanded
