"""The tenant's users: their ids, their app users, and User records (the User object of the
service's newest published shapes) generated per user index from the seed.

Field presence varies on purpose: protobuf JSON omits unset fields, so a client must not
expect any of them; enum fields include values newer than the spec (`SUSPENDED`,
`USER_TYPE_ROBOT`) that clients must tolerate. `roleIds` are ids of the service's roles
(emulator/iam.py, which also decides who holds which).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from emulator import iam
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


FIRST_NAMES = _words(
    "Ada Alan Barbara Claude Dennis Edsger Frances Grace Hedy Ivan John Katherine Ken Linus "
    "Margaret Niklaus Radia Shafi Sophie Tim Whitfield Yukihiro Zoe Oluwaseun Chidi Mei "
    "Ravi"
)
LAST_NAMES = _words(
    "Lovelace Turing Liskov Shannon Ritchie Dijkstra Allen Hopper Lamarr Sutherland Backus "
    "Johnson Thompson Torvalds Hamilton Wirth Perlman Goldwasser Wilson Berners-Lee Diffie "
    "Matsumoto Okafor Nwosu Zhang Sharma O'Brien"
)
DEPARTMENTS = ("Engineering", "Finance", "Sales", "Support", "Legal", "People", "Security")
JOB_TITLES = ("Engineer", "Manager", "Analyst", "Director", "Intern", "Architect", "Counsel")
STATUSES = ("UNKNOWN", "ENABLED", "ENABLED", "ENABLED", "DISABLED", "DELETED", "SUSPENDED")
USER_TYPES = (
    "USER_TYPE_HUMAN",
    "USER_TYPE_HUMAN",
    "USER_TYPE_HUMAN",
    "USER_TYPE_SERVICE",
    "USER_TYPE_SYSTEM",
    "USER_TYPE_AGENT",
    "USER_TYPE_UNSPECIFIED",
    "USER_TYPE_ROBOT",
)
ORIGINS = (
    "USER_ORIGIN_DIRECTORY",
    "USER_ORIGIN_DIRECTORY",
    "USER_ORIGIN_LOCAL",
    "USER_ORIGIN_SYSTEM",
)
EMPLOYMENT_TYPES = ("full_time", "part_time", "contractor", "intern")
EMPLOYMENT_STATUSES = ("active", "on_leave", "terminated")


@lru_cache(maxsize=1 << 16)
def person(seed: int, index: int) -> tuple[str, str]:
    """(first, last) name of user `index`: shared by the User and its app users, its events
    and its email address. Kept: asked for again by each of them, and seeding a generator
    from text is most of the cost of a draw (in a profile of the end-to-end tests, these
    draws were the emulator's largest cost after encoding its answers)."""
    rng = random.Random(f"{seed}:person:{index}")
    return rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)


def email_of(seed: int, index: int) -> str:
    first, last = person(seed, index)
    local = f"{first}.{last}".lower().replace("'", "")
    return f"{local}.{index}@example.com"


@dataclass(frozen=True)
class UserContext:
    """What a user record refers to outside itself (ids of other users, apps, app users)."""

    seed: int
    user_ids: Sequence[str]
    app_ids: Sequence[str]
    app_user_id: Callable[[int, int], str]  # (app index, user index) -> app user id
    end_ns: int


def make_user(ctx: UserContext, index: int) -> dict[str, Any]:
    """The raw User object exactly as the API serialises it."""
    rng = random.Random(f"{ctx.seed}:user:{index}")
    # The fields of the newest release draw from their own sequence: the others keep their
    # values from before those fields existed.
    newest = random.Random(f"{ctx.seed}:user-newest:{index}")
    first, last = person(ctx.seed, index)
    email = email_of(ctx.seed, index)
    username = email.split("@", 1)[0]

    def when(back_days: float) -> str:
        offset = int(rng.uniform(0, back_days) * 86_400 * NS)
        return format_ns(precise(ctx.end_ns - offset, rng.choice((0, 3, 6, 9))))

    def sources(value: str) -> list[dict[str, Any]]:
        found = []
        for _ in range(rng.randint(1, 2)):
            app = rng.randrange(len(ctx.app_ids))
            found.append(
                {
                    "appId": ctx.app_ids[app],
                    "appUserId": ctx.app_user_id(app, index),
                    "appUserProfileAttributeKey": rng.choice(("department", "title", "mail")),
                    "priority": newest.randrange(1, 4),
                    "userAttributeMappingId": f"uam-{rng.randrange(10_000):04d}",
                    "value": value,
                }
            )
        return found

    def other_user() -> str:
        return ctx.user_ids[rng.randrange(len(ctx.user_ids))]

    status = rng.choice(STATUSES)
    user: dict[str, Any] = {"id": ctx.user_ids[index]}
    user["createdAt"] = when(720)
    user["updatedAt"] = when(30)
    if status == "DELETED" or rng.random() < 0.05:
        user["deletedAt"] = when(10)
    if rng.random() < 0.1:
        user["delegatedUserId"] = other_user()
    department = rng.choice(DEPARTMENTS)
    if rng.random() < 0.85:
        user["department"] = department
        if rng.random() < 0.6:
            user["departmentSources"] = sources(department)
    if rng.random() < 0.9:
        user["directoryIds"] = [f"dir-{rng.randrange(3)}" for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.9:
        user["directoryStatus"] = rng.choice(STATUSES)
        if rng.random() < 0.3:
            user["directoryStatusSources"] = sources(user["directoryStatus"])
    user["displayName"] = f"{first} {last}"
    if rng.random() < 0.95:
        user["email"] = email
        if rng.random() < 0.5:
            user["emailSources"] = sources(email)
        alias = f"{username}@corp.example.org"
        user["emails"] = [email] + ([alias] if rng.random() < 0.3 else [])
    if rng.random() < 0.7:
        employee_id = f"E{index:06d}"
        user["employeeIds"] = [employee_id]
        if rng.random() < 0.5:
            user["employeeIdSources"] = sources(employee_id)
    if rng.random() < 0.7:
        user["employmentStatus"] = rng.choice(EMPLOYMENT_STATUSES)
        if rng.random() < 0.4:
            user["employmentStatusSources"] = sources(user["employmentStatus"])
    if rng.random() < 0.7:
        user["employmentType"] = rng.choice(EMPLOYMENT_TYPES)
        if rng.random() < 0.4:
            user["employmentTypeSources"] = sources(user["employmentType"])
    if rng.random() < 0.8:
        user["jobTitle"] = rng.choice(JOB_TITLES)
        if rng.random() < 0.4:
            user["jobTitleSources"] = sources(user["jobTitle"])
    if rng.random() < 0.75:
        managers = [other_user() for _ in range(rng.randint(1, 2))]
        user["managerIds"] = managers
        if rng.random() < 0.5:
            user["managerSources"] = [s for m in managers for s in sources(m)]
    user["origin"] = newest.choice(ORIGINS)
    if rng.random() < 0.8:
        user["profile"] = _profile(rng, first, last)
    # Which roles of the service (emulator/iam.py) a person holds draws from its own
    # generator; these draws, once the made-up role numbers, are kept so that every later
    # field keeps its value.
    roles = 0
    if rng.random() < 0.5:
        roles = rng.randint(1, 3)
        for _ in range(roles):
            rng.randrange(6)
    if role_ids := iam.roles_held(ctx.seed, index, roles):
        user["roleIds"] = role_ids
    user["status"] = status
    user["type"] = rng.choice(USER_TYPES)
    if rng.random() < 0.9:
        user["username"] = username
        if rng.random() < 0.4:
            user["usernameSources"] = sources(username)
        alias = f"{first[0]}{last}".lower()
        user["usernames"] = [username] + ([alias] if rng.random() < 0.4 else [])
    return user


def _profile(rng: random.Random, first: str, last: str) -> dict[str, Any]:
    """A free-form profile (protobuf Struct): strings, numbers, bools, nulls, nesting."""
    profile: dict[str, Any] = {"givenName": first, "familyName": last}
    if rng.random() < 0.6:
        profile["costCenter"] = rng.randrange(100, 999)
    if rng.random() < 0.4:
        profile["fte"] = round(rng.uniform(0.2, 1.0), 2)
    if rng.random() < 0.5:
        profile["remote"] = rng.random() < 0.5
    if rng.random() < 0.2:
        profile["nickname"] = None
    if rng.random() < 0.5:
        profile["address"] = {
            "city": rng.choice(("Lagos", "Lyon", "Osaka", "Austin", "Pune")),
            "floor": rng.randrange(1, 30),
            "desk": {"row": rng.randrange(1, 9), "tags": ["window"] if rng.random() < 0.5 else []},
        }
    if rng.random() < 0.4:
        profile["groups"] = [rng.choice(("admins", "devs", "ops", "all")), rng.randrange(10)]
    return profile


class Users:
    """The tenant's users, their accounts in the feed's apps (app users), and which users were
    removed; records are generated on demand from the seed."""

    def __init__(self, seed: Seed, count: int, app_ids: Sequence[str], end_ns: int) -> None:
        self.ids: list[str] = [seed.id("user", u) for u in range(count)]
        self._index = {uid: u for u, uid in enumerate(self.ids)}
        self._app_ids = list(app_ids)
        self._app_users = [
            [seed.id("appuser", a, u) for u in range(count)] for a in range(len(app_ids))
        ]
        self._app_user_index = {
            auid: (a, u) for a, ids in enumerate(self._app_users) for u, auid in enumerate(ids)
        }
        self.context = UserContext(seed.value, self.ids, self._app_ids, self.app_user_id, end_ns)
        self._removed: set[int] = set()  # what remove() deleted since (restore() undoes it)

    def index(self, user_id: str) -> int | None:
        return self._index.get(user_id)

    def app_user_id(self, app: int, user: int) -> str:
        return self._app_users[app][user]

    def app_user(self, app_user_id: str) -> tuple[int, int] | None:
        """(app, user) indexes of an app user id."""
        return self._app_user_index.get(app_user_id)

    def user_of_app_user(self, app_user_id: str) -> str:
        """The user id behind an app user id (KeyError for an unknown one)."""
        return self.ids[self._app_user_index[app_user_id][1]]

    def person(self, index: int) -> tuple[str, str]:
        return person(self.context.seed, index)

    def email(self, index: int) -> str:
        return email_of(self.context.seed, index)

    def record(self, index: int) -> dict[str, Any]:
        """The raw User object of user ``index``."""
        return make_user(self.context, index)

    def is_removed(self, index: int) -> bool:
        return index in self._removed

    @property
    def any_removed(self) -> bool:
        return bool(self._removed)

    def set_removed(self, user_id: str, removed: bool) -> None:
        """Remove a user (gone from every exclusion list) or bring them back. A single set
        operation needs no lock: readers only test membership."""
        if (u := self._index.get(user_id)) is None:
            raise ValueError(f"no user {user_id!r}")
        if removed:
            self._removed.add(u)
        else:
            self._removed.discard(u)
