"""The service's system log, and how it is listed: ``POST /api/v1/systemlog/events``
(SystemLogService.ListEvents), OCSF events of what happened in the tenant, the endpoint the
vendor says external systems synchronize the log from.

What the log holds agrees with the other concerns, so that a client's models can be checked
against what happened:

- every grant and revocation of the grant feed (API Activity: Create or Delete of a grant, by
  one of the tenant's administrators, at the feed event's instant; the feed's growth too);
- every automation exclusion of the initial lists, added by an administrator at an instant
  before the data's end, and each one removed or brought back since (``Dataset.remove`` and
  ``restore``), when that happened;
- every approval and denial of a task's policy history, by its approver, when it was made;
- ``background`` sign-ins of the directory's users (OCSF Authentication, some failed) and
  reads by the tenant's integrations (a SIEM forwarder, an HR sync, Terraform, and an earlier
  install of this tap), denser towards the end as real logs are, and in bursts: runs of
  events at one instant, as a bulk job writes them;
- live: every authenticated API request the emulator answers (a Read, by the calling API
  client, with its user agent and outcome) and every token it issues (a sign-in of that
  client), a client's own reads of the log included, at the instant each happened.

Event times are whole milliseconds (OCSF's ``time`` is epoch milliseconds). The request
(shapes of the vendor's SDK, ``SystemLogServiceListEventsRequest``): ``since`` (inclusive),
``until`` (exclusive), ``sinceEventUid``/``untilEventUid`` (after / before that event in time
order), ``sortDirection``, ``pageSize`` (at most 100), ``pageToken``; read strictly. The
undocumented choices are settings the tests run each way (emulator/service.py, ``Settings``):

- ``log_order``: ``asked`` (default) answers ``SORT_DIRECTION_ASC`` and ``_DESC`` as asked
  and an unset direction in no time order (by uid); ``ascending``, ``descending`` and
  ``unsorted`` answer that order whatever is asked, as a service ignoring the field would;
- ``log_retention_days`` (0: none): older events are not served, and a ``since`` before the
  retention is answered from its start, without an error;
- events without ``time``: the ``older`` shapes (releases before August 2026) send sign-ins
  without it (emulator/shapes.py); the ``changed`` shapes send it as RFC 3339 text.

Page tokens hold a position in the answer's order, which is recomputed for every page: events
appended inside the range being paged (a request with no ``until``) shift what later pages
hold, as on a service whose tokens are offsets.
"""

from __future__ import annotations

import bisect
import collections
import enum
import hashlib
import math
import threading
import time
from typing import Any, NamedTuple

from emulator import lifecycle, protojson
from emulator.errors import bad_request
from emulator.exclusions import Exclusions
from emulator.feed import GrantFeed
from emulator.iam import ADMINISTRATORS
from emulator.paging import PageTokens, clamp_page_size, digest_of, list_page
from emulator.seed import Seed
from emulator.tasks import Tasks
from emulator.timefmt import to_ns
from emulator.users import Users

MS = 1_000_000  # ns
DAY = 86_400 * 1_000_000_000
OCSF_VERSION = "1.3.0"
FIELDS = {
    "pageSize": "pageSize",
    "pageToken": "pageToken",
    "since": "since",
    "until": "until",
    "sinceEventUid": "sinceEventUid",
    "untilEventUid": "untilEventUid",
    "sortDirection": "sortDirection",
}
DIRECTIONS = ("SORT_DIRECTION_UNSPECIFIED", "SORT_DIRECTION_ASC", "SORT_DIRECTION_DESC")
ORDERS = ("asked", "ascending", "descending", "unsorted")
ADMINS = ADMINISTRATORS  # the tenant's administrators: the directory's first users, Super Admins
BURST = 64  # events of one background burst, at one instant
BURST_EVERY = 25  # one block of BURST background events in this many is a burst
ORDER_CACHE = 8  # ranges whose uid order is kept (one per window a client reads at once)


class Kind(enum.IntEnum):
    GRANT = 0
    REVOKE = 1
    EXCLUDE = 2
    UNEXCLUDE = 3
    APPROVE = 4
    DENY = 5
    SIGN_IN = 6
    READ = 7


# (class_uid, activity_id, operation) of each kind; OCSF class 6003 is API Activity, 3002
# Authentication. The operations are the vendor's where its API has one (its SDK names them).
WHAT = {
    Kind.GRANT: (6003, 1, "c1.api.app.v1.AppEntitlementUserBindingService/CreateGrant"),
    Kind.REVOKE: (6003, 4, "c1.api.app.v1.AppEntitlementUserBindingService/DeleteGrant"),
    Kind.EXCLUDE: (6003, 1, "c1.api.app.v1.AppEntitlements/AddAutomationExclusion"),
    Kind.UNEXCLUDE: (6003, 4, "c1.api.app.v1.AppEntitlements/RemoveAutomationExclusion"),
    Kind.APPROVE: (6003, 3, "c1.api.task.v1.TaskActionsService/Approve"),
    Kind.DENY: (6003, 3, "c1.api.task.v1.TaskActionsService/Deny"),
    Kind.SIGN_IN: (3002, 1, ""),
}
CLASSES = {
    6003: ("API Activity", 6, "Application Activity"),
    3002: ("Authentication", 3, "Identity & Access Management"),
}
ACTIVITIES = {
    6003: {1: "Create", 2: "Read", 3: "Update", 4: "Delete"},
    3002: {1: "Logon"},
}
# The tenant's integrations, reading in the background: (name, user agent, operation).
INTEGRATIONS = (
    ("SIEM forwarder", "siem-forwarder/2.1", "c1.api.systemlog.v1.SystemLogService/ListEvents"),
    ("HR sync", "hr-sync/1.4", "c1.api.user.v1.UserService/List"),
    ("Terraform", "terraform-provider-conductorone/1.2", "c1.api.app.v1.Apps/List"),
    (
        "Warehouse loader",
        "tap-accessgov/0.9.0",
        "c1.api.app.v1.AppEntitlementUserBindingService/SearchGrantFeed",
    ),
)


class Actor(NamedTuple):
    uid: str
    email: str
    name: str
    type: str  # "User" or "Service"


class LogEvent(NamedTuple):
    """Ground truth of one event (``time`` in ns, whole milliseconds)."""

    time: int
    uid: str
    kind: Kind
    actor: Actor
    operation: str
    resources: tuple[tuple[str, str], ...]  # (type, uid)
    ok: bool
    ip: str
    user_agent: str


class SystemLog:
    """Every event of the tenant's log, sorted by time (ties in the order recorded)."""

    def __init__(
        self,
        seed: Seed,
        users: Users,
        feed: GrantFeed,
        exclusions: Exclusions,
        tasks: Tasks,
        *,
        background: int,
        start_ns: int,
        end_ns: int,
    ) -> None:
        self.seed = seed
        self.users = users
        self.feed = feed
        self.exclusions = exclusions
        self.tasks = tasks
        self.background = background
        self.start_ns = start_ns
        self.end_ns = end_ns
        self._lock = threading.RLock()
        # Sorted (time, ref): ref >= 0 a background event (drawn from its number), < 0 the
        # event ``_recorded[-1 - ref]``.
        self._times: list[int] = []
        self._refs: list[int] = []
        self._recorded: list[LogEvent] = []
        self._built = False
        self._feed_seen = 0
        self._approvals_seen: set[tuple[str, int, str]] = set()
        self._approvals_stale = True  # tasks may have approvals the log has not recorded
        self._orders: collections.OrderedDict[tuple[int, int], list[int]] = (
            collections.OrderedDict()
        )
        self._uid_positions: dict[str, int] | None = None
        self._actors: dict[int, Actor] = {}
        self._integrations = [
            Actor(seed.id("service-principal", name), "", name, "Service")
            for name, _, _ in INTEGRATIONS
        ]
        self._admins = [self._user_actor(u) for u in range(min(ADMINS, len(users.ids)))]

    # ----- building ---------------------------------------------------------------------------

    def _user_actor(self, index: int) -> Actor:
        """User ``index`` of the directory as an actor (kept: building a user is slow)."""
        if (actor := self._actors.get(index)) is None:
            user = self.users.record(index)
            actor = Actor(
                user["id"], user.get("email") or "", user.get("displayName") or "", "User"
            )
            self._actors[index] = actor
        return actor

    def _build(self) -> None:
        """The initial log: background events, exclusions, then what the feed and the tasks
        hold (``_catch_up``)."""
        if self._built:
            return
        pairs = [(self._background_time(j), j) for j in range(self.background)]
        exclusions = self.exclusions
        for n, (app_id, entitlement_id) in enumerate(exclusions.entitlements):
            index = exclusions.catalog.entitlement_index(app_id, entitlement_id)
            if index is None:
                continue
            for u in exclusions.members(*index):
                draw = self.seed.mix(53, n * 100_003 + u)
                when = self.start_ns + (draw % max(1, (self.end_ns - self.start_ns) // MS)) * MS
                user_id = self.users.ids[u]
                event = self._event(
                    when,
                    Kind.EXCLUDE,
                    self._admins[draw % len(self._admins)],
                    (("AppEntitlement", f"{app_id}/{entitlement_id}"), ("User", user_id)),
                    ("exclusion", app_id, entitlement_id, user_id, when),
                )
                self._recorded.append(event)
                pairs.append((when, -len(self._recorded)))
        pairs.sort()
        self._times = [when for when, _ in pairs]
        self._refs = [ref for _, ref in pairs]
        self._built = True

    def _background_time(self, j: int) -> int:
        """When background event ``j`` happened: denser towards the end (the density grows
        linearly), and the events of a burst block at one instant."""
        block = j // BURST
        burst = block % BURST_EVERY == BURST_EVERY // 3  # every 25th block, from the 8th
        draw = self.seed.mix(55, block if burst else j)
        span_ms = max(1, (self.end_ns - self.start_ns) // MS)
        offset = int(math.sqrt(draw / 2**32) * span_ms)
        return self.start_ns + min(offset, span_ms - 1) * MS

    def _catch_up(self) -> None:
        """Record what the feed and the tasks gained since the log last looked (the feed's
        events added at run time; the approvals of tasks decided since)."""
        self._build()
        feed = self.feed
        new: list[LogEvent] = []
        if feed.total != self._feed_seen:
            for i in range(self._feed_seen, feed.total):
                e = feed.event(i)
                app = feed.catalog.feed_apps[e.app]
                app_user = feed.users.app_user_id(e.app, e.user)
                entitlement = app.entitlement_ids[e.entitlement]
                kind = Kind.GRANT if e.event_type == lifecycle.ADDED else Kind.REVOKE
                # An event added at run time is logged when it was added, not at the date
                # the feed gives it (after the feed's last, which may be an hour ago).
                when = max(e.date, feed.added_at(i) or 0)
                when -= when % MS
                new.append(
                    self._event(
                        when,
                        kind,
                        self._admins[self.seed.mix(56, i) % len(self._admins)],
                        (
                            ("AppEntitlement", f"{app.id}/{entitlement}"),
                            ("AppUser", f"{app.id}/{app_user}"),
                        ),
                        ("feed", i),
                    )
                )
            self._feed_seen = feed.total
            self._approvals_stale = True  # the feed's new tickets are tasks
        if self._approvals_stale:
            self._approvals_stale = False
            new.extend(self._new_approvals())
        self._insert(new)

    def _new_approvals(self) -> list[LogEvent]:
        """The approvals and denials of the tasks' policy histories not yet logged (read
        from the tasks as built: ``Dataset.approvals`` copies every task first). Those found
        after the first look (tasks decided, or made for the feed's new events, since) are
        logged when found, not at the instant the task gives, as the service logs a
        decision when it is made."""
        new = []
        floor = time.time_ns() if self._approvals_seen else 0
        for task in self.tasks.tasks():
            for step in (task.get("policy") or {}).get("history") or ():
                for verdict, action in (step.get("approval") or {}).items():
                    if verdict not in ("approved", "denied") or not action:
                        continue
                    when = to_ns(action[f"{verdict}At"])
                    key = (task["id"], when, verdict)
                    if key in self._approvals_seen:
                        continue
                    self._approvals_seen.add(key)
                    logged = max(when, floor)
                    new.append(
                        self._event(
                            logged - logged % MS,
                            Kind.APPROVE if verdict == "approved" else Kind.DENY,
                            self._actor_of_user(action["userId"]),
                            (("Task", task["id"]),),
                            ("approval", *key),
                        )
                    )
        return new

    def _actor_of_user(self, user_id: str) -> Actor:
        index = self.users.index(user_id)
        if index is None:
            return Actor(user_id, "", "", "User")
        return self._user_actor(index)

    def _event(
        self,
        when: int,
        kind: Kind,
        actor: Actor,
        resources: tuple[tuple[str, str], ...],
        identity: tuple[Any, ...],
        *,
        ok: bool = True,
        ip: str | None = None,
        user_agent: str = "Mozilla/5.0 (console)",
        operation: str | None = None,
    ) -> LogEvent:
        uid = self._uid(identity)
        if ip is None:
            draw = self.seed.mix(57, hash(actor.uid) & 0xFFFFFFFF)
            ip = f"10.{draw % 200 + 20}.{(draw >> 8) % 256}.{(draw >> 16) % 250 + 1}"
        return LogEvent(
            when,
            uid,
            kind,
            actor,
            (WHAT[kind][2] if kind in WHAT else "") if operation is None else operation,
            resources,
            ok,
            ip,
            user_agent,
        )

    def _uid(self, identity: tuple[Any, ...]) -> str:
        """An event's ``metadata.uid``: a UUID drawn from what the event is."""
        h = hashlib.blake2b(repr(identity).encode(), key=self.seed.key, digest_size=16).hexdigest()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _insert(self, events: list[LogEvent]) -> None:
        """Add ``events``, each after every event of its instant or earlier (the lock
        held): one at a time into place, many by sorting again."""
        if not events:
            return
        if len(events) > 64:
            self._recorded.extend(events)
            first = len(self._recorded) - len(events)
            pairs = sorted(
                [
                    *zip(self._times, self._refs, strict=True),
                    *((e.time, -1 - (first + n)) for n, e in enumerate(events)),
                ],
                key=lambda pair: pair[0],  # stable: ties keep the order recorded
            )
            self._times = [when for when, _ in pairs]
            self._refs = [ref for _, ref in pairs]
        else:
            for event in events:
                self._recorded.append(event)
                at = bisect.bisect_right(self._times, event.time)
                self._times.insert(at, event.time)
                self._refs.insert(at, -len(self._recorded))
                # An event after a range leaves its order as it was (a live event is after
                # every range a client pages with an ``until`` in the past).
                for key in [key for key in self._orders if key[1] > at]:
                    del self._orders[key]
                if self._uid_positions is not None:
                    if at == len(self._times) - 1:
                        self._uid_positions[event.uid] = at
                    else:
                        self._uid_positions = None
            return
        self._orders.clear()
        self._uid_positions = None

    def _background(self, j: int) -> LogEvent:
        """Background event ``j``: a sign-in of a directory user (a third; one in twenty
        failed) or a read by an integration."""
        when = self._background_time(j)
        draw = self.seed.mix(58, j)
        if draw % 3 == 0:
            users = self.users
            actor = self._user_actor((draw >> 4) % len(users.ids))
            return self._event(
                when, Kind.SIGN_IN, actor, (), ("background", j), ok=(draw >> 12) % 20 != 0
            )
        n = (draw >> 4) % len(INTEGRATIONS)
        _, agent, operation = INTEGRATIONS[n]
        actor = self._integrations[n]
        return self._event(
            when,
            Kind.READ,
            actor,
            (),
            ("background", j),
            ip=f"203.0.113.{n + 10}",
            user_agent=agent,
            operation=operation,
        )

    # ----- what happens at run time -----------------------------------------------------------

    def record(
        self,
        kind: Kind,
        actor: Actor,
        *,
        operation: str | None = None,
        resources: tuple[tuple[str, str], ...] = (),
        ok: bool = True,
        ip: str | None = None,
        user_agent: str = "",
        at: int | None = None,
    ) -> None:
        """Log what happens now (or ``at``, ns): a request answered, a token issued, an
        administrator's change (``ip`` None: the actor's usual address)."""
        when = time.time_ns() if at is None else at
        when -= when % MS
        with self._lock:
            self._build()
            number = len(self._recorded)
            self._insert(
                [
                    self._event(
                        when,
                        kind,
                        actor,
                        resources,
                        ("live", number, when),
                        ok=ok,
                        ip=ip,
                        user_agent=user_agent,
                        operation=operation,
                    )
                ]
            )

    def tasks_decided(self) -> None:
        """Tasks were decided (``Dataset.close_tasks``): their approvals are logged when the
        log is next read."""
        with self._lock:
            self._approvals_stale = True

    def admin(self, draw: int) -> Actor:
        """One of the tenant's administrators."""
        return self._admins[draw % len(self._admins)]

    # ----- reading ----------------------------------------------------------------------------

    def events(self) -> list[LogEvent]:
        """Ground truth: every event, oldest first (ties in the order recorded)."""
        with self._lock:
            self._catch_up()
            refs = list(self._refs)
        return [self._resolve(ref) for ref in refs]

    def _resolve(self, ref: int) -> LogEvent:
        return self._background(ref) if ref >= 0 else self._recorded[-1 - ref]

    def page(
        self,
        since: int | None,
        until: int | None,
        after_uid: str | None,
        before_uid: str | None,
        order: str,
        start: int,
        size: int,
    ) -> tuple[list[LogEvent], int]:
        """Events ``[start, start + size)`` of the range, in ``order`` (``ascending``,
        ``descending``, ``unsorted``), and how many the range holds."""
        with self._lock:
            self._catch_up()
            lo = 0 if since is None else bisect.bisect_left(self._times, since)
            hi = len(self._times) if until is None else bisect.bisect_left(self._times, until)
            if after_uid is not None:
                lo = max(lo, self._position(after_uid, "sinceEventUid") + 1)
            if before_uid is not None:
                hi = min(hi, self._position(before_uid, "untilEventUid"))
            hi = max(lo, hi)
            total = hi - lo
            if order == "ascending":
                refs = self._refs[lo + start : min(hi, lo + start + size)]
            elif order == "descending":
                top = hi - start
                refs = self._refs[max(lo, top - size) : max(lo, top)][::-1]
            else:
                refs = self._by_uid(lo, hi)[start : start + size]
        return [self._resolve(ref) for ref in refs], total

    def _by_uid(self, lo: int, hi: int) -> list[int]:
        """The refs of ``[lo, hi)`` in uid order (no order a client could use), kept for
        the next pages of the same range."""
        key = (lo, hi)
        if (cached := self._orders.get(key)) is not None:
            self._orders.move_to_end(key)
            return cached
        refs = sorted(self._refs[lo:hi], key=lambda ref: self._resolve(ref).uid)
        self._orders[key] = refs
        while len(self._orders) > ORDER_CACHE:
            self._orders.popitem(last=False)
        return refs

    def _position(self, uid: str, field: str) -> int:
        if self._uid_positions is None:
            self._uid_positions = {self._resolve(ref).uid: n for n, ref in enumerate(self._refs)}
        position = self._uid_positions.get(uid)
        if position is None:
            raise bad_request(f"{field} names no event of the log")
        return position


def event_object(event: LogEvent) -> dict[str, Any]:
    """An OCSF event, as the newest release sends it."""
    class_uid, activity_id = (6003, 2) if event.kind == Kind.READ else WHAT[event.kind][:2]
    class_name, category_uid, category_name = CLASSES[class_uid]
    activity = ACTIVITIES[class_uid][activity_id]
    user = {"uid": event.actor.uid, "name": event.actor.name, "type": event.actor.type}
    if event.actor.email:
        user["email_addr"] = event.actor.email
    obj: dict[str, Any] = {
        "metadata": {
            "uid": event.uid,
            "version": OCSF_VERSION,
            "product": {"name": "ConductorOne", "vendor_name": "ConductorOne"},
        },
        "time": event.time // MS,
        "class_uid": class_uid,
        "class_name": class_name,
        "category_uid": category_uid,
        "category_name": category_name,
        "activity_id": activity_id,
        "activity_name": activity,
        "type_uid": class_uid * 100 + activity_id,
        "type_name": f"{class_name}: {activity}",
        "severity_id": 1 if event.ok else 3,
        "severity": "Informational" if event.ok else "Medium",
        "status_id": 1 if event.ok else 2,
        "status": "Success" if event.ok else "Failure",
        "actor": {"user": user},
        "src_endpoint": {"ip": event.ip},
    }
    if event.user_agent:
        obj["http_request"] = {"user_agent": event.user_agent}
    if class_uid == 3002:
        obj["user"] = dict(user)
    else:
        service = event.operation.split("/", 1)[0]
        obj["api"] = {"operation": event.operation, "service": {"name": service}}
        if event.resources:
            obj["resources"] = [{"type": kind, "uid": uid} for kind, uid in event.resources]
    return obj


def list_events(
    log: SystemLog,
    tokens: PageTokens,
    body: bytes,
    *,
    order: str,
    retention_days: int,
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``POST /api/v1/systemlog/events`` (module docstring)."""
    request = protojson.fields(protojson.body_object(body), FIELDS, "request")
    since = protojson.timestamp(request["since"], "since") if "since" in request else None
    until = protojson.timestamp(request["until"], "until") if "until" in request else None
    after_uid = _uid(request, "sinceEventUid")
    before_uid = _uid(request, "untilEventUid")
    direction = _direction(request.get("sortDirection", DIRECTIONS[0]))
    page_size = clamp_page_size(protojson.int32(request.get("pageSize", 0), "pageSize"))
    page_token = protojson.string(request.get("pageToken", ""), "pageToken")
    if retention_days:
        kept_from = time.time_ns() - retention_days * DAY
        since = kept_from if since is None else max(since, kept_from)
    answered = _answered_order(order, direction)
    digest = digest_of(
        ["systemlog", request.get("since"), request.get("until"), after_uid, before_uid, direction]
    )
    start = tokens.decode(page_token, digest) if page_token else 0
    events, total = log.page(since, until, after_uid, before_uid, answered, start, page_size)
    end = start + len(events)
    next_token = tokens.encode(end, digest) if end < total else ""
    return list_page(
        [event_object(e) for e in events], next_token, emit_unpopulated, expanded=False
    )


def _uid(request: dict[str, Any], field: str) -> str | None:
    value = protojson.string(request.get(field, ""), field)
    return value or None


def _direction(value: Any) -> str:
    """A SortDirection as protobuf JSON accepts it: its name or its number."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(DIRECTIONS):
        return DIRECTIONS[value]
    if value not in DIRECTIONS:
        raise bad_request(f"sortDirection must be one of {', '.join(DIRECTIONS)}")
    return str(value)


def _answered_order(setting: str, direction: str) -> str:
    if setting != "asked":
        return setting
    return {"SORT_DIRECTION_ASC": "ascending", "SORT_DIRECTION_DESC": "descending"}.get(
        direction, "unsorted"
    )
