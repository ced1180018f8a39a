"""Tasks (the service's tickets) and their search, ``POST /api/v1/search/tasks``.

The tasks agree with the grant feed (emulator/feed.py): behind each feed event with a
``ticketId`` lies the task of that id, a grant task behind an ADDED (or unspecified, newer)
event and a revoke task behind a REMOVED one, for the same app, entitlement and app user, with
the event's date as its outcome time. A seeded draw per ticket decides its variant:

- ``GONE`` (3%): the service no longer has the task (the feed still names it);
- a grant task still open (4%), denied (3%) or cancelled (2%), although the feed added it;
- granted and approved by the grantee themself (10%), by a policy without an approval step
  (10%), or by someone else (the rest);
- revoke tasks: revoked, approved by someone else or by no one.

Besides those: denied and cancelled requests the feed never saw, offboarding tasks, a task of
a type newer than most clients (``action``), and a certify task per decision of each access
review (emulator/reviews.py): a review decides grants the feed holds at its start and, as on a
real tenant, grants made before the feed began (which the feed may never name). ``close()`` decides open tasks, as approvers do between two
runs. Unset fields are omitted, or sent empty with ``emit_unpopulated``
(emulator/unpopulated.py): the task's, its type's and its policy's.

Tasks are built from the feed on first use and again when events are added (O(events)); what
``close()`` decided is kept apart and applied on top.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from emulator import lifecycle
from emulator.errors import bad_request
from emulator.feed import GrantFeed
from emulator.grants import CurrentGrants
from emulator.paging import PageTokens, clamp_page_size, digest_of
from emulator.protojson import body_object
from emulator.protojson import fields as _fields  # every search of the service parses alike
from emulator.protojson import int32 as _int32
from emulator.protojson import string as _string
from emulator.protojson import timestamp as _timestamp
from emulator.reviews import AccessReviews, Review
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, parse_rfc3339, precise
from emulator.users import Users

TYPE_PREFIX = "type.googleapis.com/c1.api."
OPEN, CLOSED = "TASK_STATE_OPEN", "TASK_STATE_CLOSED"
GRANTED = "GRANT_OUTCOME_GRANTED"
DENIED = "GRANT_OUTCOME_DENIED"
CANCELLED = "GRANT_OUTCOME_CANCELLED"
REVOKED = "REVOKE_OUTCOME_REVOKED"
CERTIFIED = "CERTIFY_OUTCOME_CERTIFIED"
DECERTIFIED = "CERTIFY_OUTCOME_DECERTIFIED"
TYPES = ("grant", "revoke", "certify", "offboarding", "action", "finding")
MINUTE = 60 * NS

# Variants of a feed ticket's task, by a draw in 0-99 (see the module docstring).
GONE, STILL_OPEN, DENY, CANCEL, SELF, NO_STEP = 3, 7, 10, 12, 22, 32

# JSON name -> proto name of TaskSearchRequest's fields the emulator answers.
FIELDS = {
    "createdAfter": "created_after",
    "createdBefore": "created_before",
    "outcomeAfter": "outcome_after",
    "outcomeBefore": "outcome_before",
    "taskStates": "task_states",
    "taskTypes": "task_types",
    "refs": "refs",
    "accessReviewIds": "access_review_ids",
    "sortBy": "sort_by",
    "expandMask": "expand_mask",
    "pageSize": "page_size",
    "pageToken": "page_token",
}
# The request's other fields in the vendor's description: valid there, not emulated here. A
# request naming one is refused with that said, rather than answered as if it were not set.
NOT_EMULATED = [
    "accountOwnerIds",
    "accountStatuses",
    "accountTypes",
    "actorId",
    "appEntitlementIds",
    "appResourceIds",
    "appResourceTypeIds",
    "appUserSubjectIds",
    "applicationIds",
    "assignedOrStepApproverUserId",
    "assigneesInIds",
    "certifyOutcomes",
    "currentStep",
    "emergencyStatus",
    "excludeAppEntitlementIds",
    "excludeAppResourceTypeIds",
    "excludeApplicationIds",
    "excludeIds",
    "grantOutcomes",
    "includeActedAfter",
    "includeDeleted",
    "myWorkUserIds",
    "olderThanDuration",
    "openerIds",
    "openerOrSubjectUserId",
    "pendingActionFilter",
    "previouslyActedOnIds",
    "query",
    "requireApprovalReason",
    "requireDenialReason",
    "revokeOutcomes",
    "stepApprovalTypes",
    "subjectIds",
    "userEmploymentStatuses",
]
STATES = ("TASK_STATE_UNSPECIFIED", OPEN, CLOSED)
SORTS: dict[str, Callable[[Indexed], Any] | None] = {
    "TASK_SEARCH_SORT_BY_UNSPECIFIED": None,
    "TASK_SEARCH_SORT_BY_CREATED_AT": lambda t: t.created,
    "TASK_SEARCH_SORT_BY_REVERSE_CREATED_AT": lambda t: -t.created,
    "TASK_SEARCH_SORT_BY_TICKET_ID": lambda t: int(t.task["numericId"]),
    "TASK_SEARCH_SORT_BY_REVERSE_TICKET_ID": lambda t: -int(t.task["numericId"]),
}
SORTS_NOT_EMULATED = (
    "TASK_SEARCH_SORT_BY_ACCOUNT",
    "TASK_SEARCH_SORT_BY_RESOURCE",
    "TASK_SEARCH_SORT_BY_ACCOUNT_OWNER",
    "TASK_SEARCH_SORT_BY_APP_RESOURCE_ID_AND_APP_ENTITLEMENT",
)
EXPAND_PATHS = ("access_review_id",)
ONEOF_MEMBERS = (*TYPES, "approved", "denied")

# Zero values (EmitUnpopulated) of the objects a task is made of.
TASK_ZEROS: dict[str, Any] = {
    "actions": [],
    "analysisId": "",
    "annotations": [],
    "approverIds": [],
    "commentCount": 0,
    "createdAt": None,
    "createdByUserId": "",
    "data": None,
    "deletedAt": None,
    "description": "",
    "displayName": "",
    "emergencyAccess": False,
    "externalRefs": [],
    "form": None,
    "id": "",
    "insightIds": [],
    "numericId": "0",
    "origin": "TASK_ORIGIN_UNSPECIFIED",
    "policy": None,
    "policyGenerationId": "",
    "processing": "TASK_PROCESSING_TYPE_UNSPECIFIED",
    "recommendation": "INSIGHT_RECOMMENDATION_UNSPECIFIED",
    "revocationTargets": [],
    "state": "TASK_STATE_UNSPECIFIED",
    "stepApproverIds": [],
    "type": None,
    "updatedAt": None,
    "userId": "",
}
_SUBJECT = {"appEntitlementId": "", "appId": "", "appUserId": "", "identityUserId": ""}
TYPE_ZEROS: dict[str, dict[str, Any]] = {
    "grant": _SUBJECT
    | {"grantDuration": None, "outcome": "GRANT_OUTCOME_UNSPECIFIED", "outcomeTime": None}
    | {"source": None},
    "revoke": _SUBJECT
    | {"outcome": "REVOKE_OUTCOME_UNSPECIFIED", "outcomeTime": None}
    | {"resource": None, "source": None},
    "certify": _SUBJECT
    | {"accessReviewId": "", "accessReviewSelection": "", "resource": None}
    | {"outcome": "CERTIFY_OUTCOME_UNSPECIFIED", "outcomeTime": None},
    "offboarding": {
        "outcome": "OFFBOARDING_OUTCOME_UNSPECIFIED",
        "outcomeTime": None,
        "subjectUserId": "",
    },
}
VIEW_ZEROS = {
    "accessReviewPath": "",
    "appPath": "",
    "appUserPath": "",
    "approversPath": "",
    "createdByUserPath": "",
    "identityUserPath": "",
    "userPath": "",
}


@dataclass
class Spec:
    """One task as the emulator decides it; ``record()`` writes the Task object."""

    id: str
    numeric_id: int
    kind: str  # a TYPES member
    created: int  # ns
    requester: str  # user id
    subject: str  # user id the task is about
    target: dict[str, str] = field(default_factory=dict)  # appId, appEntitlementId, ...
    outcome: str | None = None  # None: open
    outcome_at: int | None = None
    approvals: list[tuple[str, str, int]] = field(default_factory=list)  # approved|denied
    origin: str = "TASK_ORIGIN_WEBAPP"
    emergency: bool = False
    jira: str | None = None
    description: str = ""
    review: str | None = None  # certify: the access review id
    decide: str | None = None  # open: the outcome close() gives it
    decider: str | None = None  # open: who approves or denies it at close()


class Tasks:
    """Every task of the tenant, the feed's tickets' first, and the closes made since."""

    def __init__(
        self,
        seed: Seed,
        feed: GrantFeed,
        users: Users,
        reviews: AccessReviews,
        *,
        grants: CurrentGrants | None = None,
        per_review: int = 24,
    ) -> None:
        self.seed = seed
        self.feed = feed
        self.users = users
        self.reviews = reviews
        self.grants = grants  # the grants made before the feed, which reviews decide too
        self.per_review = per_review
        self._lock = threading.Lock()
        self._built_for = -1
        self._specs: list[Spec] = []
        self._gone: list[str] = []
        self._closed: dict[str, tuple[int, str]] = {}  # id -> (when, outcome), by close()
        self._records: tuple[tuple[int, int], list[Indexed]] | None = None

    # ----- building ---------------------------------------------------------------------------

    def specs(self) -> list[Spec]:
        """Every task the service has, in server order (built again after added events)."""
        with self._lock:
            if self._built_for != self.feed.total:
                self._build()
            return list(self._specs)

    def gone(self) -> list[str]:
        """Ticket ids the feed names (as it names them) whose task the service no longer has."""
        self.specs()
        return list(self._gone)

    def _other(self, user: str, salt: int) -> str:
        ids = self.users.ids
        n = self.users.index(user) or 0
        return ids[(n + 1 + salt % max(len(ids) - 1, 1)) % len(ids)]

    def _build(self) -> None:
        feed, seed = self.feed, self.seed
        specs: list[Spec] = []
        gone: list[str] = []
        for i in range(feed.total):
            e = feed.event(i)
            if e.ticket < 0:
                continue
            f = feed.feed_object(e)
            ticket = feed.ticket_id(e.ticket)
            draw, more = seed.mix(40, e.ticket), seed.mix(44, e.ticket)  # 32 bits each
            variant = draw % 100
            if variant < GONE:
                gone.append(f["ticketId"])  # as the feed names it
                continue
            grantee = self.users.ids[e.user]
            other = self._other(grantee, draw >> 8)
            # A request waits minutes to days; one behind an event added at run time was
            # made at its instant, so it never predates what an earlier run saw.
            lead = MINUTE + (draw >> 12) % (3 * 86_400 * NS) if i < feed.size else 0
            created = precise(e.date - lead, 3) if lead else e.date
            target = {k: f[k] for k in ("appId", "appEntitlementId", "appUserId")}
            target["identityUserId"] = grantee
            spec = Spec(
                id=ticket,
                numeric_id=int(feed.numeric_ticket_id(e.ticket)),
                kind="revoke" if e.event_type == lifecycle.REMOVED else "grant",
                created=created,
                requester=grantee if (draw >> 20) % 5 else other,
                subject=grantee,
                target=target,
                outcome_at=e.date,
                emergency=more % 25 == 0,
                jira=f"https://jira.example.test/browse/ACC-{e.ticket}"
                if (more >> 5) % 6 == 0
                else None,
                description="" if (more >> 8) % 7 == 0 else "Needed for my current project",
            )
            approved_at = created + (e.date - created) // 2
            if spec.kind == "revoke":
                spec.outcome = REVOKED
                spec.origin = ("TASK_ORIGIN_WEBAPP", "TASK_ORIGIN_TIME_REVOKE")[more >> 11 & 1]
                if variant % 2:
                    spec.approvals = [("approved", other, approved_at)]
            elif variant < STILL_OPEN:
                spec.outcome_at = None
                spec.decide = DENIED if variant == GONE else GRANTED
                spec.decider = other
            elif variant < DENY:
                spec.outcome = DENIED
                spec.approvals = [("denied", other, approved_at)]
            elif variant < CANCEL:
                spec.outcome = CANCELLED
            else:
                spec.outcome = GRANTED
                if variant < SELF:
                    spec.approvals = [("approved", grantee, approved_at)]
                elif variant >= NO_STEP:
                    spec.approvals = [("approved", other, approved_at)]
            specs.append(spec)
        specs.extend(self._extras(max(8, feed.size * 3 // 100)))
        specs.extend(self._certifications())
        self._specs, self._gone, self._built_for = specs, gone, feed.total

    def _extras(self, count: int) -> Iterable[Spec]:
        """Tasks the feed never saw: denied and cancelled requests, offboardings, and a type
        newer than most clients (``action``)."""
        feed, users = self.feed, self.users.ids
        span = max(feed.end_ns - feed.first_date - 86_400 * NS, NS)  # done before `end`
        for k in range(count):
            draw = self.seed.mix(41, k)
            user = users[draw % len(users)]
            created = precise(feed.first_date + (draw >> 4) * span // (1 << 28), 6)
            kind = ("grant", "grant", "offboarding", "action")[k % 4]
            spec = Spec(
                id=self.seed.id("task", k),
                numeric_id=10_000_000 + k,
                kind=kind,
                created=created,
                requester=user,
                subject=user,
                outcome_at=created + 2 * 3600 * NS,
                origin="TASK_ORIGIN_SLACK" if kind == "grant" else "TASK_ORIGIN_AUTOMATION",
            )
            if kind == "grant":
                a, u = draw % len(feed.catalog.feed_apps), draw % len(users)
                app = feed.catalog.feed_apps[a]
                spec.target = {
                    "appId": app.id,
                    "appEntitlementId": app.entitlement_ids[(draw >> 9) % len(app.entitlement_ids)],
                    "appUserId": self.users.app_user_id(a, u),
                    "identityUserId": users[u],
                }
                spec.subject = users[u]
                spec.outcome = DENIED if k % 8 == 0 else CANCELLED
                if spec.outcome == DENIED:
                    spec.approvals = [("denied", self._other(users[u], draw), created + NS)]
            elif kind == "offboarding":
                spec.outcome = "OFFBOARDING_OUTCOME_DONE"
            else:
                spec.outcome = None  # an action task has no outcome field; it is closed
            yield spec

    def _certifications(self) -> Iterable[Spec]:
        """One certify task per grant each review decided (or, while open, still decides):
        ``per_review`` of the feed's grants, a quarter as many made before the feed: held
        since, unless the feed removed one (a REMOVED with no ADDED before it), which a review
        that began after that removal cannot decide."""
        intervals = self.feed.intervals()
        held = [i for i in intervals if i.granted_at is not None]
        removed = {i[:3]: i.revoked_at for i in intervals if i.granted_at is None}
        older = [
            lifecycle.Interval(*grant[:3], grant.created_at, removed.get(grant[:3]), None, None)
            for grant in (self.grants.made_before_feed() if self.grants else [])
        ]
        users = self.users.ids
        for review in self.reviews.reviews:
            if held:
                yield from self._review_tasks(review, held, users, self.per_review, batch=0)
            if older:
                yield from self._review_tasks(review, older, users, self.per_review // 4, batch=1)

    def _review_tasks(
        self,
        review: Review,
        held: list[lifecycle.Interval],
        users: list[str],
        count: int,
        *,
        batch: int,
    ) -> Iterable[Spec]:
        """``count`` certify tasks of ``review`` over the grants of ``held`` it saw; batch 0
        (the feed's grants) keeps the ids it always had, batch 1 (grants made before the
        feed) has ids and numeric ids of its own."""
        start = review.started_at
        chosen = [
            i
            for i in held
            if (i.granted_at or 0) < start and (i.revoked_at is None or i.revoked_at > start)
        ]
        step = max(1, len(chosen) // max(count, 1))
        for j, interval in enumerate(chosen[::step][:count]):
            number = review.index * 100_000 + batch * 50_000 + j
            draw = self.seed.mix(42, number)
            found = self.users.app_user(interval.app_user_id)
            subject = users[found[1]] if found else ""
            reviewer = self._other(subject or users[0], draw)
            decided = start + (1 + draw % 10) * 86_400 * NS
            spec = Spec(
                id=self.seed.id("certify", review.index, j)
                if batch == 0
                else self.seed.id("certify-before-feed", review.index, j),
                numeric_id=20_000_000 + number,
                kind="certify",
                created=start,
                requester=users[review.created_by],
                subject=subject,
                target={
                    "accessReviewId": review.id,
                    "appId": interval.app_id,
                    "appEntitlementId": interval.app_entitlement_id,
                    "appUserId": interval.app_user_id,
                    "identityUserId": subject,
                },
                origin="TASK_ORIGIN_ACCESS_REVIEW",
                review=review.id,
            )
            outcome = DECERTIFIED if draw % 100 < 30 else CERTIFIED
            if review.closed_at is None and j % 2:
                spec.decide, spec.decider = outcome, reviewer
            else:
                spec.outcome, spec.outcome_at = outcome, min(decided, review.closed_at or decided)
                verdict = "approved" if outcome == CERTIFIED else "denied"
                spec.approvals = [(verdict, reviewer, spec.outcome_at)]
            yield spec

    # ----- the state now ----------------------------------------------------------------------

    def current(self, spec: Spec) -> Spec:
        """``spec`` with what close() decided since, if anything."""
        closed = self._closed.get(spec.id)
        if closed is None or spec.outcome is not None:
            return spec
        at, outcome = closed
        verdict = "denied" if outcome in (DENIED, DECERTIFIED) else "approved"
        approvals = [(verdict, spec.decider or spec.requester, at)]
        return Spec(
            **{**spec.__dict__, "outcome": outcome, "outcome_at": at, "approvals": approvals}
        )

    def close(self, count: int | None = None, at: int | None = None) -> list[str]:
        """Decide up to ``count`` open tasks (all if None), oldest first, at ``at`` (ns):
        approvers act between two runs. Returns the ids closed."""
        if at is None:
            raise ValueError("close() needs the instant the tasks close at")
        done: list[str] = []
        for spec in sorted(self.specs(), key=lambda s: (s.created, s.numeric_id)):
            if count is not None and len(done) >= count:
                break
            if spec.outcome is None and spec.decide and spec.id not in self._closed:
                self._closed[spec.id] = (max(at, spec.created + NS), spec.decide)
                done.append(spec.id)
        return done

    def record(self, spec: Spec) -> dict[str, Any]:
        """The Task object, only its set fields."""
        spec = self.current(spec)
        is_open = spec.outcome is None and spec.decide is not None
        kind: dict[str, Any] = dict(spec.target)
        if spec.kind == "offboarding":
            kind = {"subjectUserId": spec.subject}
        if spec.kind == "action":
            kind = {"actionName": "rotate-credentials"}
        if spec.outcome is not None:
            kind["outcome"] = spec.outcome
        if spec.outcome_at is not None and not is_open and spec.kind != "action":
            kind["outcomeTime"] = format_ns(spec.outcome_at)
        history = [
            {
                "id": self.seed.id("step", spec.id, n),
                "state": "POLICY_STEP_STATE_DONE",
                "approval": {
                    "state": "APPROVAL_INSTANCE_STATE_DONE",
                    verdict: {"userId": user, f"{verdict}At": format_ns(when)},
                },
            }
            for n, (verdict, user, when) in enumerate(spec.approvals)
        ]
        updated = spec.created if is_open else (spec.outcome_at or spec.created)
        task: dict[str, Any] = {
            "id": spec.id,
            "numericId": str(spec.numeric_id),
            "displayName": f"{spec.kind.capitalize()} task #{spec.numeric_id}",
            "description": spec.description,
            "state": OPEN if is_open else CLOSED,
            "processing": "TASK_PROCESSING_TYPE_WAITING"
            if is_open
            else "TASK_PROCESSING_TYPE_DONE",
            "origin": spec.origin,
            "createdAt": format_ns(spec.created),
            "updatedAt": format_ns(updated),
            "createdByUserId": spec.requester,
            "userId": spec.subject,
            "approverIds": sorted({user for _, user, _ in spec.approvals}),
            "stepApproverIds": [spec.decider] if is_open and spec.decider else [],
            "emergencyAccess": spec.emergency,
            "externalRefs": [
                {"externalRefSource": "JIRA", "name": spec.jira.rsplit("/", 1)[1], "url": spec.jira}
            ]
            if spec.jira
            else [],
            "type": {spec.kind: kind},
            "policy": {"history": history} if history else None,
        }
        return task

    def tasks(self) -> list[dict[str, Any]]:
        """Every Task object as the service holds it now (all fields, unset ones empty), in
        server order; kept until events are added or tasks close. Callers must not change
        them (search answers copy what they send)."""
        return [indexed.task for indexed in self.indexed()]

    def indexed(self) -> list[Indexed]:
        """``tasks()`` with the instants a search compares (parsed once, not per request)."""
        specs = self.specs()
        version = (self._built_for, len(self._closed))
        records = self._records
        if records is None or records[0] != version:
            records = (version, [_indexed(self.record(spec)) for spec in specs])
            self._records = records
        return records[1]


class Indexed(NamedTuple):
    """A Task object and what a search filters it on."""

    task: dict[str, Any]
    kind: str
    created: int  # ns
    outcome: int | None  # ns; None: no outcome time (open, or a type without one)
    review: str | None


def _indexed(task: dict[str, Any]) -> Indexed:
    kind, body = next(iter(task["type"].items()))
    outcome = body.get("outcomeTime")
    return Indexed(
        task,
        kind,
        parse_rfc3339(task["createdAt"]),
        parse_rfc3339(outcome) if outcome else None,
        body.get("accessReviewId"),
    )


# ----- empty values -------------------------------------------------------------------------


def omitted(task: dict[str, Any]) -> dict[str, Any]:
    """A Task without its unset fields (protobuf JSON's default); a set oneof member (the
    type's ``grant``, an approval's ``approved``) stays even when empty."""

    def strip(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {
                key: strip(value)
                for key, value in obj.items()
                if key in ONEOF_MEMBERS or not _unset(value)
            }
        if isinstance(obj, list):
            return [strip(item) for item in obj]
        return obj

    return strip(task)  # type: ignore[no-any-return]


def _unset(value: Any) -> bool:
    return value in (None, "", 0, "0", [], {}) or (
        isinstance(value, str) and value.endswith("_UNSPECIFIED")
    )


def emitted(task: dict[str, Any]) -> dict[str, Any]:
    """A Task with every unset field sent empty (EmitUnpopulated): the task's, its type's and
    its policy's."""
    out = TASK_ZEROS | task
    kind = next(iter(out["type"] or {}), None)
    if kind in TYPE_ZEROS:
        out["type"] = {kind: TYPE_ZEROS[kind] | out["type"][kind]}
    out["policy"] = {
        "current": None,
        "history": (task.get("policy") or {}).get("history", []),
        "next": [],
        "policy": None,
    }
    return out


# ----- POST /api/v1/search/tasks ------------------------------------------------------------


def _type_filter(value: Any) -> set[str]:
    if not isinstance(value, list):
        raise bad_request("taskTypes must be an array")
    kinds: set[str] = set()
    for n, item in enumerate(value):
        if not isinstance(item, dict) or len(item) != 1:
            raise bad_request(f"taskTypes[{n}] must name exactly one type")
        ((kind, body),) = item.items()
        if kind not in TYPES:
            raise bad_request(f'unknown task type "{kind}" in taskTypes[{n}]')
        # null members are unset (protobuf JSON): {"grant": {"source": null}} is {"grant": {}}
        if body is not None and (
            not isinstance(body, dict) or any(v is not None for v in body.values())
        ):
            raise bad_request(f"taskTypes[{n}].{kind} must be an empty object")
        kinds.add(kind)
    return kinds


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise bad_request(f"{where} must be an array")
    return [_string(v, f"{where}[{n}]") for n, v in enumerate(value)]


@dataclass(frozen=True)
class TaskFilter:
    """A task search reduced to comparisons; None or empty = no filter (protobuf)."""

    created_after: int | None = None
    created_before: int | None = None
    outcome_after: int | None = None
    outcome_before: int | None = None
    states: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()
    refs: frozenset[str] = frozenset()
    reviews: frozenset[str] = frozenset()

    def matches(self, item: Indexed) -> bool:
        task, created, outcome = item.task, item.created, item.outcome
        return (
            (self.created_after is None or created >= self.created_after)
            and (self.created_before is None or created < self.created_before)
            and (
                self.outcome_after is None
                or (outcome is not None and outcome >= self.outcome_after)
            )
            and (
                self.outcome_before is None
                or (outcome is not None and outcome < self.outcome_before)
            )
            and (not self.states or task["state"] in self.states)
            and (not self.kinds or item.kind in self.kinds)
            and (not self.refs or bool({task["id"], task["numericId"]} & self.refs))
            and (not self.reviews or item.review in self.reviews)
        )


def _page(
    items: list[Indexed],
    flt: TaskFilter,
    key: Callable[[Indexed], Any] | None,
    start: int,
    size: int,
) -> tuple[list[dict[str, Any]], int | None]:
    """A page of matching tasks from position ``start`` and the position the next page starts
    at (None: no more). In server order a position is an index into every task, so a page
    examines only up to its next match (tasks closing between pages move nothing); a sorted
    search sorts the matches and a position is an index into them."""
    if key is not None:
        found = sorted((item for item in items if flt.matches(item)), key=key)
        more = start + size < len(found)
        return [item.task for item in found[start : start + size]], start + size if more else None
    chosen: list[dict[str, Any]] = []
    for i in range(start, len(items)):
        if flt.matches(items[i]):
            if len(chosen) == size:
                return chosen, i
            chosen.append(items[i].task)
    return chosen, None


def search_tasks(
    tasks: Tasks, tokens: PageTokens, body: bytes, *, emit_unpopulated: bool = False
) -> dict[str, Any]:
    """One page of a task search; with ``emit_unpopulated`` unset fields are sent empty."""
    request = body_object(body)
    if isinstance(request, dict):
        for name, value in request.items():
            if name in NOT_EMULATED and value not in (None, [], "", False, 0):
                raise bad_request(f'field "{name}" of the request is not emulated')
    req = _fields(request, FIELDS, "request")

    def when(name: str) -> int | None:
        return _timestamp(req[name], name) if name in req else None

    states = _strings(req.get("taskStates", []), "taskStates")
    for state in states:
        if state not in STATES:
            raise bad_request(f'unknown task state "{state}"')
    refs = []
    if not isinstance(req.get("refs", []), list):
        raise bad_request("refs must be an array")
    for n, ref in enumerate(req.get("refs", [])):
        ref_id = _string(_fields(ref, {"id": "id"}, f"refs[{n}]").get("id", ""), f"refs[{n}].id")
        if not ref_id:
            raise bad_request(f"refs[{n}] needs id")
        refs.append(ref_id)
    sort_by = _string(req.get("sortBy", "TASK_SEARCH_SORT_BY_UNSPECIFIED"), "sortBy")
    if sort_by in SORTS_NOT_EMULATED:
        raise bad_request(f'sortBy "{sort_by}" is not emulated')
    if sort_by not in SORTS:
        raise bad_request(f'unknown sortBy "{sort_by}"')
    paths: list[str] = []
    if "expandMask" in req:
        mask = _fields(req["expandMask"], {"paths": "paths"}, "expandMask")
        for path in _strings(mask.get("paths", []), "expandMask.paths"):
            if path != "*" and path not in EXPAND_PATHS:
                raise bad_request(f'unknown expandMask path "{path}"')
            paths.extend(EXPAND_PATHS if path == "*" else [path])
    flt = TaskFilter(
        created_after=when("createdAfter"),
        created_before=when("createdBefore"),
        outcome_after=when("outcomeAfter"),
        outcome_before=when("outcomeBefore"),
        states=frozenset(s for s in states if s != "TASK_STATE_UNSPECIFIED"),
        kinds=frozenset(_type_filter(req.get("taskTypes", []))),
        refs=frozenset(refs),
        reviews=frozenset(_strings(req.get("accessReviewIds", []), "accessReviewIds")),
    )
    page_size = clamp_page_size(_int32(req.get("pageSize", 0), "pageSize"))
    page_token = _string(req.get("pageToken", ""), "pageToken")
    shape = [flt.__dict__[k] for k in sorted(flt.__dict__)]
    digest = digest_of(
        [
            "tasks",
            [sorted(v) if isinstance(v, frozenset) else v for v in shape],
            sort_by,
            sorted(set(paths)),
        ]
    )
    start = tokens.decode(page_token, digest) if page_token else 0

    chosen, resume = _page(tasks.indexed(), flt, SORTS[sort_by], start, page_size)
    expanded: list[dict[str, Any]] = []
    where: dict[str, str] = {}
    views = []
    for task in chosen:
        view: dict[str, Any] = {"task": emitted(task) if emit_unpopulated else omitted(task)}
        review_id = task["type"].get("certify", {}).get("accessReviewId")
        if "access_review_id" in paths and review_id:
            if review_id not in where:
                where[review_id] = f"$.expanded[{len(expanded)}]"
                review = next(r for r in tasks.reviews.reviews if r.id == review_id)
                expanded.append(
                    {"@type": TYPE_PREFIX + "accessreview.v1.AccessReview"}
                    | tasks.reviews.record(review)
                )
            view["accessReviewPath"] = where[review_id]
        views.append(VIEW_ZEROS | view if emit_unpopulated else view)
    token = "" if resume is None else tokens.encode(resume, digest)
    if emit_unpopulated:
        return {"list": views, "expanded": expanded, "nextPageToken": token}
    page: dict[str, Any] = {"list": views}
    if expanded:
        page["expanded"] = expanded
    if token:
        page["nextPageToken"] = token
    return page
