"""The directory: every user of the tenant, ``GET /api/v1/users``.

The directory lists every user of emulator/users.py (those with accounts), then as many
people again with no account in the feed's apps: a superset of the users of the automation
exclusions, larger than it. Each has its status in the service (``status``) and in the directory
(``directoryStatus``), which differ now and then (a user disabled in the directory, still
enabled in the service). A user removed (``Dataset.remove(user_id=...)``) leaves the list;
the accounts it owned keep naming it as their owner, as on a real tenant where a person is
deleted and their accounts are not.

Shapes from the vendor's published OpenAPI: ``UserView = {user, userId, managersPath,
delegatedUserPath, directoriesPath, rolesPath, objectPermissions}``; nothing is expanded, so
the paths are empty.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from emulator import unpopulated
from emulator.paging import PageTokens, digest_of, list_page, page_range
from emulator.seed import Seed
from emulator.users import UserContext, Users, make_user


class DirectoryUser(NamedTuple):
    """Ground truth of one user of the directory: None where the record has no name or
    email; a status it omits is its enum's zero value, ``UNKNOWN``."""

    user_id: str
    display_name: str | None
    email: str | None
    status: str
    directory_status: str


class Directory:
    """Every user of the tenant: the users (emulator/users.py: those with accounts in the
    feed's apps, whom exclusions and grants name), then ``extra`` people with no account in
    those apps, so the directory is larger than any list of excluded users; and which of the
    extra people were removed (the users' removals are ``Users``')."""

    def __init__(self, seed: Seed, users: Users, extra: int) -> None:
        self.users = users
        self._first_extra = len(users.ids)
        self._extra = [
            seed.id("user", u) for u in range(self._first_extra, self._first_extra + extra)
        ]
        self._extra_index = {uid: self._first_extra + j for j, uid in enumerate(self._extra)}
        context = users.context
        self._context = UserContext(
            context.seed, [*users.ids, *self._extra], context.app_ids, self._account, context.end_ns
        )
        self._removed: set[int] = set()  # extra people remove() deleted since

    def _account(self, a: int, u: int) -> str:
        """A user's account in app ``a`` (an attribute's source): none for the extra people."""
        return self.users.app_user_id(a, u) if u < self._first_extra else ""

    @property
    def people(self) -> int:
        """How many people the directory knows, removed ones included: user indexes
        ``0 .. people - 1``."""
        return self._first_extra + len(self._extra)

    def listed(self) -> list[int]:
        """The user indexes the directory lists now, in server order."""
        users = [u for u in range(self._first_extra) if not self.users.is_removed(u)]
        extra = range(self._first_extra, self._first_extra + len(self._extra))
        return users + [u for u in extra if u not in self._removed]

    def record(self, u: int) -> dict[str, Any]:
        """The raw User object of user ``u``."""
        return self.users.record(u) if u < self._first_extra else make_user(self._context, u)

    def owns(self, user_id: str) -> bool:
        """Whether ``user_id`` is one of the extra people (their removals are kept here)."""
        return user_id in self._extra_index

    def set_removed(self, user_id: str, removed: bool) -> None:
        """Remove one of the extra people from the directory or bring them back."""
        u = self._extra_index[user_id]
        if removed:
            self._removed.add(u)
        else:
            self._removed.discard(u)

    def truth(self) -> list[DirectoryUser]:
        """The directory as it lists now."""
        rows = []
        for u in self.listed():
            user = self.record(u)
            rows.append(
                DirectoryUser(
                    user["id"],
                    user.get("displayName"),
                    user.get("email"),
                    user.get("status", "UNKNOWN"),
                    user.get("directoryStatus", "UNKNOWN"),
                )
            )
        return rows


def list_users(
    directory: Directory, tokens: PageTokens, query: dict[str, list[str]], emit_unpopulated: bool
) -> dict[str, Any]:
    """One page of ``GET /api/v1/users``."""
    current = directory.listed()
    positions, next_token = page_range(tokens, digest_of(["users"]), query, len(current))
    views = []
    for p in positions:
        user = directory.record(current[p])
        if emit_unpopulated:
            views.append(
                {
                    "user": unpopulated.filled(user, unpopulated.USER),
                    "userId": user["id"],
                    "managersPath": "",
                    "delegatedUserPath": "",
                    "directoriesPath": "",
                    "rolesPath": "",
                    "objectPermissions": None,
                }
            )
        else:
            views.append({"user": user, "userId": user["id"]})
    return list_page(views, next_token, emit_unpopulated)
