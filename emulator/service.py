"""The service's side of a request: the gateway's checks (rate limit, latency, faults), the
token endpoint, the bearer check, the API endpoints routed to the concern that answers, and
the counters tests and benchmarks read to check a client's behaviour.

The HTTP front (emulator/server.py) knows nothing of this beyond two calls: ``admit`` before
a request is answered and ``answer`` to answer it. The settings a test or
``/_emulator/settings`` may change at any time are read once per request from ``Settings``.
"""

from __future__ import annotations

import copy
import re
import threading
import time
import typing as t
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

from emulator import auth, shapes
from emulator.accounts import list_app_users
from emulator.attributes import (
    COMPLIANCE_FRAMEWORK,
    RISK_LEVEL,
    list_attribute_types,
    list_attribute_values,
    list_type_values,
)
from emulator.auth import TOKEN_PATH, Credential
from emulator.catalog import list_app_entitlements, list_apps
from emulator.connectors import list_connectors
from emulator.dataset import Dataset
from emulator.directory import list_users
from emulator.errors import NOT_FOUND, ApiError, canned, method_not_allowed
from emulator.exclusions import list_automation_exclusions
from emulator.faults import Fault, Faults
from emulator.feed import search_grant_feed
from emulator.grants import list_entitlement_users, search_grants
from emulator.iam import list_roles
from emulator.owners import list_app_owners, list_entitlement_owner_users, list_entitlement_owners
from emulator.paging import PageTokens
from emulator.past_grants import search_past_grants
from emulator.resource_search import search_resource_types, search_resources
from emulator.resources import list_resource_types, list_resources
from emulator.reviews import list_access_reviews
from emulator.server import Request, json_body
from emulator.system_log import ORDERS as LOG_ORDERS
from emulator.system_log import Actor, Kind, list_events
from emulator.tasks import search_tasks

FEED_PATH = "/api/v1/grants/feed"
APPS_PATH = "/api/v1/apps"
APP_ENTITLEMENTS = re.compile(r"/api/v1/apps/([^/]+)/entitlements")
TASKS_PATH = "/api/v1/search/tasks"
REVIEWS_PATH = "/api/v1/access_reviews"
EXCLUSIONS = re.compile(r"/api/v1/apps/([^/]+)/entitlements/([^/]+)/automation/exclusions")
USERS_PATH = "/api/v1/users"
APP_USERS = re.compile(r"/api/v1/apps/([^/]+)/app_users")
ENTITLEMENT_USERS = re.compile(r"/api/v1/apps/([^/]+)/entitlements/([^/]+)/users")
SEARCH_GRANTS_PATH = "/api/v1/search/grants"
PAST_GRANTS_PATH = "/api/v1/search/past-grants"
SYSTEM_LOG_PATH = "/api/v1/systemlog/events"
RESOURCE_TYPES = re.compile(r"/api/v1/apps/([^/]+)/resource_types")
RESOURCES = re.compile(r"/api/v1/apps/([^/]+)/resource_types/([^/]+)/resources")
APP_OWNERS = re.compile(r"/api/v1/apps/([^/]+)/owners")
ENTITLEMENT_OWNERS = re.compile(r"/api/v1/apps/([^/]+)/entitlements/([^/]+)/owners")
OWNER_USERS = re.compile(r"/api/v2/apps/([^/]+)/entitlements/([^/]+)/owners/users")
ATTRIBUTE_TYPES_PATH = "/api/v1/attributes/types"
ATTRIBUTE_VALUES = re.compile(r"/api/v1/attributes/types/([^/]+)/values")
RISK_LEVELS_PATH = "/api/v1/attributes/risk_levels"
COMPLIANCE_FRAMEWORKS_PATH = "/api/v1/attributes/compliance_frameworks"
IAM_ROLES_PATH = "/api/v1/iam/roles"
CONNECTORS = re.compile(r"/api/v1/apps/([^/]+)/connectors")
SEARCH_RESOURCE_TYPES_PATH = "/api/v1/search/app_resource_types"
SEARCH_RESOURCES_PATH = "/api/v1/search/app_resources"
OWNER_USERS_OPERATION = "c1.api.app.v2.AppEntitlementOwners/SearchUserOwners"
# The operation the system log names for a read of each endpoint (the vendor's names).
OPERATIONS = (
    (FEED_PATH, "c1.api.app.v1.AppEntitlementUserBindingService/SearchGrantFeed"),
    (APPS_PATH, "c1.api.app.v1.Apps/List"),
    (APP_ENTITLEMENTS, "c1.api.app.v1.AppEntitlements/List"),
    (EXCLUSIONS, "c1.api.app.v1.AppEntitlements/ListAutomationExclusions"),
    (TASKS_PATH, "c1.api.task.v1.TaskSearchService/Search"),
    (REVIEWS_PATH, "c1.api.accessreview.v1.AccessReviewService/List"),
    (USERS_PATH, "c1.api.user.v1.UserService/List"),
    (APP_USERS, "c1.api.app.v1.AppUserService/List"),
    (ENTITLEMENT_USERS, "c1.api.app.v1.AppEntitlements/ListUsers"),
    (SEARCH_GRANTS_PATH, "c1.api.app.v1.AppEntitlementSearchService/SearchGrants"),
    (PAST_GRANTS_PATH, "c1.api.app.v1.AppEntitlementUserBindingService/SearchPastGrants"),
    (SYSTEM_LOG_PATH, "c1.api.systemlog.v1.SystemLogService/ListEvents"),
    (RESOURCE_TYPES, "c1.api.app.v1.AppResourceTypeService/List"),
    (RESOURCES, "c1.api.app.v1.AppResourceService/List"),
    (APP_OWNERS, "c1.api.app.v1.AppOwners/List"),
    (ENTITLEMENT_OWNERS, "c1.api.app.v1.AppEntitlementOwners/List"),
    (OWNER_USERS, OWNER_USERS_OPERATION),
    (ATTRIBUTE_TYPES_PATH, "c1.api.attribute.v1.Attributes/ListAttributeTypes"),
    (ATTRIBUTE_VALUES, "c1.api.attribute.v1.Attributes/ListAttributeValues"),
    (RISK_LEVELS_PATH, "c1.api.attribute.v1.Attributes/ListRiskLevels"),
    (COMPLIANCE_FRAMEWORKS_PATH, "c1.api.attribute.v1.Attributes/ListComplianceFrameworks"),
    (IAM_ROLES_PATH, "c1.api.iam.v1.Roles/List"),
    (CONNECTORS, "c1.api.app.v1.ConnectorService/List"),
    (SEARCH_RESOURCE_TYPES_PATH, "c1.api.app.v1.AppResourceSearch/SearchAppResourceTypes"),
    (SEARCH_RESOURCES_PATH, "c1.api.app.v1.AppResourceSearch/SearchAppResources"),
)
# What an older release lacks (``shapes="older"``): it answers them as an unknown route.
NEWER_OPERATIONS = frozenset({OWNER_USERS_OPERATION})


def operation_of(path: str) -> str:
    """The operation a request of ``path`` calls, as the system log names it."""
    for route, operation in OPERATIONS:
        if route == path if isinstance(route, str) else route.fullmatch(path):
            return operation
    return path


class Operations:
    """A set of the service's operations, each named by the vendor's name (as the system log
    names it, e.g. ``c1.api.iam.v1.Roles/List``), by a path (``/api/v1/iam/roles``) or by a
    path template whose ``{...}`` parts stand for any one segment
    (``/api/v1/apps/{app_id}/owners``): which ones a client may not call, or a release lacks."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        if isinstance(names, str):
            raise ValueError("operations must be a list of names or paths, not one string")
        known = {operation for _, operation in OPERATIONS}
        self.names: frozenset[str] = frozenset(names)
        patterns = []
        for name in self.names:
            if not isinstance(name, str) or not (name in known or name.startswith("/api/")):
                raise ValueError(
                    f"unknown operation {name!r}: name one as the system log does "
                    "(c1.api.iam.v1.Roles/List), or by its path (/api/v1/iam/roles)"
                )
            if "{" in name:
                parts = re.split(r"\{[^/{}]*\}", name)
                patterns.append(re.compile("[^/]+".join(map(re.escape, parts))))
        self._patterns = tuple(patterns)

    def __bool__(self) -> bool:
        return bool(self.names)

    def __contains__(self, path: object) -> bool:
        """Whether a request of ``path`` calls one of these operations."""
        if not self.names or not isinstance(path, str):
            return False
        return (
            path in self.names
            or operation_of(path) in self.names
            or any(pattern.fullmatch(path) for pattern in self._patterns)
        )

    def listed(self) -> list[str]:
        return sorted(self.names)


class Settings:
    """What may change between two requests. Plain attributes behind validating setters are
    enough: a single assignment is atomic and each request reads a setting once."""

    def __init__(
        self,
        *,
        token_lifetime: int = 600,
        latency: float = 0.0,
        exclusions_ignore_page_token: bool = False,
        emit_unpopulated: bool | None = None,
        max_in_flight: int = 0,
        throttle_retry_after: int = 1,
        shapes: str = "newest",
        log_order: str = "asked",
        log_retention_days: int = 0,
        log_calls: bool = True,
        frozen: bool = False,
        forbidden_operations: Iterable[str] = (),
        absent_operations: Iterable[str] = (),
        inline_app_owners: bool = False,
    ) -> None:
        self._frozen = frozen
        # Whether an App's ``appOwners`` carries its owners (the Users of
        # ``GET /api/v1/apps/{id}/owners``) or is sent empty: undocumented either way.
        self.inline_app_owners = inline_app_owners
        # A client without the permission for these operations: answered 403
        # (permission_denied), as the service answers a key whose role may not call them.
        self.forbidden_operations = forbidden_operations
        # A release that lacks these operations: answered 404 as an unknown route (an
        # ``older`` release also lacks the v2 owner list, NEWER_OPERATIONS).
        self.absent_operations = absent_operations
        self.token_lifetime = token_lifetime
        self.latency = latency
        # Answer every exclusions request with the first page and the same token, like a
        # gateway ignoring query parameters the operation does not declare.
        self.exclusions_ignore_page_token = exclusions_ignore_page_token
        # Unset fields: True sends them empty ("", false, 0, [], null) on every endpoint, False
        # omits them on every endpoint, None (default) sends them empty on the catalog only
        # (see emulator/unpopulated.py).
        self.emit_unpopulated = emit_unpopulated
        # A tenant's rate limit: beyond this many /api/ requests being answered at once, a
        # request is answered 429 with Retry-After (0: no limit).
        self.max_in_flight = max_in_flight
        self.throttle_retry_after = throttle_retry_after
        # Which release's field shapes every endpoint answers in (emulator/shapes.py).
        self.shapes = shapes
        # The system log's order and retention (emulator/system_log.py).
        self.log_order = log_order
        self.log_retention_days = log_retention_days
        # Whether every call answered and token issued is logged, as the service does; a
        # long-lived emulator that many runs read in full (the tests' shared one) turns it
        # off, or each run reads every earlier run's calls again.
        self.log_calls = log_calls

    @property
    def frozen(self) -> bool:
        """The data never changes and no call is logged, so each answer is built once
        (FrozenAnswers): fixed for the emulator's life."""
        return self._frozen

    @property
    def forbidden_operations(self) -> Operations:
        return self._forbidden_operations

    @forbidden_operations.setter
    def forbidden_operations(self, names: Iterable[str]) -> None:
        self._forbidden_operations = Operations(names)

    @property
    def absent_operations(self) -> Operations:
        return self._absent_operations

    @absent_operations.setter
    def absent_operations(self, names: Iterable[str]) -> None:
        self._absent_operations = Operations(names)

    def lacks(self, path: str) -> bool:
        """Whether the release served lacks the operation of ``path`` (404 as unknown)."""
        return path in self.absent_operations or (
            self.shapes == "older" and operation_of(path) in NEWER_OPERATIONS
        )

    @property
    def log_calls(self) -> bool:
        return self._log_calls

    @log_calls.setter
    def log_calls(self, flag: bool) -> None:
        if flag and self.frozen:
            raise ValueError("a frozen emulator logs no calls: its answers never change")
        self._log_calls = flag

    @property
    def log_order(self) -> str:
        return self._log_order

    @log_order.setter
    def log_order(self, order: str) -> None:
        if order not in LOG_ORDERS:
            raise ValueError(f"log_order must be one of {', '.join(LOG_ORDERS)}")
        self._log_order = order

    @property
    def log_retention_days(self) -> int:
        return self._log_retention_days

    @log_retention_days.setter
    def log_retention_days(self, days: int) -> None:
        if isinstance(days, bool) or int(days) < 0:
            raise ValueError("log_retention_days must be >= 0 (0: every event is kept)")
        self._log_retention_days = int(days)

    @property
    def shapes(self) -> str:
        return self._shapes

    @shapes.setter
    def shapes(self, release: str) -> None:
        if release not in shapes.SHAPES:
            raise ValueError(f"shapes must be one of {', '.join(shapes.SHAPES)}")
        self._shapes = release

    @property
    def token_lifetime(self) -> int:
        return self._token_lifetime

    @token_lifetime.setter
    def token_lifetime(self, seconds: int) -> None:
        if int(seconds) < 1:
            raise ValueError("token_lifetime must be at least 1 second")
        self._token_lifetime = int(seconds)

    @property
    def latency(self) -> float:
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("latency must be >= 0")
        self._latency = float(seconds)

    @property
    def max_in_flight(self) -> int:
        return self._max_in_flight

    @max_in_flight.setter
    def max_in_flight(self, requests: int) -> None:
        if isinstance(requests, bool) or int(requests) < 0:
            raise ValueError("max_in_flight must be >= 0 (0: no limit)")
        self._max_in_flight = int(requests)

    @property
    def throttle_retry_after(self) -> int:
        return self._throttle_retry_after

    @throttle_retry_after.setter
    def throttle_retry_after(self, seconds: int) -> None:
        if isinstance(seconds, bool) or int(seconds) < 0:
            raise ValueError("throttle_retry_after must be >= 0 seconds")
        self._throttle_retry_after = int(seconds)

    def update_settings(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply the ``/_emulator/settings`` control's changes; every setting, as now."""
        if "latency" in changes:
            self.latency = float(changes["latency"])
        if "token_lifetime" in changes:
            self.token_lifetime = int(changes["token_lifetime"])
        if "exclusions_ignore_page_token" in changes:
            if not isinstance(flag := changes["exclusions_ignore_page_token"], bool):
                raise ValueError("exclusions_ignore_page_token must be true or false")
            self.exclusions_ignore_page_token = flag
        if "emit_unpopulated" in changes:
            if not isinstance(flag := changes["emit_unpopulated"], bool | None):
                raise ValueError("emit_unpopulated must be true, false or null")
            self.emit_unpopulated = flag
        if "max_in_flight" in changes:
            self.max_in_flight = int(changes["max_in_flight"])
        if "throttle_retry_after" in changes:
            self.throttle_retry_after = int(changes["throttle_retry_after"])
        if "shapes" in changes:
            self.shapes = str(changes["shapes"])
        if "log_order" in changes:
            self.log_order = str(changes["log_order"])
        if "log_retention_days" in changes:
            self.log_retention_days = int(changes["log_retention_days"])
        if "log_calls" in changes:
            if not isinstance(flag := changes["log_calls"], bool):
                raise ValueError("log_calls must be true or false")
            self.log_calls = flag
        if "inline_app_owners" in changes:
            if not isinstance(flag := changes["inline_app_owners"], bool):
                raise ValueError("inline_app_owners must be true or false")
            self.inline_app_owners = flag
        for name in ("forbidden_operations", "absent_operations"):
            if name in changes:
                if not isinstance(names := changes[name], list):
                    raise ValueError(f"{name} must be a list of operation names or paths")
                setattr(self, name, names)
        return {
            "latency": self.latency,
            "token_lifetime": self.token_lifetime,
            "exclusions_ignore_page_token": self.exclusions_ignore_page_token,
            "emit_unpopulated": self.emit_unpopulated,
            "max_in_flight": self.max_in_flight,
            "throttle_retry_after": self.throttle_retry_after,
            "shapes": self.shapes,
            "log_order": self.log_order,
            "log_retention_days": self.log_retention_days,
            "log_calls": self.log_calls,
            "forbidden_operations": self.forbidden_operations.listed(),
            "absent_operations": self.absent_operations.listed(),
            "inline_app_owners": self.inline_app_owners,
        }


class Stats:
    """Request counters the tests and benchmarks read to check client behaviour."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._by: dict[str, Counter[str]] = {}

    def count(self, name: str, key: str | None = None) -> None:
        """Bump counter `name`, and `name`'s breakdown entry `key` if given."""
        with self._lock:
            self._counts[name] += 1
            if key is not None:
                self._by.setdefault(name, Counter())[key] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            by = copy.deepcopy(self._by)
            return {
                "token_requests": self._counts["token_requests"],
                "token_requests_by_method": dict(by.get("token_method", {})),
                "token_failures": self._counts["token_failures"],
                "api_requests": self._counts["api_requests"],
                "api_requests_by_path": dict(by.get("api_requests", {})),
                "unauthorized": self._counts["unauthorized"],
                "faults_injected": self._counts["faults_injected"],
                "faults_by_kind": dict(by.get("faults_injected", {})),
                "throttled": self._counts["throttled"],
            }

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._by.clear()


class InFlight:
    """How many /api/ requests are being answered now, the most at once since a reset, and
    how long each number of them was in flight (``occupancy``): what a client's idle slots
    are measured with, from the service's side (benchmarks/backfill_benchmark.py). Running
    totals, kept as the requests come and go: an emulator that runs for hours keeps no
    history of them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self.now = 0
        self.peak = 0
        self._restart()

    def _restart(self) -> None:
        """The totals from now on (a request in flight counts from now)."""
        at = self._clock()
        self._started: float | None = at if self.now else None  # the first request in
        self._changed = at  # when the requests in flight last changed
        self._by_level: dict[int, float] = defaultdict(float)  # seconds at each level
        self._spent = 0.0  # requests in flight x seconds, until _changed
        self._ramp = (0.0, 0.0)  # (seconds, spent) before the peak was first reached
        self._left_peak: tuple[float, float] | None = None  # (when, spent) it was last left

    def _count_until(self, at: float) -> None:
        """Count the requests in flight since the last change, up to ``at``."""
        if self._started is None:
            self._started = self._changed = at
        self._by_level[self.now] += at - self._changed
        self._spent += self.now * (at - self._changed)
        self._changed = at

    def enter(self, limit: int) -> bool:
        """Count one more request in; False (and not counted) if `limit` (> 0) is reached."""
        with self._lock:
            if limit and self.now >= limit:
                return False
            at = self._clock()
            self._count_until(at)
            self.now += 1
            if self.now > self.peak:
                self.peak = self.now
                self._ramp = (at - t.cast("float", self._started), self._spent)
            if self.now == self.peak:
                self._left_peak = None
            return True

    def leave(self) -> None:
        with self._lock:
            at = self._clock()
            self._count_until(at)
            if self.now == self.peak:
                self._left_peak = (at, self._spent)
            self.now -= 1

    def reset_peak(self) -> None:
        with self._lock:
            self.peak = self.now
            self._restart()

    def occupancy(self) -> dict[str, Any]:
        """Since the reset, from the first request in to the last one out (or now): its
        ``seconds`` and ``mean`` requests in flight; ``by_level``, the seconds each number
        of requests was in flight (0: none, between two); ``ramp`` and ``tail``, the
        stretches before the ``peak`` was first reached and after it was last left, each its
        seconds and the requests in flight in it on average."""
        with self._lock:
            end = self._clock() if self.now else self._changed
            by_level = dict(self._by_level)
            by_level[self.now] = by_level.get(self.now, 0.0) + end - self._changed
            spent = self._spent + self.now * (end - self._changed)
            seconds = 0.0 if self._started is None else end - self._started  # none yet
            tail = (0.0, 0.0)
            if self._left_peak is not None:
                tail = (end - self._left_peak[0], spent - self._left_peak[1])
            ramp, peak = self._ramp, self.peak

        def stretch(seconds: float, spent: float) -> dict[str, float]:
            return {"seconds": seconds, "mean": spent / seconds if seconds else 0.0}

        return {
            **stretch(seconds, spent),
            "peak": peak,
            "by_level": {str(n): by_level[n] for n in sorted(by_level) if by_level[n]},
            "ramp": stretch(*ramp),
            "tail": stretch(*tail),
        }


class FrozenAnswers:
    """The encoded 200 answers of a frozen tenant, by request: its data cannot change and it
    logs no calls, so a request asked again gets the same body, and answering it costs a
    lookup instead of building and encoding the page again. For an emulator many runs read
    (the tests' shared ones, the benchmarks' server, whose serving cost would otherwise sit
    on both sides of every ratio). Everything a request meets before its body still runs
    every time: the gateway's rate limit, latency and faults (``Service.admit``) and the
    bearer check; an error answer is never kept. The key holds the settings that shape a
    body, so a change of them is a new key; the system log under a retention (its start
    moves with the clock) is built every time."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._bodies: dict[tuple[Any, ...], bytes] = {}
        self.built = 0  # bodies built (misses), for the tests

    def answer(self, request: Request, build: Callable[[Request], bytes]) -> bytes:
        settings = self._settings
        if request.path == SYSTEM_LOG_PATH and settings.log_retention_days:
            return build(request)
        key = (
            request.method,
            request.path,
            tuple(sorted((name, tuple(values)) for name, values in request.query.items())),
            request.body,
            settings.emit_unpopulated,
            settings.shapes,
            settings.log_order,
            settings.exclusions_ignore_page_token,
            settings.forbidden_operations.names,
            settings.absent_operations.names,
            settings.inline_app_owners,
        )
        body = self._bodies.get(key)
        if body is None:  # two threads may build the same body: the same bytes, kept once
            body = self._bodies[key] = build(request)
            self.built += 1
        return body


class Service:
    """The tenant's service: its data, the credential it accepts, the tokens it issued, its
    page tokens, the faults planned for it and its counters."""

    def __init__(self, dataset: Dataset, credential: Credential, settings: Settings) -> None:
        self.dataset = dataset
        self.credential = credential
        self.settings = settings
        self.faults = Faults()
        self.tokens = auth.TokenStore()
        self.page_tokens = PageTokens()
        self.counters = Stats()
        self.in_flight = InFlight()
        # A frozen tenant's answers, each built once (Settings.frozen).
        self.frozen = FrozenAnswers(settings) if settings.frozen else None

    def stats(self) -> dict[str, Any]:
        built = None if self.frozen is None else self.frozen.built
        return self.counters.snapshot() | {
            "peak_in_flight": self.in_flight.peak,
            "in_flight": self.in_flight.occupancy(),
            "frozen_answers_built": built,
        }

    def reset_stats(self) -> None:
        self.counters.reset()
        self.in_flight.reset_peak()

    @contextmanager
    def admit(self, path: str) -> Iterator[Fault | None]:
        """Count a token or /api/ request and, for /api/, hold its place under the rate limit
        (429 beyond it) and wait the latency; yields the fault to inject into it, if any. Any
        other path passes uncounted (``answer`` says 404)."""
        if path == TOKEN_PATH:
            self.counters.count("token_requests")
            yield self._fault(path)
            return
        if not path.startswith("/api/"):
            yield None  # answered 404, uncounted
            return
        self.counters.count("api_requests", path)
        if not self.in_flight.enter(self.settings.max_in_flight):
            self.counters.count("throttled", path)
            raise canned(429, {"Retry-After": str(self.settings.throttle_retry_after)})
        try:
            if latency := self.settings.latency:
                time.sleep(latency)
            yield self._fault(path)
        finally:
            self.in_flight.leave()

    def _fault(self, path: str) -> Fault | None:
        fault = self.faults.take(path)
        if fault is not None:
            self.counters.count("faults_injected", fault.kind)
        return fault

    def answer(self, request: Request) -> bytes:
        """The encoded body of a 200 answer to an admitted request; ApiError for any other."""
        if request.path == TOKEN_PATH:
            return json_body(self._token(request))
        if not request.path.startswith("/api/"):
            raise ApiError(404, NOT_FOUND, "not found")
        try:
            auth.check_bearer(self.tokens, request.authorization)
        except ApiError:
            self.counters.count("unauthorized")
            raise
        if self.frozen is not None:
            return self.frozen.answer(request, self._route_encoded)
        if not self.settings.log_calls:
            return self._route_encoded(request)
        ok = False
        try:
            answer = self._route_encoded(request)
            ok = True
            return answer
        finally:  # every authenticated call is an event of the system log
            self.dataset.log.record(
                Kind.READ,
                self._client,
                operation=operation_of(request.path),
                ok=ok,
                ip=request.client_ip,
                user_agent=request.user_agent or "",
            )

    @property
    def _client(self) -> Actor:
        """The API client of the credential, as the system log names it."""
        client_id = self.credential.client_id
        return Actor(self.dataset.log.seed.id("api-client", client_id), "", client_id, "Service")

    def _token(self, request: Request) -> dict[str, Any]:
        try:
            if request.method != "POST":
                raise method_not_allowed("POST")
            form = auth.parse_form(request.content_type, request.body)
            login = auth.login_method(form)
            self.counters.count("token_method", login)
            auth.authenticate(form, login, self.credential)
        except ApiError:
            self.counters.count("token_failures")
            raise
        if self.settings.log_calls:  # the client signed in
            self.dataset.log.record(
                Kind.SIGN_IN,
                self._client,
                ip=request.client_ip,
                user_agent=request.user_agent or "",
            )
        return auth.token_response(self.tokens, self.settings.token_lifetime)

    def _route_encoded(self, request: Request) -> bytes:
        return json_body(self._route(request))

    def _route(self, request: Request) -> dict[str, Any]:
        """The endpoint of the concern that answers ``request``, in the field shapes of the
        release the settings name (emulator/shapes.py)."""
        release = self.settings.shapes
        path, method, query = request.path, request.method, request.query
        if self.settings.lacks(path):
            raise ApiError(404, NOT_FOUND, "not found")
        if path in self.settings.forbidden_operations:
            raise canned(403)
        # None (the default): the catalog sends unset fields empty, as the vendor's Terraform
        # provider says the service does; the feed and the exclusions omit them.
        emit = self.settings.emit_unpopulated is True
        emit_catalog = self.settings.emit_unpopulated is not False
        if path == FEED_PATH:
            if method != "POST":
                raise method_not_allowed("POST")
            page = search_grant_feed(
                self.dataset.feed, self.page_tokens, request.body, emit_unpopulated=emit
            )
            return shapes.grant_feed(page, release)
        if path == APPS_PATH:
            if method != "GET":
                raise method_not_allowed("GET")
            page = list_apps(
                self.dataset.catalog,
                self.page_tokens,
                query,
                emit_catalog,
                inline_owners=self.settings.inline_app_owners,
            )
            return shapes.apps(page, release)
        if catalog_match := APP_ENTITLEMENTS.fullmatch(path):
            if method != "GET":
                raise method_not_allowed("GET")
            app_id = unquote(catalog_match.group(1))
            page = list_app_entitlements(
                self.dataset.catalog, self.page_tokens, app_id, query, emit_catalog
            )
            return shapes.app_entitlements(page, release)
        if match := EXCLUSIONS.fullmatch(path):
            if method != "GET":
                raise method_not_allowed("GET")
            app_id, entitlement_id = unquote(match.group(1)), unquote(match.group(2))
            page = list_automation_exclusions(
                self.dataset.exclusions,
                self.page_tokens,
                app_id,
                entitlement_id,
                query,
                ignore_paging=self.settings.exclusions_ignore_page_token,
                emit_unpopulated=emit,
            )
            return shapes.automation_exclusions(page, release)
        if path == TASKS_PATH:
            if method != "POST":
                raise method_not_allowed("POST")
            return search_tasks(
                self.dataset.ticketing, self.page_tokens, request.body, emit_unpopulated=emit
            )
        if path == REVIEWS_PATH:
            if method != "GET":
                raise method_not_allowed("GET")
            return list_access_reviews(
                self.dataset.reviews, self.page_tokens, query, emit_unpopulated=emit
            )
        return self._route_people(request, emit_catalog)

    def _route_people(self, request: Request, emit: bool) -> dict[str, Any]:
        """The directory, the accounts and the grants held now; like the catalog, they send
        unset fields empty unless told to omit them."""
        path, method, query = request.path, request.method, request.query
        if path == USERS_PATH:
            if method != "GET":
                raise method_not_allowed("GET")
            page = list_users(self.dataset.directory, self.page_tokens, query, emit)
            return shapes.directory(page, self.settings.shapes)
        if match := APP_USERS.fullmatch(path):
            if method != "GET":
                raise method_not_allowed("GET")
            app_id = unquote(match.group(1))
            return list_app_users(self.dataset.accounts, self.page_tokens, app_id, query, emit)
        if match := ENTITLEMENT_USERS.fullmatch(path):
            if method != "GET":
                raise method_not_allowed("GET")
            app_id, entitlement_id = unquote(match.group(1)), unquote(match.group(2))
            return list_entitlement_users(
                self.dataset.grants, self.page_tokens, app_id, entitlement_id, query, emit
            )
        if path == SEARCH_GRANTS_PATH:
            if method != "POST":
                raise method_not_allowed("POST")
            return search_grants(
                self.dataset.grants,
                self.page_tokens,
                request.body,
                emit,
                inline_owners=self.settings.inline_app_owners,
            )
        if path == PAST_GRANTS_PATH:
            if method != "POST":
                raise method_not_allowed("POST")
            page = search_past_grants(self.dataset.past, self.page_tokens, request.body)
            return shapes.past_grants(page, self.settings.shapes)
        if path == SYSTEM_LOG_PATH:
            if method != "POST":
                raise method_not_allowed("POST")
            page = list_events(
                self.dataset.log,
                self.page_tokens,
                request.body,
                order=self.settings.log_order,
                retention_days=self.settings.log_retention_days,
                emit_unpopulated=self.settings.emit_unpopulated is True,
            )
            return shapes.system_log(page, self.settings.shapes)
        return self._route_scoping(request, emit)

    def _route_scoping(self, request: Request, emit: bool) -> dict[str, Any]:
        """What an audit is scoped by: resources, owners, attributes, the service's roles and
        connectors; like the catalog, they send unset fields empty unless told to omit them."""
        if request.path in (SEARCH_RESOURCE_TYPES_PATH, SEARCH_RESOURCES_PATH):
            if request.method != "POST":
                raise method_not_allowed("POST")
            resources, release = self.dataset.resources, self.settings.shapes
            if request.path == SEARCH_RESOURCES_PATH:
                page = search_resources(resources, self.page_tokens, request.body, emit)
                return shapes.resources(page, release)
            page = search_resource_types(resources, self.page_tokens, request.body, emit)
            return shapes.resource_type_search(page, release)
        answer = self._scoping_endpoint(request.path, emit)
        if answer is None:
            raise ApiError(404, NOT_FOUND, "not found")
        if request.method != "GET":
            raise method_not_allowed("GET")
        return answer(request.query)

    def _scoping_endpoint(
        self, path: str, emit: bool
    ) -> Callable[[dict[str, list[str]]], dict[str, Any]] | None:
        """The endpoint that answers a GET of ``path`` (None: no such route), in the field
        shapes of the release the settings name."""
        ds, tokens, release = self.dataset, self.page_tokens, self.settings.shapes
        if match := RESOURCE_TYPES.fullmatch(path):
            app_id = _id(match, 1)
            return lambda query: shapes.resource_types(
                list_resource_types(ds.resources, tokens, app_id, query, emit), release
            )
        if match := RESOURCES.fullmatch(path):
            app_id, type_id = _id(match, 1), _id(match, 2)
            return lambda query: shapes.resources(
                list_resources(ds.resources, tokens, app_id, type_id, query, emit), release
            )
        if match := APP_OWNERS.fullmatch(path):
            app_id = _id(match, 1)
            return lambda query: shapes.owners(
                list_app_owners(ds.owners, tokens, app_id, query, emit), release
            )
        if match := ENTITLEMENT_OWNERS.fullmatch(path):
            app_id, entitlement_id = _id(match, 1), _id(match, 2)
            return lambda query: shapes.owners(
                list_entitlement_owners(ds.owners, tokens, app_id, entitlement_id, query, emit),
                release,
            )
        if match := OWNER_USERS.fullmatch(path):
            app_id, entitlement_id = _id(match, 1), _id(match, 2)
            return lambda query: shapes.owner_users(
                list_entitlement_owner_users(
                    ds.owners, tokens, app_id, entitlement_id, query, emit
                ),
                release,
            )
        if path == ATTRIBUTE_TYPES_PATH:
            return lambda query: shapes.attribute_types(
                list_attribute_types(ds.attributes, tokens, query, emit), release
            )
        if match := ATTRIBUTE_VALUES.fullmatch(path):
            type_id = _id(match, 1)
            return lambda query: shapes.attribute_values(
                list_attribute_values(ds.attributes, tokens, type_id, query, emit), release
            )
        if path in (RISK_LEVELS_PATH, COMPLIANCE_FRAMEWORKS_PATH):
            key = RISK_LEVEL if path == RISK_LEVELS_PATH else COMPLIANCE_FRAMEWORK
            return lambda query: shapes.attribute_values(
                list_type_values(ds.attributes, tokens, key, query, emit), release
            )
        if path == IAM_ROLES_PATH:
            return lambda query: shapes.roles(list_roles(ds.iam, tokens, query, emit), release)
        if match := CONNECTORS.fullmatch(path):
            app_id = _id(match, 1)
            return lambda query: shapes.connectors(
                list_connectors(ds.connections, tokens, app_id, query, emit), release
            )
        return None


def _id(match: re.Match[str], group: int) -> str:
    """A path parameter, as the gateway decodes it."""
    return unquote(match.group(group))
