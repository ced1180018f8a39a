"""``past_grants`` against the emulator's truth: a first sync reads every ended period app by
app, a later one only the periods of the grants the feed removed since its bookmark, in as
many requests as those need; unreadable periods are skipped with one warning per kind."""

from __future__ import annotations

import datetime
import logging
import time
import typing as t
from collections import Counter

import pytest

from emulator import Dataset, Emulator
from emulator import past_grants as served
from emulator.timefmt import format_ns
from emulator.timefmt import parse_rfc3339 as service_ns
from tap_accessgov.streams import past_grants as past_grants_stream
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    SMALL_DATASET,
    SyncResult,
    catalog_selecting,
    ns,
    sync,
    tap_config,
    watch_bodies,
)

PAST = "/api/v1/search/past-grants"
FEED = "/api/v1/grants/feed"
Period = tuple[str, str, str, int, int, str | None]


def periods(result: SyncResult) -> list[Period]:
    return sorted(
        (
            r["appId"],
            r["appEntitlementId"],
            r["appUserId"],
            ns(r["grantedAt"]),
            ns(r["revokedAt"]),
            r["id"],
        )
        for r in result.records.get("past_grants", [])
    )


def truth(ds: Dataset, *, with_ids: bool = True) -> list[Period]:
    return sorted(
        (
            p.app_id,
            p.app_entitlement_id,
            p.app_user_id,
            p.granted_at,
            p.revoked_at,
            p.id if with_ids else None,
        )
        for p in ds.past_grants()
    )


def removed_since(ds: Dataset, instant: int) -> set[tuple[str, str]]:
    """The app entitlements of the feed's REMOVED events at or after ``instant`` (ns)."""
    return {
        (e["feed"]["appId"], e["feed"]["appEntitlementId"])
        for e in ds.feed_entries()
        if e["feed"].get("eventType") == "GRANT_EVENT_TYPE_REMOVED"
        and service_ns(e["feed"]["date"]) >= instant
    }


def past_grants_sync(
    emu: Emulator,
    state: dict[str, t.Any] | None = None,
    searches: list[dict[str, t.Any]] | None = None,
    **settings: t.Any,
) -> SyncResult:
    """A sync of ``past_grants`` alone; ``searches`` gets the body of every search it sends
    (a requests response hook: public API)."""
    config = {**tap_config(emu), "page_size": 50, **settings}
    catalog = catalog_selecting(config, {"past_grants": None})
    tap = TapAccessGov(config=config, state=state, catalog=catalog, parse_env_config=False)
    if searches is not None:
        watch_bodies(tap, "past_grants", PAST, searches.append)
    return sync(config, tap=tap)


@pytest.mark.parametrize("shapes", ["newest", "older"])
def test_a_first_sync_reads_every_ended_period_app_by_app(
    make_emulator: t.Callable[..., Emulator], shapes: str
) -> None:
    """Releases before August 2026 send no ``history.id``: the same periods, ids null."""
    emu = make_emulator(Dataset(**SMALL_DATASET), shapes=shapes)
    ds = emu.dataset
    result = past_grants_sync(emu)
    assert periods(result) == truth(ds, with_ids=shapes == "newest")
    # One search series per app of the catalog: a request per 50 periods, one for none.
    ended = Counter(p.app_id for p in ds.past_grants())
    catalog = [ds.catalog.apps[position].id for position in ds.current_apps()]
    pages = sum(max(1, -(-ended[app_id] // 50)) for app_id in catalog)
    assert emu.stats["api_requests_by_path"][PAST] == pages
    assert FEED not in emu.stats["api_requests_by_path"]  # a first sync needs no feed


def test_concurrency_changes_nothing_but_time(emulator: Emulator) -> None:
    one = periods(past_grants_sync(emulator, max_concurrency=1))
    assert one == truth(emulator.dataset)  # the truth, not merely alike (nothing is alike too)
    assert one == periods(past_grants_sync(emulator, max_concurrency=4))


def test_a_later_sync_reads_only_the_periods_the_feed_ended_since_its_bookmark(
    make_emulator: t.Callable[..., Emulator],
) -> None:
    emu = make_emulator(Dataset(**{**SMALL_DATASET, "events": 3000}))
    ds = emu.dataset
    first = past_grants_sync(emu)
    bookmark = ns(first.state["bookmarks"]["past_grants"]["replication_key_value"])
    first_requests = emu.stats["api_requests_by_path"][PAST]
    before = set(periods(first))

    emu.add_events(count=400)
    emu.reset_stats()
    second = past_grants_sync(emu, state=first.state)
    ended_since = {p for p in truth(ds) if p[4] >= bookmark}
    assert set(truth(ds)) - before, "the new events ended grants"
    assert set(periods(second)) == ended_since
    assert before | set(periods(second)) == set(truth(ds))  # nothing lost across the runs
    # Requests: the feed from the bookmark, then one search per app entitlement the feed
    # removed a grant from since (the bookmark's instant again included; these tenants'
    # accounts fit one search), not the whole history again.
    entitlements = removed_since(ds, bookmark)
    assert emu.stats["api_requests_by_path"][PAST] == len(entitlements) < first_requests
    assert emu.stats["api_requests_by_path"][FEED] >= 1


def test_the_removed_accounts_are_asked_for_in_searches_of_a_bounded_size(
    make_emulator: t.Callable[..., Emulator],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The accounts an app entitlement lost grants of since the bookmark are asked for in
    searches of at most ``ACCOUNTS_PER_SEARCH`` (100: the service documents no limit, and a
    body of thousands of ids is what the split avoids) ``appUserRefs``, each account in
    exactly one search, in as few searches as that takes. With the size set to 5, this
    tenant's entitlements (11 to 23 such accounts each) take two to five searches."""
    monkeypatch.setattr(past_grants_stream, "ACCOUNTS_PER_SEARCH", 5)
    emu = make_emulator(Dataset(seed=3, events=3000, apps=1, users=700))
    first = past_grants_sync(emu)
    bookmark = ns(first.state["bookmarks"]["past_grants"]["replication_key_value"])
    emu.add_events(count=4000)
    removed: dict[tuple[str, str], set[str]] = {}
    for event in emu.dataset.feed_entries():
        feed = event["feed"]
        if feed.get("eventType") == "GRANT_EVENT_TYPE_REMOVED" and (
            service_ns(feed["date"]) >= bookmark
        ):
            entitlement = (feed["appId"], feed["appEntitlementId"])
            removed.setdefault(entitlement, set()).add(feed["appUserId"])
    assert min(map(len, removed.values())) > 10

    sent: list[dict[str, t.Any]] = []
    with caplog.at_level(logging.INFO):
        past_grants_sync(emu, state=first.state, searches=sent)
    first_pages = [body for body in sent if not body.get("pageToken")]
    said = first.state["bookmarks"]["past_grants"]["replication_key_value"]
    assert (
        f"past_grants: the feed removed grants of {len(removed)} app entitlement(s) since "
        f"{said}: {len(first_pages)} search(es)"
    ) in caplog.messages
    asked: dict[tuple[str, str], list[str]] = {}
    for body in first_pages:
        (ref,) = body["appEntitlementRefs"]
        accounts = [account["id"] for account in body["appUserRefs"]]
        assert 0 < len(accounts) <= 5
        asked.setdefault((ref["appId"], ref["id"]), []).extend(accounts)
    assert {e: sorted(accounts) for e, accounts in asked.items()} == {
        e: sorted(accounts) for e, accounts in removed.items()
    }
    assert len(first_pages) == sum(-(-len(accounts) // 5) for accounts in removed.values())


def test_a_period_that_ends_after_a_run_starts_leaves_the_bookmark_at_the_runs_start(
    make_emulator: t.Callable[..., Emulator],
) -> None:
    """A run that sees a grant period ending after it started (an hour from now: an event
    the service dated ahead of this machine's clock, or written while the run read) keeps
    its bookmark at its own start, not at that end: a removal the service records later,
    dated in between, is read by the next run."""
    emu = make_emulator(Dataset(**SMALL_DATASET))
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    emu.add_events(dates=[later + datetime.timedelta(milliseconds=n) for n in range(40)])
    assert max(p.revoked_at for p in emu.dataset.past_grants()) >= service_ns(later.isoformat())
    started = time.time_ns()
    first = past_grants_sync(emu)
    bookmark = ns(first.state["bookmarks"]["past_grants"]["replication_key_value"])
    assert started <= bookmark <= time.time_ns()  # the run's start, not an hour from now

    before = set(truth(emu.dataset))
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1)
    emu.add_events(dates=[soon + datetime.timedelta(milliseconds=n) for n in range(40)])
    ended_in_between = set(truth(emu.dataset)) - before
    assert ended_in_between, "the events ended grants"
    second = past_grants_sync(emu, state=first.state)
    assert ended_in_between <= set(periods(second))


def test_a_later_sync_with_nothing_removed_searches_the_bookmarks_instant_only(
    emulator: Emulator,
) -> None:
    """The feed's ``after`` is inclusive: what ended at the bookmark's instant is asked for
    again (as the feed's events there are read again), and nothing else."""
    first = past_grants_sync(emulator)
    emulator.reset_stats()
    second = past_grants_sync(emulator, state=first.state)
    latest = max(p[4] for p in truth(emulator.dataset))
    at_latest = [p for p in truth(emulator.dataset) if p[4] == latest]
    assert periods(second) == at_latest
    searched = emulator.stats["api_requests_by_path"][PAST]
    entitlements = removed_since(emulator.dataset, latest)
    assert searched == len(entitlements) < len(emulator.dataset.current_apps())
    assert {p[:2] for p in at_latest} <= entitlements


def test_unreadable_periods_are_skipped_with_one_warning_per_kind(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A period without a start, one whose end is not a date, one without its account, a
    view without its history object, one that is not an object: each kind is said once,
    without its values; every other period is delivered, those after a skipped one too."""
    view = served.history_view
    spoiled: dict[str, str] = {}

    def spoil(past: served.PastGrant) -> t.Any:
        answer = view(past)
        kind = int(past.id.encode().hex(), 16) % 7
        spoiled[past.id] = past.app_user_id
        if kind == 0:
            answer["history"].pop("grantedAt")
        elif kind == 1:
            answer["history"]["revokedAt"] = format_ns(past.revoked_at)[:10] + " noon"
        elif kind == 2:
            answer["history"]["appUserId"] = ""
        elif kind == 3:
            answer.pop("history")
        elif kind == 4:
            return [answer]
        else:
            del spoiled[past.id]
        return answer

    monkeypatch.setattr(served, "history_view", spoil)
    with caplog.at_level(logging.WARNING):
        result = past_grants_sync(emulator, max_concurrency=1)
    assert periods(result) == [p for p in truth(emulator.dataset) if p[5] not in spoiled]
    warnings = [r.getMessage() for r in caplog.records if "Skipping a past grant" in r.getMessage()]
    once = " (further ones this run are not reported)"
    assert sorted(warnings) == [
        "Skipping a past grant whose grantedAt or revokedAt is not a date-time" + once,
        "Skipping a past grant without a grantedAt or a revokedAt" + once,
        "Skipping a past grant without an app, app entitlement or app user id" + once,
        "Skipping a past grant without its history object" + once,
    ]
    assert not [w for w in warnings for user in spoiled.values() if user in w]
