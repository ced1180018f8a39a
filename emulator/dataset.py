"""The emulated tenant's data, deterministic from a seed, and its ground truth for tests.

Grant feed events are never stored: event i is decoded from a hash of (seed, i), and its date
is `base + i*step + jitter` with bounded jitter. That keeps 1,000,000 events free in memory,
keeps neighbours out of date order (the feed is not sorted), and still lets a search with
`after`/`before` jump straight to the index range that can match.

Events tell coherent grant lifecycles (the models' tests need histories, not noise), still
decoded in O(1) per event: position i belongs to lane `i % lanes`, round `i // lanes`; a
lane is a run of segments, each one grant's history, so a grant's events are `lanes` steps
apart in time. A segment's rounds come in pairs ("units"): a toggle unit flips the grant and
flips it back (ADDED then REMOVED, or REMOVED then ADDED for a grant held since before the
feed), a noise unit changes nothing (unspecified or unknown-future types, a redundant ADDED or
REMOVED). So the state before any round is known from its own unit alone. A noise slot at an
even position may take the next position's noise slot as its twin: the same grant at the
same instant with the opposite type (REMOVED and ADDED together). The lifecycle rules
themselves are applied in emulator/lifecycle.py, which is the ground truth.

Dates are anchored on `end`: every initial event lies in the `span_days` before it. The
default `end` is the start of the previous hour (UTC), so "the last 30 days" has data, events
added at run time still lie in the past, and two Datasets built in the same hour agree; pass
`end` for full reproducibility.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from emulator import lifecycle
from emulator.timefmt import NS, format_ns, precise, to_ns
from emulator.users import UserContext, email_of, make_user, person

TYPE_PREFIX = "type.googleapis.com/c1.api."
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
DIGITS = (0, 3, 6, 9)
TICKET_STATES = ("TICKET_STATE_OPEN", "TICKET_STATE_RESOLVED", "TICKET_STATE_WONT_DO")
MARGIN = NS  # how far precision rounding can move a generated date
MASK64 = (1 << 64) - 1
FEATURED_PER_ENTITLEMENT = 4  # excluded users whose excluded grant is held at the end
NOISE, TOGGLE = 0, 1


def _mix(key: int, tag: int, x: int) -> int:
    """A 32-bit hash of (key, tag, x): one multiply-xorshift round, cheap enough to run several
    times per event (lane and segment parameters); blake2b stays for per-event draws."""
    y = (x * 0x9E3779B97F4A7C15 + tag * 0xD1B54A32D192ED03 + key) & MASK64
    y = (y ^ (y >> 29)) * 0xBF58476D1CE4E5B9 & MASK64
    return (y ^ (y >> 32)) & 0xFFFFFFFF


# How the initial events' dates spread over the span: knots (share of events, share of time).
# "skewed" is a real tenant's year: a sparse past (20% of the events over 60% of the time), one
# busy burst (30% in 2%, a few days of a half-year span) and a busier recent stretch.
DISTRIBUTIONS: dict[str, tuple[tuple[float, float], ...]] = {
    "uniform": ((0.0, 0.0), (1.0, 1.0)),
    "skewed": ((0.0, 0.0), (0.2, 0.6), (0.5, 0.62), (1.0, 1.0)),
}


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


@dataclass(frozen=True)
class App:
    id: str
    display_name: str
    entitlement_ids: tuple[str, ...]
    entitlement_names: tuple[str, ...]


def _end_default() -> datetime:
    """The start of the previous hour: stable for an hour, and it leaves at least an hour
    between the last initial event and now for events added at run time."""
    now = datetime.now(UTC)
    return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


class Dataset:
    """Apps, entitlements, users, app users, tickets, grant feed events, exclusions."""

    def __init__(
        self,
        seed: int = 1,
        events: int = 20_000,
        apps: int = 8,
        users: int = 2_000,
        exclusion_entitlements: int = 40,
        max_exclusions: int = 300,
        *,
        end: datetime | str | None = None,
        span_days: int = 180,
        catalog_apps: int = 120,
        catalog_entitlements: int | None = None,
        distribution: str = "uniform",
    ) -> None:
        if apps < 1 or users < 1 or events < 0 or span_days < 1:
            raise ValueError("need apps >= 1, users >= 1, events >= 0, span_days >= 1")
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {', '.join(DISTRIBUTIONS)}")
        self.distribution = distribution
        self.seed = seed
        self.size = events
        self.end_ns = to_ns(end if end is not None else _end_default())
        self._key = hashlib.blake2b(f"dataset:{seed}".encode(), digest_size=32).digest()
        self._lock = threading.Lock()
        self._build_catalog(apps, users)
        self._build_exclusions(exclusion_entitlements, max_exclusions)
        # What remove() deleted on the service since (restore() brings it back).
        self._removed_apps: set[int] = set()
        self._removed_entitlements: set[tuple[int, int]] = set()
        self._removed_users: set[int] = set()
        self._removed_exclusions: set[tuple[int, int, int]] = set()
        self._plan_lifecycles(events)
        self._build_catalog_only_apps(catalog_apps, catalog_entitlements)
        # Event i's date is base + i*step + jitter, jitter in [0, window), then rounded by
        # at most MARGIN; so the whole initial feed ends before `end`.
        span = span_days * 86_400 * NS
        self.step = max(span // max(events, 1), 1)
        self.window = 3 * self.step
        self.base = self.end_ns - events * self.step - self.window - 2 * MARGIN
        self._warp = _Warp(self.end_ns - self.base, DISTRIBUTIONS[distribution])
        self.tickets = max(20, events // 25)
        self._added: list[Event] = []  # events added at run time, in server order
        self._added_held: dict[
            tuple[int, int, int], bool
        ] = {}  # grants they touched -> held after them
        tail = range(max(0, events - 2 - (self.window + 2 * MARGIN) // self.step), events)
        self._max_date = max((self.event(i).date for i in tail), default=self.base)

    # ----- catalog -------------------------------------------------------------------------

    def _id(self, *parts: object) -> str:
        """A stable, KSUID-looking id (27 base62 chars starting with '2')."""
        digest = hashlib.blake2b(repr(parts).encode(), key=self._key, digest_size=24).digest()
        n = int.from_bytes(digest, "little")
        chars = ["2"]
        for _ in range(26):
            n, r = divmod(n, 62)
            chars.append(BASE62[r])
        return "".join(chars)

    def _build_catalog(self, n_apps: int, n_users: int) -> None:
        rng = random.Random(f"{self.seed}:catalog")
        nouns = ("Okta", "GitHub", "Salesforce", "AWS", "Slack", "Jira", "Snowflake", "Zoom")
        roles = ("admin", "read-only", "billing", "developer", "owner", "auditor", "support")
        self._apps: list[App] = []
        for a in range(n_apps):
            count = rng.randint(3, 12)
            ent_ids = [self._id("entitlement", a, k) for k in range(count)]
            if a == 1:
                # Entitlement ids are unique only within their app: make one collide.
                ent_ids[0] = self._apps[0].entitlement_ids[0]
            names = tuple(f"{roles[k % len(roles)]} {k // len(roles) + 1}" for k in range(count))
            name = f"{nouns[a % len(nouns)]} {a // len(nouns) + 1}"
            self._apps.append(App(self._id("app", a), name, tuple(ent_ids), names))
        self._app_index = {app.id: a for a, app in enumerate(self._apps)}
        self._ent_index = {
            (app.id, ent): (a, k)
            for a, app in enumerate(self._apps)
            for k, ent in enumerate(app.entitlement_ids)
        }
        self.user_ids: list[str] = [self._id("user", u) for u in range(n_users)]
        self._user_index = {uid: u for u, uid in enumerate(self.user_ids)}
        self._app_users = [
            [self._id("appuser", a, u) for u in range(n_users)] for a in range(n_apps)
        ]
        self._app_user_index = {
            auid: (a, u) for a, ids in enumerate(self._app_users) for u, auid in enumerate(ids)
        }

    def _build_catalog_only_apps(self, total_apps: int, total_entitlements: int | None) -> None:
        """Apps of the tenant's catalog that no grant event names (a real tenant has many):
        the catalog then holds ``total_apps`` apps. The first has no entitlement, the second
        several pages of them (230); with ``total_entitlements`` the others share what makes
        the catalog's entitlements add up to it, else each has one to five. Every tenth of
        their entitlements has automation on (and no exclusion)."""
        extra = max(0, total_apps - len(self._apps))
        rng = random.Random(f"{self.seed}:catalog-only")
        counts = [0, 230][:extra]
        rest = extra - len(counts)
        if total_entitlements is not None and rest:
            left = max(0, total_entitlements - sum(len(a.entitlement_ids) for a in self._apps))
            left = max(0, left - sum(counts))
            counts += [left // rest + (1 if n < left % rest else 0) for n in range(rest)]
        else:
            counts += [rng.randint(1, 5) for _ in range(rest)]
        roles = ("admin", "member", "viewer", "editor", "billing")
        self._catalog_only: list[App] = []
        for n, count in enumerate(counts):
            a = len(self._apps) + n
            ids = tuple(self._id("catalog-entitlement", a, k) for k in range(count))
            names = tuple(f"{roles[k % len(roles)]} {k // len(roles) + 1}" for k in range(count))
            self._catalog_only.append(App(self._id("app", a), f"Catalog app {n + 1}", ids, names))
        self._catalog_index = {app.id: a for a, app in enumerate(self.catalog_apps)}

    @property
    def catalog_apps(self) -> list[App]:
        """Every app of the tenant, in the order the service lists them: those of the feed,
        then those no grant event names."""
        return self._apps + self._catalog_only

    def catalog_app(self, app_id: str) -> tuple[int, App] | None:
        """(position in the catalog, app) of an app id; None if the tenant has no such app."""
        position = self._catalog_index.get(app_id)
        return None if position is None else (position, self.catalog_apps[position])

    def is_automated(self, position: int, k: int) -> bool:
        """Whether automation is on for entitlement ``k`` of the catalog's app ``position``:
        every entitlement chosen for exclusions (with or without any), every tenth of the
        others."""
        if position < len(self._apps):
            return (position, k) in self._exclusions or (position + k) % 10 == 3
        return (7 * position + k) % 10 == 0

    @property
    def automated_entitlements(self) -> list[tuple[str, str]]:
        """Ground truth: every (app id, entitlement id) with automation on, in catalog order
        (removed ones left out)."""
        return [
            (app.id, ent)
            for position, app in enumerate(self.catalog_apps)
            for k, ent in enumerate(app.entitlement_ids)
            if self.is_automated(position, k) and self.entitlement_exists(position, k)
        ]

    @property
    def apps(self) -> list[str]:
        return [app.id for app in self._apps]

    @property
    def entitlements(self) -> list[tuple[str, str]]:
        return [(app.id, ent) for app in self._apps for ent in app.entitlement_ids]

    def app_user_id(self, app: int, user: int) -> str:
        return self._app_users[app][user]

    def user_of_app_user(self, app_user_id: str) -> str:
        return self.user_ids[self._app_user_index[app_user_id][1]]

    def user_context(self) -> UserContext:
        return UserContext(self.seed, self.user_ids, self.apps, self.app_user_id, self.end_ns)

    def user(self, user_id: str) -> dict[str, Any]:
        """The raw User object (KeyError for an unknown id)."""
        return make_user(self.user_context(), self._user_index[user_id])

    def entitlement_index(self, app_id: str, entitlement_id: str) -> tuple[int, int] | None:
        """(app, entitlement) indexes of an entitlement of the feed's apps."""
        return self._ent_index.get((app_id, entitlement_id))

    def catalog_entitlement(self, app_id: str, entitlement_id: str) -> tuple[int, int] | None:
        """(position in the catalog, entitlement index) of an app entitlement of the catalog,
        removed or not (ids are per app); for the feed's apps the same as entitlement_index."""
        found = self.catalog_app(app_id)
        if found is None or entitlement_id not in found[1].entitlement_ids:
            return None
        return found[0], found[1].entitlement_ids.index(entitlement_id)

    def has_entitlement(self, app_id: str, entitlement_id: str) -> bool:
        """Whether the tenant's catalog has this app entitlement now (not removed)."""
        index = self.catalog_entitlement(app_id, entitlement_id)
        return index is not None and self.entitlement_exists(*index)

    def current_apps(self) -> list[int]:
        """Catalog positions of the apps the service lists now (removed ones left out)."""
        return [p for p in range(len(self.catalog_apps)) if p not in self._removed_apps]

    def current_entitlements(self, position: int) -> list[int]:
        """Indexes of the entitlements the catalog's app at ``position`` lists now."""
        count = len(self.catalog_apps[position].entitlement_ids)
        return [k for k in range(count) if self.entitlement_exists(position, k)]

    # ----- expanded objects (protobuf Any style) --------------------------------------------

    def expanded_app(self, a: int) -> dict[str, Any]:
        app = self._apps[a]
        return {"@type": TYPE_PREFIX + "app.v1.App", "id": app.id, "displayName": app.display_name}

    def expanded_entitlement(self, a: int, k: int) -> dict[str, Any]:
        app = self._apps[a]
        name = app.entitlement_names[k]
        return {
            "@type": TYPE_PREFIX + "app.v1.AppEntitlement",
            "id": app.entitlement_ids[k],
            "appId": app.id,
            "displayName": name,
            "slug": name.replace(" ", "-"),
        }

    def expanded_app_user(self, a: int, u: int) -> dict[str, Any]:
        first, last = person(self.seed, u)
        return {
            "@type": TYPE_PREFIX + "app.v1.AppUser",
            "id": self._app_users[a][u],
            "appId": self._apps[a].id,
            "identityUserId": self.user_ids[u],
            "email": email_of(self.seed, u),
            "displayName": f"{first} {last}",
        }

    def ticket_id(self, t: int) -> str:
        return self._id("ticket", t)

    def expanded_ticket(self, t: int) -> dict[str, Any]:
        rng = random.Random(f"{self.seed}:ticket:{t}")
        created = self.base + rng.randrange(max(self.end_ns - self.base, 1))
        return {
            "@type": TYPE_PREFIX + "ticket.v1.Ticket",
            "id": self.ticket_id(t),
            "displayName": f"Access request #{1000 + t}",
            "state": rng.choice(TICKET_STATES),
            "createdAt": format_ns(precise(created, rng.choice(DIGITS))),
        }

    # ----- automation exclusions ------------------------------------------------------------

    def _build_exclusions(self, wanted: int, max_size: int) -> None:
        """Pick exclusion entitlements round-robin over apps, with deliberately varied sizes.

        The first has as many exclusions as allowed (multi-page at page size 100 when the
        limits allow), the second none, the fourth exactly one default page (25); all
        non-empty lists share one user, so the same user is excluded on several entitlements.
        """
        rng = random.Random(f"{self.seed}:exclusions")
        per_app = [list(range(len(app.entitlement_ids))) for app in self._apps]
        chosen: list[tuple[int, int]] = []
        depth = 0
        while len(chosen) < wanted and depth < 12:
            for a, ents in enumerate(per_app):
                if depth < len(ents) and len(chosen) < wanted:
                    chosen.append((a, ents[depth]))
            depth += 1
        n_users = len(self.user_ids)
        cap = min(max_size, n_users)
        shared = rng.randrange(n_users)
        self._exclusions: dict[tuple[int, int], list[int]] = {}
        for n, key in enumerate(chosen):
            size = {0: cap, 1: 0, 2: min(3, cap), 3: min(25, cap)}.get(n, rng.randint(0, cap))
            members = rng.sample(range(n_users), size)
            if members and shared not in members:
                members[rng.randrange(size)] = shared
            self._exclusions[key] = members

    @property
    def exclusion_entitlements(self) -> list[tuple[str, str]]:
        """The app entitlements chosen to have exclusions (removed ones included: a client
        configured with them meets the 404)."""
        return [(self._apps[a].id, self._apps[a].entitlement_ids[k]) for a, k in self._exclusions]

    def exclusion_members(self, a: int, k: int) -> list[int]:
        """User indexes excluded on entitlement (a, k) in server order; [] if none/unknown or
        removed (see remove())."""
        if not self.entitlement_exists(a, k):
            return []
        members = self._exclusions.get((a, k), [])
        if not (self._removed_users or self._removed_exclusions):
            return members
        return [
            u
            for u in members
            if u not in self._removed_users and (a, k, u) not in self._removed_exclusions
        ]

    # ----- removals between runs ------------------------------------------------------------

    def entitlement_exists(self, a: int, k: int) -> bool:
        """False once the app or the entitlement was removed (its endpoints answer 404)."""
        return a not in self._removed_apps and (a, k) not in self._removed_entitlements

    def remove(
        self,
        *,
        app_id: str | None = None,
        app_entitlement_id: str | None = None,
        user_id: str | None = None,
    ) -> None:
        """Delete something on the service, as an administrator would between two runs:

        - ``app_id``, ``app_entitlement_id`` and ``user_id``: one automation exclusion;
        - ``user_id`` alone: a user (gone from every exclusion list);
        - ``app_id`` and ``app_entitlement_id``: an app entitlement (its exclusions endpoint
          answers 404);
        - ``app_id`` alone: an app (every entitlement of it answers 404).

        The grant feed is history and keeps every event. ``restore()`` takes the same ids."""
        self._set_removed(app_id, app_entitlement_id, user_id, removed=True)

    def restore(
        self,
        *,
        app_id: str | None = None,
        app_entitlement_id: str | None = None,
        user_id: str | None = None,
    ) -> None:
        """Undo remove() with the same ids: the exclusion, user, entitlement or app is back."""
        self._set_removed(app_id, app_entitlement_id, user_id, removed=False)

    def _set_removed(
        self, app_id: str | None, entitlement_id: str | None, user_id: str | None, *, removed: bool
    ) -> None:
        store: set[Any]
        target: Any
        if app_id is not None and entitlement_id is not None:
            if (index := self.catalog_entitlement(app_id, entitlement_id)) is None:
                raise ValueError(f"no app entitlement {entitlement_id!r} in app {app_id!r}")
            if user_id is None:
                store, target = self._removed_entitlements, index
            else:
                if (u := self._user_index.get(user_id)) is None:
                    raise ValueError(f"no user {user_id!r}")
                if u not in self._exclusions.get(index, []):
                    raise ValueError(f"user {user_id!r} is not excluded on {entitlement_id!r}")
                store, target = self._removed_exclusions, (*index, u)
        elif app_id is not None and user_id is None:
            if (found := self.catalog_app(app_id)) is None:
                raise ValueError(f"no app {app_id!r}")
            store, target = self._removed_apps, found[0]
        elif user_id is not None and app_id is None and entitlement_id is None:
            if (u := self._user_index.get(user_id)) is None:
                raise ValueError(f"no user {user_id!r}")
            store, target = self._removed_users, u
        else:
            raise ValueError(
                "name an exclusion (app_id, app_entitlement_id, user_id), a user (user_id), "
                "an app entitlement (app_id, app_entitlement_id) or an app (app_id)"
            )
        with self._lock:
            if removed:
                store.add(target)
            else:
                store.discard(target)

    def exclusion_entry(self, a: int, k: int, u: int) -> dict[str, Any]:
        app = self._apps[a]
        return {
            "appEntitlementId": app.entitlement_ids[k],
            "appId": app.id,
            "appUserId": self._app_users[a][u],
            "user": make_user(self.user_context(), u),
        }

    def exclusion_entries(self, app_id: str, entitlement_id: str) -> list[dict[str, Any]]:
        """Ground truth: the raw exclusion entries of one app entitlement, in server order
        (none for an entitlement of an app no grant event names)."""
        if not self.has_entitlement(app_id, entitlement_id):
            raise KeyError((app_id, entitlement_id))
        index = self.entitlement_index(app_id, entitlement_id)
        if index is None:
            return []
        return [self.exclusion_entry(*index, u) for u in self.exclusion_members(*index)]

    # ----- grant feed -----------------------------------------------------------------------

    @property
    def total(self) -> int:
        """Events in server order so far (initial plus added)."""
        return self.size + len(self._added)

    # ----- grant lifecycles -----------------------------------------------------------------

    def _plan_lifecycles(self, events: int) -> None:
        """Lanes, segment lengths and the grant numbering (see the module docstring).

        Grant number x = entitlement (flattened) * users + user. Segment q = (segment index *
        lanes + lane) maps to a grant through an affine bijection, so no grant gets two
        overlapping histories; the first segments are reserved for excluded users on the
        entitlement they are excluded from, and end held, so "excluded yet holding" has
        answers. Segments are made long enough that they stay fewer than the grants.
        """
        flat = [(a, k) for a, app in enumerate(self._apps) for k in range(len(app.entitlement_ids))]
        self._flat_entitlements = flat
        n_users = len(self.user_ids)
        grants = len(flat) * n_users
        self._grants = grants
        self._k64 = int.from_bytes(self._key[:8], "little")
        self._seg_min = max(2, -(-3 * events // grants))
        rounds = 3 * self._seg_min + 9
        self._lanes = max(1, -(-events // rounds))
        multiplier = _mix(self._k64, 10, 0) % grants | 1
        while math.gcd(multiplier, grants) != 1:
            multiplier += 1
        self._multiplier, self._offset = multiplier, _mix(self._k64, 11, 0) % grants
        inverse = pow(multiplier, -1, grants)
        flat_index = {ent: n for n, ent in enumerate(flat)}
        featured = [
            flat_index[key] * n_users + u
            for key, members in self._exclusions.items()
            for u in members[:FEATURED_PER_ENTITLEMENT]
        ][: self._lanes]
        # tau: a permutation of segment numbers with pi(tau(i)) = featured[i].
        wanted = [(x - self._offset) * inverse % grants for x in featured]
        self._tau = dict(enumerate(wanted))
        taken, small = set(wanted), range(len(wanted))
        freed = sorted(set(small) - taken)
        self._tau.update(zip(sorted(taken - set(small)), freed, strict=True))
        self._featured = len(featured)
        max_rounds = -(-events // self._lanes) if events else 0
        if max(0, (max_rounds - 1) // self._seg_min + 1) * self._lanes > grants:
            raise ValueError("more grant histories than grants: add users or entitlements")

    def _grant(self, segment: int) -> tuple[int, int, int]:
        """(app, entitlement, user) of a segment number."""
        x = (self._multiplier * self._tau.get(segment, segment) + self._offset) % self._grants
        e, u = divmod(x, len(self.user_ids))
        a, k = self._flat_entitlements[e]
        return a, k, u

    def _slot(self, p: int) -> tuple[int, int, bool]:
        """Position p's own lane occurrence: (segment, NOISE or TOGGLE, held before it)."""
        lane, rnd = p % self._lanes, p // self._lanes
        seg_len = self._seg_min + _mix(self._k64, 1, lane) % (self._seg_min + 6)
        seg, offset = divmod(rnd, seg_len)
        q = seg * self._lanes + lane
        featured = q < self._featured
        held0 = featured or _mix(self._k64, 2, q) % 4 == 0
        unit, half = divmod(offset, 2)
        if featured and seg_len % 2 and unit == seg_len // 2:
            kind = NOISE  # a featured grant must end held: no half-done toggle at its end
        else:
            kind = TOGGLE if _mix(self._k64, 3, q * 4096 + unit) % 100 < 82 else NOISE
        return q, kind, held0 if half == 0 else held0 ^ (kind == TOGGLE)

    def _twinned(self, p: int, draw: int) -> bool:
        """Whether even position p (a noise slot) takes position p+1 as its same-instant twin."""
        return (
            p % 2 == 0
            and p + 1 < self.size
            and draw == 0
            and self._slot(p)[1] == NOISE
            and self._slot(p + 1)[1] == NOISE
        )

    def _draws(self, i: int) -> tuple[int, int, int, int, int, int]:
        """Per-position randomness: (kind, ticket?, ticket, digits, twin, rest)."""
        digest = hashlib.blake2b(i.to_bytes(8, "little"), key=self._key, digest_size=32).digest()
        h = int.from_bytes(digest, "little")
        h, kind = divmod(h, 1000)
        h, has_ticket = divmod(h, 10)
        h, ticket = divmod(h, self.tickets)
        h, digits = divmod(h, 4)
        h, twin = divmod(h, 3)
        return kind, has_ticket, ticket, digits, twin, h

    def event(self, i: int) -> Event:
        if i >= self.size:
            return self._added[i - self.size]
        kind_draw, has_ticket, ticket, digits, twin_draw, h = self._draws(i)
        ticket = ticket if has_ticket < 6 else -1
        q, kind, held = self._slot(i)
        if i % 2 and kind == NOISE and self._twinned(i - 1, self._draws(i - 1)[4]):
            partner = self.event(i - 1)
            opposite = (
                lifecycle.ADDED if partner.event_type == lifecycle.REMOVED else lifecycle.REMOVED
            )
            return partner._replace(event_type=opposite, ticket=ticket)
        a, k, u = self._grant(q)
        twinned = kind == NOISE and self._twinned(i, twin_draw)
        if kind == TOGGLE or twinned:
            event_type = lifecycle.REMOVED if held else lifecycle.ADDED
        elif kind_draw < 400:
            event_type = lifecycle.UNSPECIFIED
        elif kind_draw < 600:
            event_type = "GRANT_EVENT_TYPE_MODIFIED"  # newer than the spec: must be tolerated
        else:  # redundant: changes nothing
            event_type = lifecycle.ADDED if held else lifecycle.REMOVED
        # A twin partner's date must also lie in position i+1's range: it shares it.
        jitter = self.step + h % (self.window - self.step) if twinned else h % self.window
        date = precise(self.base + self._warp(i * self.step + jitter), DIGITS[digits])
        return Event(a, k, u, event_type, ticket, date)

    def _continue_lifecycle(self, i: int, date: int) -> Event:
        """An event added at run time: the next step of some lane's latest grant."""
        lane = _mix(self._k64, 4, i) % self._lanes
        if lane < self.size:
            last = lane + (self.size - 1 - lane) // self._lanes * self._lanes
            q, kind, held = self._slot(last)
            held ^= kind == TOGGLE
        else:
            q, held = lane, False
        a, k, u = self._grant(q)
        grant = (a, k, u)
        held = self._added_held.get(grant, held)
        draw = _mix(self._k64, 5, i)
        if draw % 100 < 85:
            event_type = lifecycle.REMOVED if held else lifecycle.ADDED
            self._added_held[grant] = not held
        elif draw % 100 < 93:
            event_type = lifecycle.UNSPECIFIED
        else:
            event_type = "GRANT_EVENT_TYPE_MODIFIED"
        ticket = (draw >> 11) % self.tickets if (draw >> 7) % 10 < 6 else -1
        return Event(a, k, u, event_type, ticket, date)

    def feed_object(self, e: Event) -> dict[str, Any]:
        app = self._apps[e.app]
        feed = {
            "appEntitlementId": app.entitlement_ids[e.entitlement],
            "appId": app.id,
            "appUserId": self._app_users[e.app][e.user],
            "date": format_ns(e.date),
            "eventType": e.event_type,
        }
        if e.ticket >= 0:
            feed["ticketId"] = self.ticket_id(e.ticket)
        return feed

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

    def scan(
        self, flt: FeedFilter, start: int, limit: int, budget: int | None = None
    ) -> tuple[list[Event], int | None]:
        """Matching events from position `start` in server order, at most `limit` of them.

        Returns the events and the position to resume from, or None when nothing is left.
        Once something matched, stops early (a short page, with a resume position) after
        examining `budget` events, so a sparse search of a huge feed answers in bounded time;
        a page is never empty unless the search is over.
        """
        total = self.total
        lo, hi = self.initial_range(flt)
        found: list[Event] = []
        examined = 0
        i = max(start, lo) if start < self.size else start
        while i < total:
            if hi <= i < self.size:
                i = self.size
                continue
            if len(found) >= limit or (found and budget is not None and examined >= budget):
                return found, i
            e = self.event(i)
            examined += 1
            i += 1
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
            found = self._app_user_index.get(ref[1])
            return found if found and self._apps[found[0]].id == ref[0] else None

        return FeedFilter(
            after=None if after is None else to_ns(after),
            before=None if before is None else to_ns(before),
            apps=resolve(app_ids, self._app_index.get),
            entitlements=resolve(app_entitlement_refs, lambda r: self._ent_index.get(tuple(r))),
            app_users=resolve(app_user_refs, app_user),
            users=resolve(user_ids, self._user_index.get),
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

    @property
    def first_date(self) -> int:
        """A lower bound of every initial event date (ns)."""
        return self.base - MARGIN

    def add_events(
        self, count: int = 0, dates: Iterable[str | datetime | int] | None = None
    ) -> int:
        """Append events: at explicit instants, then `count` more dated after everything.

        Count-based dates strictly increase from the latest existing date, 1 ms to 1 s apart
        (so thousands still fit before "now") with mixed precision, so an incremental sync
        must find exactly them. Returns the new total.
        """
        with self._lock:
            for value in dates or ():
                ns = to_ns(value)
                self._added.append(self._continue_lifecycle(self.total, ns))
                self._max_date = max(self._max_date, ns)
            for _ in range(count):
                rng = random.Random(f"{self.seed}:added:{self.total}")
                step = 1_000_000 + rng.randrange(NS)
                date = precise(self._max_date + step, rng.choice(DIGITS))
                if date <= self._max_date:  # rounding to a coarse form went back: use ns
                    date = precise(self._max_date + step, 9)
                self._added.append(self._continue_lifecycle(self.total, date))
                self._max_date = date
            return self.total

    # ----- ground truth of access -----------------------------------------------------------

    def intervals(self) -> list[lifecycle.Interval]:
        """Every grant interval the feed so far implies (emulator/lifecycle.py's rules)."""
        return lifecycle.intervals(self.feed_object(self.event(i)) for i in range(self.total))

    def grants_at(self, at: str | datetime | int | None = None) -> list[lifecycle.Interval]:
        """The intervals holding at an instant (None: now, i.e. those not revoked)."""
        return lifecycle.held_at(self.intervals(), None if at is None else to_ns(at))

    def excluded_users(self, at: str | datetime | int | None = None) -> list[dict[str, Any]]:
        """One row per automation exclusion: who, and whether they hold that entitlement."""
        held = {i[:3] for i in self.grants_at(at)}
        rows = []
        for a, k in self._exclusions:
            app = self._apps[a]
            for u in self.exclusion_members(a, k):
                user = make_user(self.user_context(), u)
                app_user = self._app_users[a][u]
                rows.append(
                    {
                        "app_id": app.id,
                        "app_entitlement_id": app.entitlement_ids[k],
                        "app_user_id": app_user,
                        "user_id": user["id"],
                        "display_name": user.get("displayName"),
                        "email": user.get("email"),
                        "status": user.get("status"),
                        "directory_status": user.get("directoryStatus"),
                        "holds_entitlement": (app.id, app.entitlement_ids[k], app_user) in held,
                    }
                )
        return rows
