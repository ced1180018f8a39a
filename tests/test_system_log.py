"""``system_log`` against the emulator's log: every event before a run's upper bound delivered
once, in any order the service answers, with events at one instant, without ``time`` or with
it as text; across runs nothing lost and nothing twice; nightly requests in proportion to the
new events; a killed run resumed from its STATE; unreadable events skipped with one warning
per kind."""

from __future__ import annotations

import json
import logging
import time
import typing as t
from collections import Counter
from dataclasses import dataclass

import pytest
import requests

from emulator import Dataset, Emulator
from emulator import shapes as served_shapes
from emulator import system_log as served
from emulator.system_log import Kind
from emulator.timefmt import format_ns
from tap_accessgov.engine.windowed import ResumableRun
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    SMALL_DATASET,
    SyncResult,
    catalog_selecting,
    ns,
    offline_stream,
    sync,
    tap_config,
)

LOG = "/api/v1/systemlog/events"
DATASET = {**SMALL_DATASET, "log_background": 3000}
DAY = 86_400 * 10**9
MINUTE = 60 * 10**9


@dataclass(frozen=True)
class LogRun:
    """A run of ``system_log`` alone, and the upper bound it read to (its requests' latest
    ``until``: the run's start, or ``end_date`` below it)."""

    result: SyncResult
    until: int

    @property
    def records(self) -> dict[str, list[dict[str, t.Any]]]:
        return self.result.records

    @property
    def state(self) -> dict[str, t.Any]:
        return self.result.state


def log_sync(emu: Emulator, state: dict[str, t.Any] | None = None, **settings: t.Any) -> LogRun:
    config = {**tap_config(emu), "page_size": 50, **settings}
    config = {k: v for k, v in config.items() if v is not None}  # None: a setting left out
    catalog = catalog_selecting(config, {"system_log": None})
    tap = TapAccessGov(config=config, state=state, catalog=catalog, parse_env_config=False)
    sent: list[int] = []

    def until(response: requests.Response, *args: t.Any, **kwargs: t.Any) -> None:
        if response.request.body and (bound := json.loads(response.request.body).get("until")):
            sent.append(ns(bound))

    tap.streams["system_log"].requests_session.hooks["response"].append(until)  # type: ignore[attr-defined]
    result = sync(config, tap=tap)
    return LogRun(result, max(sent))


def bookmark(run: LogRun) -> int:
    """The run's bookmark: the latest ``time`` it delivered."""
    return ns(run.state["bookmarks"]["system_log"]["replication_key_value"])


def latest_delivered(run: LogRun) -> int:
    return max(ns(r["time"]) for r in run.records["system_log"] if r["time"])


def uids(result: LogRun) -> list[str]:
    return [record["uid"] for record in result.records.get("system_log", [])]


def truth(emu: Emulator, since: int, until: int) -> list[str]:
    """The uids of the events the log holds in ``[since, until)``."""
    return sorted(e.uid for e in emu.dataset.system_log() if since <= e.time < until)


@pytest.mark.parametrize(
    ("order", "shapes"),
    [
        ("asked", "newest"),
        ("descending", "newest"),
        ("unsorted", "newest"),
        ("ascending", "older"),
        ("asked", "changed"),
    ],
)
def test_two_runs_deliver_every_event_once_but_the_bookmark_instants_in_any_order(
    make_emulator: t.Callable[..., Emulator], order: str, shapes: str
) -> None:
    """The service's order (asked: oldest first as the tap asks), sign-ins without ``time``
    (older) or ``time`` as text (changed); events recorded between the runs, many of them at
    the first run's bookmark instant itself."""
    emu = make_emulator(Dataset(**DATASET), log_order=order, shapes=shapes)
    first = log_sync(emu, max_concurrency=4)
    first_bookmark = bookmark(first)
    assert first_bookmark == latest_delivered(first)
    assert sorted(uids(first)) == truth(emu, 0, first.until)
    assert len(set(uids(first))) == len(uids(first))
    times = Counter(r["time"] for r in first.records["system_log"])
    if shapes == "older":  # sign-ins without time, a third of a burst among them
        assert times[None] > 100
    else:
        assert max(times.values()) >= 64, "a burst of events at one instant was read whole"
    # Between the runs: events at the bookmark's instant (the log keeps whole milliseconds),
    # and the service's own activity.
    at_bookmark = -(-first.until // 1_000_000) * 1_000_000
    for n in range(40):
        emu.dataset.log.record(
            Kind.READ,
            emu.dataset.log.admin(n),
            operation="c1.api.app.v1.Apps/List",
            at=at_bookmark,
        )
    emu.add_events(count=30)
    second = log_sync(emu, state=first.state, max_concurrency=4)
    assert bookmark(second) == latest_delivered(second)
    assert sorted(uids(second)) == truth(emu, first_bookmark, second.until)
    # delivered twice: what the first run read from its bookmark's instant on (that instant's
    # events, and after it only events without ``time``), read again by the second
    again = set(truth(emu, first_bookmark, first.until))
    assert set(uids(first)) & set(uids(second)) == again
    assert sorted(set(uids(first) + uids(second))) == truth(emu, 0, second.until)
    # The first run's own reads are in the second, named by the tap's user agent.
    own = [
        r
        for r in second.records["system_log"]
        if r["api_operation"] and "SystemLog" in r["api_operation"]
        if r["time"] and ns(r["time"]) >= first.until
    ]
    assert own
    assert {r["http_user_agent"].split("/")[0] for r in own} == {"tap-accessgov"}


def test_records_carry_the_ocsf_columns_and_the_event_whole(emulator: Emulator) -> None:
    result = log_sync(emulator)
    by_uid = {e["metadata"]["uid"]: e for e in emulator.dataset.system_log_objects()}
    records = result.records["system_log"]
    assert {r["event"]["metadata"]["uid"] for r in records} == set(uids(result))
    for record in records:
        event = by_uid[record["uid"]]
        assert record["event"] == event
        assert ns(record["time"]) == event["time"] * 1_000_000
        # every typed column from its own OCSF field, named here, not by the tap's table
        ids = ("class_uid", "category_uid", "activity_id", "type_uid", "severity_id", "status_id")
        assert {name: record[name] for name in ids} == {name: event[name] for name in ids}
        assert record["actor_user_uid"] == event["actor"]["user"]["uid"]
        assert record["actor_user_email"] == event["actor"]["user"].get("email_addr")
        assert record["src_endpoint_ip"] == event["src_endpoint"]["ip"]
        assert record["api_operation"] == event.get("api", {}).get("operation")
        assert record["http_user_agent"] == event.get("http_request", {}).get("user_agent")
    # the ids differ between events, so a column read from another field is seen
    for name in ("category_uid", "type_uid", "severity_id"):
        assert len({record[name] for record in records}) > 1, name


def test_concurrency_changes_nothing_but_time_and_a_nightly_run_asks_little(
    make_emulator: t.Callable[..., Emulator],
) -> None:
    emu = make_emulator(Dataset(**{**DATASET, "log_background": 8_000}))
    one = log_sync(emu, max_concurrency=1, end_date="2100-01-01T00:00:00Z")
    first_requests = emu.stats["api_requests_by_path"][LOG]
    emu.reset_stats()
    eight = log_sync(
        emu,
        max_concurrency=8,
        end_date=format_ns(one.until),
    )
    assert sorted(uids(eight)) == truth(emu, 0, one.until) == sorted(uids(one))
    # Nightly: the requests follow the new events (here the first runs' own calls and a
    # few hundred sign-ins, then a second of nothing up to the run's start), not the log's
    # size. Without the quiet second the cut depended on the machine's pace: a busy one made
    # the stretch, and the run took 93 requests (pages read within the sign-ins were taken
    # for the density of the stretch after them).
    for n in range(300):
        emu.dataset.log.record(Kind.SIGN_IN, emu.dataset.log.admin(n))
    time.sleep(1)
    emu.reset_stats()
    nightly = log_sync(emu, state=one.state, max_concurrency=8)
    new = len(uids(nightly))
    assert new == len(truth(emu, bookmark(one), nightly.until)) >= 300
    # In proportion: at most twice the pages the new events fill (a window split into
    # pieces ends each on a part page), plus a round of probes and a page per worker.
    requests = emu.stats["api_requests_by_path"][LOG]
    assert requests <= 2 * (new // 50 + 1) + 2 * 8, (requests, new)
    assert requests < first_requests / 5


def test_a_first_run_reads_from_start_date_and_a_since_before_retention_loses_nothing_kept(
    make_emulator: t.Callable[..., Emulator],
) -> None:
    emu = make_emulator(Dataset(**DATASET))
    events = emu.dataset.system_log()
    middle = events[len(events) // 2].time
    result = log_sync(emu, start_date=format_ns(middle))
    assert sorted(uids(result)) == truth(emu, middle, result.until)
    # A retention shorter than the log: a first run from long before it reads what the
    # service keeps (its cut moves with the clock while the run reads: a minute's slack).
    days = (time.time_ns() - middle) // DAY
    emu.update_settings({"log_retention_days": days})
    cut = time.time_ns() - days * DAY
    kept = log_sync(emu, start_date="2000-01-01T00:00:00Z")
    delivered = set(uids(kept))
    assert len(delivered) == len(uids(kept))
    assert set(truth(emu, cut + MINUTE, kept.until)) <= delivered
    assert delivered <= set(truth(emu, cut - MINUTE, kept.until))
    assert len(delivered) < len(truth(emu, 0, kept.until))


def test_a_first_run_without_start_date_reads_the_whole_log(emulator: Emulator) -> None:
    """No start_date and no bookmark: from the log's first event, each event once."""
    assert "start_date" in tap_config(emulator)
    result = log_sync(emulator, start_date=None)
    delivered = uids(result)
    assert len(delivered) == len(set(delivered))
    assert sorted(delivered) == truth(emulator, 0, result.until)
    assert len(delivered) > 1000


def test_a_page_none_of_whose_events_has_a_time_moves_no_bookmark() -> None:
    """A page of sign-ins all without ``time`` (the older shapes) tells the run nothing of how
    far it got: the latest instant delivered stays where the pages before put it."""
    run = ResumableRun(offline_stream("system_log"), "filters")
    run.saw([None, None])
    assert run.backfill.latest is None
    run.saw([None, "2026-03-05T06:07:08.009Z", "2026-03-05T06:07:08.001Z"])
    run.saw([None])
    assert run.backfill.latest == "2026-03-05T06:07:08.009Z"


def test_unreadable_events_are_skipped_or_left_without_time_with_one_warning_per_kind(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An event that is not an object, one without its uid, one whose time is a word: each
    kind said once, without a value of the event; the rest delivered, the last without time."""
    render = served.event_object
    spoiled: dict[str, str] = {}

    def spoil(event: served.LogEvent) -> t.Any:
        answer = render(event)
        kind = int(event.uid[:8], 16) % 9
        if kind == 0:
            spoiled[event.uid] = "dropped"
            return ["not", "an", "object"]
        if kind == 1:
            spoiled[event.uid] = "dropped"
            answer["metadata"].pop("uid")
        elif kind == 2:
            spoiled[event.uid] = "no time"
            answer["time"] = "last tuesday"
        elif kind == 3:  # ids in other JSON types than OCSF's: the typed columns left null
            spoiled[event.uid] = "odd types"
            answer["class_uid"] = True
            answer["severity_id"] = str(answer["severity_id"])
            answer["actor"]["user"]["uid"] = 42
        return answer

    monkeypatch.setattr(served, "event_object", spoil)
    with caplog.at_level(logging.WARNING):
        result = log_sync(emulator, max_concurrency=1)
    records = {r["uid"]: r for r in result.records["system_log"]}
    kept = [uid for uid in truth(emulator, 0, result.until) if spoiled.get(uid) != "dropped"]
    assert sorted(records) == kept
    assert {uid for uid, r in records.items() if r["time"] is None} == {
        uid for uid in kept if spoiled.get(uid) == "no time"
    }
    odd = [records[uid] for uid in kept if spoiled.get(uid) == "odd types"]
    assert odd
    assert {(r["class_uid"], r["severity_id"], r["actor_user_uid"]) for r in odd} == {
        (None, None, None)
    }
    assert all(r["event"]["class_uid"] is True for r in odd)  # the event itself as sent
    warnings = [r.getMessage() for r in caplog.records if "system log event" in r.getMessage()]
    once = " (further ones this run are not reported)"
    assert sorted(warnings) == [
        "A system log event's time is neither epoch milliseconds nor RFC 3339: left null" + once,
        "Skipping a system log event that is not a JSON object" + once,
        "Skipping a system log event without metadata.uid" + once,
    ]
    assert not [w for w in warnings if "tuesday" in w or any(uid in w for uid in spoiled)]
    assert "New replication value is null" not in caplog.text


@pytest.mark.parametrize("shapes", served_shapes.SHAPES)
@pytest.mark.parametrize("order", served.ORDERS)
def test_an_event_logged_late_at_the_last_instant_a_run_delivered_comes_with_the_next_run(
    make_emulator: t.Callable[..., Emulator], order: str, shapes: str
) -> None:
    """A log written by many writers gets events late: one dated at the instant of the last
    event a run delivered, but written after that run, is delivered by the next run, once, in
    every order the service may answer and every format of ``time``."""
    emu = make_emulator(
        Dataset(**{**SMALL_DATASET, "log_background": 400}), log_order=order, shapes=shapes
    )
    first = log_sync(emu, max_concurrency=2)
    last = max(ns(r["time"]) for r in first.records["system_log"] if r["time"])
    before = {e.uid for e in emu.dataset.system_log()}
    emu.dataset.log.record(
        Kind.READ, emu.dataset.log.admin(0), operation="c1.api.app.v1.Apps/List", at=last
    )
    (late,) = {e.uid for e in emu.dataset.system_log()} - before
    second = log_sync(emu, state=first.state, max_concurrency=2)
    assert late not in uids(first)
    assert uids(second).count(late) == 1
