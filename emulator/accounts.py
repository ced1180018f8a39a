"""App users (accounts): who has an account in each app and who owns it, and the endpoint
that lists them, ``GET /api/v1/apps/{app_id}/app_users``.

An account is one app's, not a person's: its owner is ``identityUserId``, a user of the
directory. Each of the feed's apps has an account for every user (the grant feed may name any
of them) and a few accounts nobody owns (service and system accounts, with an empty owner),
which the feed never names; the catalog's other apps have none. Account and owner states vary
on their own: an enabled account of a user deleted in the directory, a deleted account of an
enabled user. ``Accounts.set_removed`` deletes an account between runs (it leaves the list,
and its grants leave the service's current grants; the feed is history and keeps its events).

Shapes from the vendor's published OpenAPI: ``AppUserView = {appUser, appPath,
identityUserPath, lastUsagePath}`` around an ``AppUser`` with every field (``status`` is an
object ``{status, details}``); unset fields sent empty or omitted as the settings say.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from emulator import unpopulated
from emulator.catalog import Catalog
from emulator.errors import NOT_FOUND, ApiError
from emulator.paging import PageTokens, digest_of, list_page, page_range
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise
from emulator.users import Users

# An account's own status, and how often (in 100).
ACCOUNT_STATUSES = ("STATUS_ENABLED", "STATUS_DISABLED", "STATUS_DELETED", "STATUS_UNSPECIFIED")
ACCOUNT_STATUS_WEIGHTS = (84, 8, 6, 2)
ROBOT_ROLES = ("deploy", "sync", "backup", "ci", "audit")


class Account(NamedTuple):
    """Ground truth of one account: its ids, its owner (None: nobody owns it) and states."""

    app_id: str
    app_user_id: str
    user_id: str | None
    app_user_type: str
    status: str


class Accounts:
    """The accounts of the feed's apps by (app index, account number): numbers below the
    user count are the users' own accounts (number = user index), the rest accounts nobody
    owns; and the accounts removed since (``Dataset.remove``)."""

    def __init__(self, seed: Seed, catalog: Catalog, users: Users) -> None:
        self.seed = seed
        self.catalog = catalog
        self.users = users
        self._owned = len(users.ids)
        apps = range(len(catalog.feed_apps))
        self._unowned = [
            [seed.id("service-account", a, j) for j in range(2 + seed.mix(20, a) % 3)] for a in apps
        ]
        self._unowned_index = {
            account_id: (a, self._owned + j)
            for a in apps
            for j, account_id in enumerate(self._unowned[a])
        }
        self._removed: set[tuple[int, int]] = set()  # what remove() deleted since

    # ----- lookups ----------------------------------------------------------------------------

    def count(self, a: int) -> int:
        """How many accounts the feed's app ``a`` has (removed ones included)."""
        return self._owned + len(self._unowned[a])

    def unowned(self, a: int) -> range:
        """The account numbers of app ``a`` that nobody owns."""
        return range(self._owned, self.count(a))

    def app_user_id(self, a: int, n: int) -> str:
        return (
            self.users.app_user_id(a, n) if n < self._owned else self._unowned[a][n - self._owned]
        )

    def owner(self, n: int) -> int | None:
        """The user index owning account number ``n`` (None: nobody)."""
        return n if n < self._owned else None

    def find(self, app_id: str, app_user_id: str) -> tuple[int, int] | None:
        """(app index, account number) of an account of one of the feed's apps."""
        found = self._unowned_index.get(app_user_id) or self.users.app_user(app_user_id)
        if found is None or self.catalog.feed_apps[found[0]].id != app_id:
            return None
        return found

    def is_removed(self, a: int, n: int) -> bool:
        return (a, n) in self._removed

    @property
    def any_removed(self) -> bool:
        return bool(self._removed)

    def listed(self, a: int) -> list[int]:
        """The account numbers app ``a`` lists now, in server order."""
        if not self._removed:
            return list(range(self.count(a)))
        return [n for n in range(self.count(a)) if (a, n) not in self._removed]

    def set_removed(self, app_id: str, app_user_id: str, removed: bool) -> None:
        """Delete an account or bring it back. A single set operation needs no lock: readers
        only test membership."""
        if (found := self.find(app_id, app_user_id)) is None:
            raise ValueError(f"no app user {app_user_id!r} in app {app_id!r}")
        if removed:
            self._removed.add(found)
        else:
            self._removed.discard(found)

    # ----- objects ----------------------------------------------------------------------------

    def app_user(self, a: int, n: int) -> dict[str, Any]:
        """The AppUser object of account ``n`` of app ``a``, every field present."""
        rng = random.Random(f"{self.seed.value}:app-user:{a}:{n}")
        app = self.catalog.feed_apps[a]
        owner = self.owner(n)

        def when(back_days: int) -> str:
            offset = rng.randrange(back_days * 86_400) * NS
            return format_ns(precise(self.catalog.end_ns - offset, rng.choice((0, 3, 6, 9))))

        status = rng.choices(ACCOUNT_STATUSES, ACCOUNT_STATUS_WEIGHTS)[0]
        if owner is not None:
            first, last = self.users.person(owner)
            email = self.users.email(owner)
            name, username = f"{first} {last}", email.split("@", 1)[0]
            kind, nhi = "APP_USER_TYPE_USER", "APP_USER_NHI_TYPE_UNSPECIFIED"
            employee_ids = [f"E{owner:06d}"] if rng.random() < 0.6 else []
        else:
            j = n - self._owned
            role = ROBOT_ROLES[(a + j) % len(ROBOT_ROLES)]
            name, username = f"{app.display_name} {role} bot", f"svc-{role}-{j}"
            email = f"{username}@robots.example.com" if rng.random() < 0.5 else ""
            kind = "APP_USER_TYPE_SYSTEM_ACCOUNT" if j == 0 else "APP_USER_TYPE_SERVICE_ACCOUNT"
            nhi = "APP_USER_NHI_TYPE_APP_REGISTRATION" if j % 2 else "APP_USER_NHI_TYPE_UNSPECIFIED"
            employee_ids = []
        profile: dict[str, Any] | None = None
        if rng.random() < 0.6:
            profile = {"login": username, "mfa": rng.random() < 0.7}
            if rng.random() < 0.3:
                profile["groups"] = [rng.choice(("admins", "devs", "ops")), rng.randrange(10)]
        return {
            "agentStatus": "APP_USER_AGENT_STATUS_UNSPECIFIED",
            "appId": app.id,
            "appUserType": kind,
            "createdAt": when(900),
            "deletedAt": when(10) if status == "STATUS_DELETED" else None,
            "displayName": name,
            "email": email,
            "emails": [email] if email else [],
            "employeeIds": employee_ids,
            "id": self.app_user_id(a, n),
            "identityUserId": self.users.ids[owner] if owner is not None else "",
            "isExternal": owner is not None and rng.random() < 0.05,
            "nhiDetail": "",
            "nhiType": nhi,
            "profile": profile,
            "status": {"details": "", "status": status},
            "updatedAt": when(60),
            "username": username,
            "usernames": [username],
        }

    def view(self, a: int, n: int, emit_unpopulated: bool) -> dict[str, Any]:
        """The AppUserView of an account (nothing is expanded, so its paths are empty)."""
        app_user = self.app_user(a, n)
        if emit_unpopulated:
            return {"appUser": app_user, "appPath": "", "identityUserPath": "", "lastUsagePath": ""}
        stripped = unpopulated.stripped(app_user)
        stripped["status"] = unpopulated.stripped(app_user["status"])
        return {"appUser": stripped}

    def truth(self, a: int, n: int) -> Account:
        app_user = self.app_user(a, n)
        owner = self.owner(n)
        return Account(
            app_user["appId"],
            app_user["id"],
            None if owner is None else self.users.ids[owner],
            app_user["appUserType"],
            app_user["status"]["status"],
        )


def list_app_users(
    accounts: Accounts,
    tokens: PageTokens,
    app_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps/{app_id}/app_users``; 404 for an unknown or removed
    app, an empty list for an app of the catalog that has no accounts."""
    found = accounts.catalog.app(app_id)
    if found is None or found[0] not in accounts.catalog.current_apps():
        raise ApiError(404, NOT_FOUND, "app not found")
    a = found[0]
    listed = accounts.listed(a) if a < len(accounts.catalog.feed_apps) else []
    positions, next_token = page_range(tokens, digest_of(["app_users", app_id]), query, len(listed))
    views = [accounts.view(a, listed[p], emit_unpopulated) for p in positions]
    return list_page(views, next_token, emit_unpopulated)
