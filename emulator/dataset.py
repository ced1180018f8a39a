"""The emulated tenant's data, deterministic from a seed, composed of its concerns, and the
ground truth tests compare a client's output with.

Each concern keeps its data and its endpoint's answers in the module named for it: the catalog
(emulator/catalog.py), users (users.py), automation exclusions (exclusions.py), grant
lifecycles (lifecycle.py), the grant feed (feed.py), the directory (directory.py), accounts
(accounts.py), the grants held now (grants.py), and what an audit is scoped by: resources
(resources.py), attributes (attributes.py), owners (owners.py), the service's roles (iam.py)
and connectors (connectors.py). ``Dataset`` builds them in dependency order and answers the
questions a test asks of the whole tenant; ``remove``/``restore`` route an administrator's
deletion to the concern that owns it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from emulator import lifecycle
from emulator.accounts import Account, Accounts
from emulator.attributes import TYPES as ATTRIBUTE_TYPES
from emulator.attributes import Attributes
from emulator.catalog import App, Catalog
from emulator.connectors import Connectors
from emulator.directory import Directory, DirectoryUser
from emulator.exclusions import Exclusions
from emulator.feed import DISTRIBUTIONS, ORDERS, Event, GrantFeed
from emulator.grants import CurrentGrant, CurrentGrants
from emulator.iam import IamRoles
from emulator.owners import Owners
from emulator.past_grants import PastGrant, PastGrants
from emulator.resources import Resources
from emulator.reviews import AccessReviews
from emulator.seed import Seed
from emulator.system_log import DAY as DAY_NS
from emulator.system_log import Kind, LogEvent, SystemLog, event_object
from emulator.tasks import GRANTED, Tasks, omitted
from emulator.timefmt import format_ns, to_ns
from emulator.users import Users


def _end_default() -> datetime:
    """The start of the previous hour: stable for an hour, and it leaves at least an hour
    between the last initial event and now for events added at run time."""
    now = datetime.now(UTC)
    return now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


class _CatalogScope:
    """The catalog's fields that other concerns own: where an entitlement sits (resources),
    how it is rated (attributes) and who owns an app (owners)."""

    def __init__(self, resources: Resources, attributes: Attributes, owners: Owners) -> None:
        self.resources = resources
        self.attributes = attributes
        self.owners = owners

    def entitlement_fields(self, position: int, k: int) -> dict[str, Any]:
        count = len(self.resources.catalog.apps[position].entitlement_ids)
        rating = self.attributes.ratings(position, count)[k]
        return {
            **self.resources.placement(position, k),
            "riskLevelValueId": rating.risk_level,
            "complianceFrameworkValueIds": list(rating.frameworks),
        }

    def app_owners(self, position: int) -> list[dict[str, Any]]:
        return self.owners.app_users(position)


class Dataset:
    """Apps, entitlements, users, app users, tickets, grant feed events, exclusions, the
    grants held now: one tenant, as ``catalog``, ``users``, ``exclusions``, ``feed``,
    ``directory``, ``accounts`` and ``grants``."""

    def __init__(
        self,
        seed: int = 1,
        events: int = 20_000,
        apps: int = 8,
        users: int = 2_000,
        exclusion_entitlements: int = 40,
        max_exclusions: int = 300,
        *,
        end: datetime | str | int | None = None,
        span_days: int = 180,
        catalog_apps: int = 120,
        catalog_entitlements: int | None = None,
        distribution: str = "uniform",
        grants_before_feed: int | None = None,
        ended_before_feed: int | None = None,
        order: str = "near",
        access_reviews: int = 3,
        ticket_ids: str = "id",
        log_background: int | None = None,
    ) -> None:
        if apps < 1 or users < 1 or events < 0 or span_days < 1:
            raise ValueError("need apps >= 1, users >= 1, events >= 0, span_days >= 1")
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {', '.join(DISTRIBUTIONS)}")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}")
        self.seed = seed
        self.distribution = distribution
        self.order = order
        self.end_ns = to_ns(end if end is not None else _end_default())
        key = Seed(seed)
        self.catalog = Catalog(
            key,
            feed_apps=apps,
            users=users,
            exclusion_entitlements=exclusion_entitlements,
            total_apps=catalog_apps,
            total_entitlements=catalog_entitlements,
            end_ns=self.end_ns,
        )
        self.users = Users(key, users, self.apps, self.end_ns)
        self.exclusions = Exclusions(key, self.catalog, self.users, max_exclusions)
        plan = lifecycle.LifecyclePlan(
            key,
            entitlements=self.catalog.feed_entitlements,
            users=users,
            featured=self.exclusions.first_members(lifecycle.FEATURED_PER_ENTITLEMENT),
            events=events,
        )
        self.feed = GrantFeed(
            key,
            self.catalog,
            self.users,
            plan,
            events=events,
            end_ns=self.end_ns,
            span_days=span_days,
            distribution=distribution,
            order=order,
            ticket_ids=ticket_ids,
        )
        # Accounts and the grants held now (the feed's, and those made before it: by default
        # one for every eight events, about as many as the feed holds at its end).
        self.directory = Directory(key, self.users, extra=users)
        # What an audit is scoped by: the apps' resources, the attributes entitlements are
        # rated with, owners, the service's roles and the apps' connectors. Each draws from
        # generators of its own, so everything above keeps its values.
        self.resources = Resources(key, self.catalog)
        self.attributes = Attributes(key, self.end_ns)
        self.owners = Owners(key, self.catalog, self.directory)
        self.iam = IamRoles(key, self.end_ns)
        self.connections = Connectors(key, self.catalog, self.resources, self.directory)
        self.catalog.attach_scope(_CatalogScope(self.resources, self.attributes, self.owners))
        self.accounts = Accounts(key, self.catalog, self.users)
        self.grants = CurrentGrants(
            key,
            self.accounts,
            self.feed,
            plan,
            before_feed=events // 8 if grants_before_feed is None else grants_before_feed,
        )
        # Grant periods that ended (the feed's, and those over before it: by default one for
        # every sixteen events).
        self.past = PastGrants(
            key,
            self.grants,
            ended_before_feed=events // 16 if ended_before_feed is None else ended_before_feed,
        )
        self.reviews = AccessReviews(
            key, count=access_reviews, users=self.users.ids, end_ns=self.end_ns
        )
        self.ticketing = Tasks(key, self.feed, self.users, self.reviews, grants=self.grants)
        # The system log: what the concerns above did, and sign-ins and integrations' reads
        # (by default one for every four events), over the feed's span.
        self.log = SystemLog(
            key,
            self.users,
            self.feed,
            self.exclusions,
            self.ticketing,
            background=events // 4 if log_background is None else log_background,
            start_ns=self.end_ns - span_days * DAY_NS,
            end_ns=self.end_ns,
        )

    # ----- catalog ----------------------------------------------------------------------------

    @property
    def apps(self) -> list[str]:
        """Ids of the apps the grant feed names."""
        return [app.id for app in self.catalog.feed_apps]

    @property
    def entitlements(self) -> list[tuple[str, str]]:
        """(app id, entitlement id) of every entitlement of the feed's apps."""
        return [(app.id, ent) for app in self.catalog.feed_apps for ent in app.entitlement_ids]

    @property
    def catalog_apps(self) -> list[App]:
        """Every app of the tenant, in the order the service lists them."""
        return self.catalog.apps

    @property
    def automated_entitlements(self) -> list[tuple[str, str]]:
        """Ground truth: every (app id, entitlement id) with automation on, in catalog order
        (removed ones left out)."""
        return self.catalog.automated_entitlements

    def is_automated(self, position: int, k: int) -> bool:
        return self.catalog.is_automated(position, k)

    def entitlement_exists(self, a: int, k: int) -> bool:
        return self.catalog.entitlement_exists(a, k)

    def has_entitlement(self, app_id: str, entitlement_id: str) -> bool:
        return self.catalog.has_entitlement(app_id, entitlement_id)

    def current_apps(self) -> list[int]:
        return self.catalog.current_apps()

    # ----- users ------------------------------------------------------------------------------

    @property
    def user_ids(self) -> list[str]:
        return self.users.ids

    def user(self, user_id: str) -> dict[str, Any]:
        """The raw User object (KeyError for an unknown id)."""
        index = self.users.index(user_id)
        if index is None:
            raise KeyError(user_id)
        return self.users.record(index)

    def app_user_id(self, app: int, user: int) -> str:
        return self.users.app_user_id(app, user)

    def user_of_app_user(self, app_user_id: str) -> str:
        return self.users.user_of_app_user(app_user_id)

    def directory_users(self) -> list[DirectoryUser]:
        """Ground truth: the directory as ``GET /api/v1/users`` lists it now (removed users
        left out), with each user's status in the service and in the directory."""
        return self.directory.truth()

    # ----- accounts and the grants held now ---------------------------------------------------

    def app_users(self) -> list[Account]:
        """Ground truth: every account the feed's apps list now, with its owner (None:
        nobody owns it), type and status (the catalog's other apps have none)."""
        return [
            self.accounts.truth(a, n)
            for a in self.catalog.current_apps()
            if a < len(self.catalog.feed_apps)
            for n in self.accounts.listed(a)
        ]

    def current_grants(self) -> list[CurrentGrant]:
        """Ground truth: the grants the service holds now (removals applied), by app,
        entitlement and app user; ``feed_knows`` False marks those older than the feed."""
        return self.grants.current()

    def past_grants(self) -> list[PastGrant]:
        """Ground truth: every grant period that ended, the feed's and those over before it
        began, by history id (what search/past-grants answers)."""
        return self.past.ended()

    # ----- what an audit is scoped by ---------------------------------------------------------
    # Each returns the objects its endpoint serves by default (unset fields sent empty), of
    # the apps and entitlements listed now.

    def app_resource_types(self) -> list[dict[str, Any]]:
        """Ground truth: every AppResourceType, app by app in catalog order."""
        return self.resources.types_truth()

    def app_resources(self) -> list[dict[str, Any]]:
        """Ground truth: every AppResource, app by app, type by type."""
        return self.resources.resources_truth()

    def app_owners(self) -> dict[str, list[dict[str, Any]]]:
        """Ground truth: each app's owners (Users; an empty list: nobody owns it)."""
        return self.owners.apps_truth()

    def entitlement_owners(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Ground truth: each (app id, entitlement id), its own owners (Users)."""
        return self.owners.entitlements_truth()

    def entitlement_owner_users(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Ground truth: each (app id, entitlement id), its owners as the v2 list sends
        them (AppEntitlementOwnerUser: ``appId``, ``entitlementId``, ``roleSlug``,
        ``createdAt``, ``user``)."""
        return self.owners.owner_users_truth()

    def attribute_types(self) -> list[dict[str, Any]]:
        """Ground truth: every AttributeType (``id``, ``name``)."""
        return [self.attributes.type_record(t) for t in range(len(ATTRIBUTE_TYPES))]

    def attribute_values(self, attribute_type_id: str | None = None) -> list[dict[str, Any]]:
        """Ground truth: every AttributeValue, type by type (or of one type)."""
        return [
            value
            for t, type_id in enumerate(self.attributes.type_ids)
            if attribute_type_id in (None, type_id)
            for value in self.attributes.values(t)
        ]

    def iam_roles(self) -> list[dict[str, Any]]:
        """Ground truth: every Role of the service, in the order it lists them."""
        return self.iam.records()

    def connectors(self) -> list[dict[str, Any]]:
        """Ground truth: every Connector, app by app in catalog order."""
        return self.connections.truth()

    def connector_secrets(self) -> list[str]:
        """Every secret string of every connector (its configuration's credentials, its
        ``downloadUrl``'s signature and token): none may reach a client's output."""
        return self.connections.secrets()

    # ----- the system log ----------------------------------------------------------------------

    def system_log(self) -> list[LogEvent]:
        """Ground truth: every event of the system log, oldest first."""
        return self.log.events()

    def system_log_objects(self) -> list[dict[str, Any]]:
        """Ground truth: the log's events as the newest release sends them, oldest first."""
        return [event_object(event) for event in self.log.events()]

    # ----- automation exclusions --------------------------------------------------------------

    @property
    def exclusion_entitlements(self) -> list[tuple[str, str]]:
        """The app entitlements chosen to have exclusions (removed ones included)."""
        return self.exclusions.entitlements

    def exclusion_entries(self, app_id: str, entitlement_id: str) -> list[dict[str, Any]]:
        """Ground truth: the raw exclusion entries of one app entitlement, in server order."""
        return self.exclusions.entries(app_id, entitlement_id)

    def excluded_users(self, at: str | datetime | int | None = None) -> list[dict[str, Any]]:
        """One row per automation exclusion: who, and whether they hold that entitlement at
        ``at`` (None: now)."""
        return self.exclusions.excluded_users({i[:3] for i in self.feed.grants_at(at)})

    # ----- grant feed -------------------------------------------------------------------------

    @property
    def total(self) -> int:
        """Events in server order so far (initial plus added)."""
        return self.feed.total

    @property
    def first_date(self) -> int:
        """A lower bound of every initial event date (ns)."""
        return self.feed.first_date

    def event(self, i: int) -> Event:
        return self.feed.event(i)

    def feed_object(self, e: Event) -> dict[str, Any]:
        return self.feed.feed_object(e)

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
        return self.feed.feed_entries(
            after=after,
            before=before,
            app_ids=app_ids,
            app_entitlement_refs=app_entitlement_refs,
            app_user_refs=app_user_refs,
            user_ids=user_ids,
        )

    def add_events(
        self, count: int = 0, dates: Iterable[str | datetime | int] | None = None
    ) -> int:
        """Append events (see GrantFeed.add_events); returns the new total."""
        return self.feed.add_events(count=count, dates=dates)

    def intervals(self) -> list[lifecycle.Interval]:
        """Every grant interval the feed so far implies (emulator/lifecycle.py's rules)."""
        return self.feed.intervals()

    def grants_at(self, at: str | datetime | int | None = None) -> list[lifecycle.Interval]:
        """The intervals holding at an instant (None: now, i.e. those not revoked)."""
        return self.feed.grants_at(at)

    # ----- tasks and access reviews ----------------------------------------------------------

    def tasks(self) -> list[dict[str, Any]]:
        """Ground truth: every Task object the service holds now (unset fields omitted)."""
        return [omitted(task) for task in self.ticketing.tasks()]

    def access_reviews(self) -> list[dict[str, Any]]:
        """Ground truth: every AccessReview object, in server order."""
        return [self.reviews.record(review) for review in self.reviews.reviews]

    def missing_tickets(self) -> list[str]:
        """Ticket ids the feed names whose task the service no longer has."""
        return self.ticketing.gone()

    def approvals(self) -> list[dict[str, Any]]:
        """Ground truth: one row per approval step of a task's policy history: the task,
        ``approved`` or ``denied``, by whom and when."""
        rows = []
        for task in self.tasks():
            for step in (task.get("policy") or {}).get("history", []):
                for verdict, action in step["approval"].items():
                    if verdict in ("approved", "denied"):
                        rows.append(
                            {
                                "task_id": task["id"],
                                "numeric_id": task["numericId"],
                                "verdict": verdict,
                                "user_id": action["userId"],
                                "at": action[f"{verdict}At"],
                            }
                        )
        return rows

    def grants_without_approval(self) -> list[dict[str, Any]]:
        """Ground truth: each distinct ADDED event of the feed that lacks an approval, and
        why: ``no_ticket`` (empty ticket id), ``ticket_not_found`` (no task of that id or
        numeric id), ``not_granted`` (the task is not a granted grant task, or still open),
        ``self_approved`` (granted, and every approval is by the grantee's own user). A grant
        a policy granted with no approval step is not listed."""
        by_ref: dict[str, dict[str, Any]] = {}
        for known in self.tasks():
            by_ref[known["id"]] = by_ref[known["numericId"]] = known
        feed = (entry["feed"] for entry in self.feed_entries())
        rows = []
        for (app, entitlement, user, kind, date), ticket in lifecycle.distinct_events(feed).items():
            if kind != lifecycle.ADDED:
                continue
            task = by_ref.get(ticket or "")
            grant = (task or {}).get("type", {}).get("grant", {})
            approvers = {
                step["approval"]["approved"]["userId"]
                for step in ((task or {}).get("policy") or {}).get("history", [])
                if "approved" in step["approval"]
            }
            if not ticket:
                reason = "no_ticket"
            elif task is None:
                reason = "ticket_not_found"
            elif grant.get("outcome") != GRANTED:
                reason = "not_granted"
            elif approvers and approvers == {self.user_of_app_user(user)}:
                reason = "self_approved"
            else:
                continue
            rows.append(
                {
                    "app_id": app,
                    "app_entitlement_id": entitlement,
                    "app_user_id": user,
                    "granted_at": format_ns(date),
                    "ticket_id": ticket or "",
                    "reason": reason,
                }
            )
        return rows

    def close_tasks(
        self, count: int | None = None, at: str | datetime | int | None = None
    ) -> list[str]:
        """Decide up to ``count`` open tasks (all if None), oldest first, at ``at`` (default
        now), as approvers do between two runs; returns their ids."""
        when = to_ns(at if at is not None else datetime.now(UTC))
        closed = self.ticketing.close(count, when)
        self.log.tasks_decided()
        return closed

    # ----- removals between runs --------------------------------------------------------------

    def remove(
        self,
        *,
        app_id: str | None = None,
        app_entitlement_id: str | None = None,
        user_id: str | None = None,
        app_user_id: str | None = None,
    ) -> None:
        """Delete something on the service, as an administrator would between two runs:

        - ``app_id``, ``app_entitlement_id`` and ``user_id``: one automation exclusion;
        - ``user_id`` alone: a user (gone from every exclusion list and from the directory;
          the accounts it owns still name it);
        - ``app_id`` and ``app_user_id``: an account (gone from its app's accounts, and its
          grants from the grants held now);
        - ``app_id`` and ``app_entitlement_id``: an app entitlement (its exclusions endpoint
          answers 404);
        - ``app_id`` alone: an app (every entitlement of it answers 404).

        The grant feed is history and keeps every event. ``restore()`` takes the same ids."""
        if app_user_id is not None:
            self._set_account_removed(app_id, app_entitlement_id, user_id, app_user_id, True)
            return
        self._set_removed(app_id, app_entitlement_id, user_id, removed=True)

    def restore(
        self,
        *,
        app_id: str | None = None,
        app_entitlement_id: str | None = None,
        user_id: str | None = None,
        app_user_id: str | None = None,
    ) -> None:
        """Undo remove() with the same ids: the exclusion, user, account, entitlement or app
        is back."""
        if app_user_id is not None:
            self._set_account_removed(app_id, app_entitlement_id, user_id, app_user_id, False)
            return
        self._set_removed(app_id, app_entitlement_id, user_id, removed=False)

    def _set_account_removed(
        self,
        app_id: str | None,
        entitlement_id: str | None,
        user_id: str | None,
        app_user_id: str,
        removed: bool,
    ) -> None:
        if app_id is None or entitlement_id is not None or user_id is not None:
            raise ValueError("name an account by app_id and app_user_id alone")
        self.accounts.set_removed(app_id, app_user_id, removed)

    def _set_removed(
        self, app_id: str | None, entitlement_id: str | None, user_id: str | None, *, removed: bool
    ) -> None:
        if app_id is not None and entitlement_id is not None:
            if user_id is None:
                self.catalog.set_entitlement_removed(app_id, entitlement_id, removed)
            else:
                self.exclusions.set_removed(app_id, entitlement_id, user_id, removed)
                self.log.record(  # an administrator's change, in the system log
                    Kind.UNEXCLUDE if removed else Kind.EXCLUDE,
                    self.log.admin(self.seed + len(user_id)),
                    resources=(
                        ("AppEntitlement", f"{app_id}/{entitlement_id}"),
                        ("User", user_id),
                    ),
                    user_agent="Mozilla/5.0 (console)",
                )
        elif app_id is not None and user_id is None:
            self.catalog.set_app_removed(app_id, removed)
        elif user_id is not None and app_id is None and entitlement_id is None:
            if self.directory.owns(user_id):
                self.directory.set_removed(user_id, removed)
            else:
                self.users.set_removed(user_id, removed)
        else:
            raise ValueError(
                "name an exclusion (app_id, app_entitlement_id, user_id), a user (user_id), "
                "an app entitlement (app_id, app_entitlement_id) or an app (app_id)"
            )
