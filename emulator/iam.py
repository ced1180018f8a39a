"""The service's own roles, ``GET /api/v1/iam/roles``, and who holds them (``User.roleIds``).

A tenant has the built-in roles every tenant has (Super Admin, Read-only Admin, Auditor, App
Admin, ...), two that only API clients get (``systemApiOnly``) and a few an administrator
made (not ``systemBuiltin``). People hold roles other than the API-only ones: the
directory's first users (``ADMINISTRATORS``, the system log's administrators too) are Super
Admins, the others draw theirs from a mix where plain users are common and admins rare. Who
holds a role says nothing of whether they are still enabled: the directory's statuses are
drawn on their own (emulator/users.py), so some admins are disabled or deleted there, the
question an audit of admin rights asks.

Roles draw from generators of their own (``{seed}-scoping:...``): the users' other fields
keep the values they had before roles pointed at real ids. Shapes from the vendor's
published OpenAPI (``c1.api.iam.v1.Role``).
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any, NamedTuple

from emulator import unpopulated
from emulator.paging import PageTokens, digest_of, list_page, page_range
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise

# The directory's first users: the tenant's administrators (Super Admins; the system log's
# administrators are the same people).
ADMINISTRATORS = 6
DAY = 86_400 * NS


class RoleSpec(NamedTuple):
    name: str  # the role's stable name (``Role.name``)
    display_name: str
    permissions: tuple[str, ...]
    service_roles: tuple[str, ...]
    builtin: bool = True
    api_only: bool = False
    weight: int = 0  # how often a person draws it (0: people never hold it)

    @property
    def admin(self) -> bool:
        """An administrator's role: what an audit of admin rights looks for."""
        return self.name.endswith("_admin")


READ = ("app.read", "app_entitlement.read", "app_user.read", "user.read", "grant.read")
ROLES: tuple[RoleSpec, ...] = (
    RoleSpec("super_admin", "Super Admin", ("*",), ("c1.admin",), weight=3),
    RoleSpec(
        "read_only_admin",
        "Read-only Admin",
        (*READ, "access_review.read", "policy.read", "system_log.read", "connector.read"),
        ("c1.admin.read_only",),
        weight=10,
    ),
    RoleSpec(
        "app_admin",
        "App Admin",
        (*READ, "app.write", "app_entitlement.write", "connector.write", "app_owner.write"),
        ("c1.app_admin",),
        weight=16,
    ),
    RoleSpec(
        "access_review_admin",
        "Access Review Admin",
        (*READ, "access_review.read", "access_review.write", "task.read"),
        ("c1.access_review_admin",),
        weight=8,
    ),
    RoleSpec(
        "integration_admin",
        "Integration Admin",
        ("app.read", "connector.read", "connector.write", "webhook.write"),
        ("c1.integration_admin",),
        weight=3,
    ),
    RoleSpec(
        "auditor",
        "Auditor",
        (*READ, "access_review.read", "task.read", "system_log.read", "policy.read"),
        ("c1.auditor",),
        weight=12,
    ),
    RoleSpec(
        "helpdesk",
        "Helpdesk",
        ("user.read", "task.read", "task.write"),
        ("c1.helpdesk",),
        weight=5,
    ),
    RoleSpec(
        "basic_user",
        "Basic User",
        ("request.create", "task.read_own", "app.read_requestable"),
        ("c1.user",),
        weight=40,
    ),
    RoleSpec(
        "api_read_only",
        "API Read-only",
        READ,
        ("c1.api.read_only",),
        api_only=True,
    ),
    RoleSpec(
        "directory_sync",
        "Directory Sync",
        ("user.read", "user.write", "app_user.write"),
        ("c1.api.directory_sync",),
        api_only=True,
    ),
    RoleSpec(
        "security_analyst",
        "Security Analyst",
        (*READ, "system_log.read", "task.read"),
        ("c1.auditor",),
        builtin=False,
        weight=6,
    ),
    RoleSpec(
        "compliance_officer",
        "Compliance Officer",
        ("access_review.read", "task.read", "policy.read"),
        ("c1.auditor",),
        builtin=False,
        weight=3,
    ),
)


@lru_cache(maxsize=64)
def role_ids(seed: int) -> tuple[str, ...]:
    """The id of each role of ``ROLES``, in that order (kept: every user asks)."""
    key = Seed(seed)
    return tuple(key.id("iam-role", role.name) for role in ROLES)


def roles_held(seed: int, index: int, count: int) -> list[str]:
    """The role ids person ``index`` of the directory holds: ``count`` distinct ones drawn
    from the people's mix (none for 0), a Super Admin's first for the administrators."""
    ids = role_ids(seed)
    rng = random.Random(f"{seed}-scoping:user-roles:{index}")
    drawable = [n for n, role in enumerate(ROLES) if role.weight]
    weights = [ROLES[n].weight for n in drawable]
    held: list[int] = [0] if index < ADMINISTRATORS else []
    for _ in range(count):
        n = rng.choices(drawable, weights)[0]
        if n not in held:
            held.append(n)
    return [ids[n] for n in held]


class IamRoles:
    """The tenant's roles, in the order the service lists them."""

    def __init__(self, seed: Seed, end_ns: int) -> None:
        self.ids = role_ids(seed.value)
        self._seed = seed.value
        self.end_ns = end_ns

    def admin_role_ids(self) -> set[str]:
        return {self.ids[n] for n, role in enumerate(ROLES) if role.admin}

    def record(self, n: int) -> dict[str, Any]:
        """Role ``n`` with every field present (EmitUnpopulated)."""
        role = ROLES[n]
        rng = random.Random(f"{self._seed}-scoping:iam-role:{n}")
        # built-in roles came with the tenant; custom ones later
        created = self.end_ns - (900 if role.builtin else rng.randrange(30, 600)) * DAY
        created = precise(created + rng.randrange(DAY), rng.choice((0, 3, 6, 9)))
        updated = precise(
            created + rng.randrange(max(1, self.end_ns - created)), rng.choice((0, 3, 6, 9))
        )
        return {
            "createdAt": format_ns(created),
            "deletedAt": None,
            "displayName": role.display_name,
            "id": self.ids[n],
            "name": role.name,
            "permissions": list(role.permissions),
            "serviceRoles": list(role.service_roles),
            "systemApiOnly": role.api_only,
            "systemBuiltin": role.builtin,
            "updatedAt": format_ns(updated),
        }

    def records(self) -> list[dict[str, Any]]:
        return [self.record(n) for n in range(len(ROLES))]


def list_roles(
    roles: IamRoles, tokens: PageTokens, query: dict[str, list[str]], emit_unpopulated: bool
) -> dict[str, Any]:
    """One page of ``GET /api/v1/iam/roles``."""
    positions, next_token = page_range(tokens, digest_of(["iam_roles"]), query, len(ROLES))
    items = [roles.record(n) for n in positions]
    if not emit_unpopulated:
        items = [unpopulated.stripped(item) for item in items]
    return list_page(items, next_token, emit_unpopulated, expanded=False)
