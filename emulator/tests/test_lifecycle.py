"""Grant lifecycles: the feed tells coherent histories, and the ground truth of access (intervals,
holders at an instant, excluded users) follows the lifecycle rules."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from collections import Counter
from typing import Any

import pytest

from emulator import Dataset, Emulator, lifecycle
from emulator.tests.conftest import (
    END,
    small_dataset,
)
from emulator.timefmt import parse_rfc3339

# ----- grant lifecycles and the ground truth of access -----------------------------------


def catalog_fingerprint(ds: Dataset) -> str:
    catalog = {
        "apps": [(ds.feed.expanded_app(a), ds.entitlements) for a in range(len(ds.apps))],
        "users": ds.user_ids,
        "app_users": [
            ds.app_user_id(a, u) for a in range(len(ds.apps)) for u in range(len(ds.user_ids))
        ],
        "exclusions": [
            [key, [e["appUserId"] for e in ds.exclusion_entries(*key)]]
            for key in ds.exclusion_entitlements
        ],
    }
    return hashlib.sha256(json.dumps(catalog).encode()).hexdigest()[:16]


def test_lifecycles_leave_the_catalog_as_it_was() -> None:
    # Pinned from the generator before grant lifecycles (meltano.yml names the default
    # dataset's exclusion entitlements): events may change, apps/users/exclusions may not.
    assert catalog_fingerprint(Dataset(events=10, end=END)) == "44cedac7f09b21f5"
    assert catalog_fingerprint(small_dataset(events=10)) == "b52ff591fba327c4"


def history(*events: tuple[str, str, str | None], app_user: str = "u1") -> list[dict[str, Any]]:
    """Feed objects of one grant from (type, date, ticket id)."""
    return [
        {
            "appId": "a",
            "appEntitlementId": "e",
            "appUserId": app_user,
            "eventType": "GRANT_EVENT_TYPE_" + kind,
            "date": date,
        }
        | ({"ticketId": ticket} if ticket else {})
        for kind, date, ticket in events
    ]


T1, T2, T3, T4 = (f"2025-01-0{d}T00:00:00Z" for d in range(1, 5))


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # granted, revoked, granted again: two intervals, tickets on both ends
        (
            [("ADDED", T1, "t1"), ("REMOVED", T2, "t2"), ("ADDED", T3, None)],
            [(T1, T2, "t1", "t2"), (T3, None, None, None)],
        ),
        # first event REMOVED: held since before the data begins
        (
            [("REMOVED", T2, "t9"), ("ADDED", T3, "t3")],
            [(None, T2, None, "t9"), (T3, None, "t3", None)],
        ),
        # ADDED while held changes nothing; REMOVED while not held (not first) neither
        (
            [
                ("ADDED", T1, "t1"),
                ("ADDED", T2, "t2"),
                ("REMOVED", T3, None),
                ("REMOVED", T4, None),
            ],
            [(T1, T3, "t1", None)],
        ),
        # unknown types never change a grant; input order does not matter
        (
            [("MODIFIED", T2, None), ("UNSPECIFIED", T3, None), ("ADDED", T1, None)],
            [(T1, None, None, None)],
        ),
        # one instant: REMOVED applies before ADDED, while held (a re-grant) ...
        (
            [("ADDED", T1, None), ("ADDED", T2, "b"), ("REMOVED", T2, "a")],
            [(T1, T2, None, "a"), (T2, None, "b", None)],
        ),
        # ... and while not held: the grant is reported, not hidden
        (
            [
                ("ADDED", T1, None),
                ("REMOVED", T2, None),
                ("ADDED", T3, None),
                ("REMOVED", T3, None),
            ],
            [(T1, T2, None, None), (T3, None, None, None)],
        ),
        # ... also as the grant's first events
        (
            [("ADDED", T1, None), ("REMOVED", T1, None)],
            [(None, T1, None, None), (T1, None, None, None)],
        ),
        # at-least-once delivery: duplicates of the key count once, mixed precision is one instant
        (
            [("ADDED", T1, "t"), ("ADDED", "2025-01-01T00:00:00.000Z", "t"), ("REMOVED", T2, None)],
            [(T1, T2, "t", None)],
        ),
    ],
)
def test_lifecycle_rules(events, expected) -> None:
    got = lifecycle.intervals(history(*events))
    as_ns = [
        (None if g is None else parse_rfc3339(g), None if r is None else parse_rfc3339(r), gt, rt)
        for g, r, gt, rt in expected
    ]
    assert [
        (i.granted_at, i.revoked_at, i.granted_ticket_id, i.revoked_ticket_id) for i in got
    ] == as_ns
    assert all(i[:3] == ("a", "e", "u1") for i in got)


def test_held_at_an_instant() -> None:
    intervals = lifecycle.intervals(
        history(("REMOVED", T2, None), ("ADDED", T3, None))
        + history(("ADDED", T1, None), ("REMOVED", T3, None), app_user="u2")
    )

    def holders(at: str) -> list[str]:
        return sorted(i.app_user_id for i in lifecycle.held_at(intervals, parse_rfc3339(at)))

    assert holders("2024-12-31T00:00:00Z") == ["u1"]  # held since before the data
    assert holders(T1) == ["u1", "u2"]  # granted at the instant: held
    assert holders(T2) == ["u2"]  # revoked at the instant: not held
    assert holders(T3) == ["u1"]
    assert [i.app_user_id for i in lifecycle.held_at(intervals)] == ["u1"]


def state_changes(ds: Dataset) -> tuple[int, int]:
    """(ADDED/REMOVED events that changed their grant, all such events) among every grant's
    events after its first, replaying the rules in date order (REMOVED first at one instant)."""
    events = lifecycle.distinct_events(e["feed"] for e in ds.feed_entries())
    ordered = sorted(
        (date, kind == lifecycle.ADDED, grant)
        for (*grant_parts, kind, date), _ in events.items()
        if kind in (lifecycle.ADDED, lifecycle.REMOVED)
        for grant in [tuple(grant_parts)]
    )
    held: dict[tuple[str, ...], bool] = {}
    changed = 0
    followers = 0
    for _, is_added, grant in ordered:
        if grant in held:
            followers += 1
            changed += held[grant] != is_added
        held[grant] = is_added
    return changed, followers


def test_feed_tells_coherent_grant_lifecycles(ds: Dataset) -> None:
    changed, total = state_changes(ds)
    assert total > len(ds.feed_entries()) / 2
    assert changed / total > 0.9  # independent draws change about half
    intervals = ds.intervals()
    per_grant = Counter(i[:3] for i in intervals)
    assert sum(n > 1 for n in per_grant.values()) > len(per_grant) / 4  # re-granted
    assert any(i.granted_at is None for i in intervals)  # held since before the feed
    assert any(i.revoked_at is not None and i.granted_at is not None for i in intervals)
    current = ds.grants_at()
    assert 0 < len(current) < len(per_grant)
    entries = [e["feed"] for e in ds.feed_entries()]
    instants = Counter(
        (f["appId"], f["appEntitlementId"], f["appUserId"], f["date"]) for f in entries
    )
    pairs = [k for k, n in instants.items() if n > 1]
    assert pairs  # ADDED and REMOVED of one grant at one instant
    for app, entitlement, user, date in pairs:
        kinds = {
            f["eventType"]
            for f in entries
            if (f["appId"], f["appEntitlementId"], f["appUserId"], f["date"])
            == (app, entitlement, user, date)
        }
        assert kinds == {lifecycle.ADDED, lifecycle.REMOVED}
    # Grants with history only in the first or the last part of the window, not all spanning it.
    first = {}
    for f in entries:
        key = (f["appId"], f["appEntitlementId"], f["appUserId"])
        first[key] = min(first.get(key, parse_rfc3339(f["date"])), parse_rfc3339(f["date"]))
    span = (min(first.values()), max(first.values()))
    assert span[1] - span[0] > (parse_rfc3339(END) - span[0]) / 2


def test_excluded_users_hold_what_they_are_excluded_from() -> None:
    # The demo's dataset: its question about disabled excluded users must have answers.
    rows = Dataset(events=30_000, end=END).excluded_users()
    holding = [r for r in rows if r["holds_entitlement"]]
    assert 0 < len(holding) < len(rows)
    assert any(r["directory_status"] == "DISABLED" for r in holding)
    assert len({(r["app_id"], r["app_entitlement_id"]) for r in holding}) > 10


def test_added_events_continue_lifecycles(fresh: Emulator) -> None:
    ds = fresh.dataset
    before = ds.intervals()
    fresh.add_events(count=300)
    changed, total = state_changes(ds)
    assert changed / total > 0.9
    new = [ds.event(i) for i in range(200, ds.total)]
    toggles = [e for e in new if e.event_type in (lifecycle.ADDED, lifecycle.REMOVED)]
    assert len(toggles) > 200
    assert {e.event_type for e in new} > {lifecycle.ADDED, lifecycle.REMOVED}
    after = ds.intervals()
    assert len({i[:3] for i in after} - {i[:3] for i in before}) < len(toggles) / 3
    assert after != before


def test_a_million_events_cost_little_memory() -> None:
    tracemalloc.start()
    try:
        big = Dataset(seed=3, events=1_000_000, end=END)
        big.event(999_999)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
