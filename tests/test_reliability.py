"""Faults survived with nothing lost, clear fatal errors, interrupted runs, no leaked secrets."""

from __future__ import annotations

import base64
import datetime
import email.utils
import json
import logging
import os
import random
import re
import signal
import subprocess
import threading
import time
import types
import typing as t
from collections import Counter
from pathlib import Path

import backoff
import pytest
import requests
from singer_sdk import Tap
from singer_sdk.exceptions import FatalAPIError

from emulator import Dataset, Emulator, make_credential
from emulator.tls import self_signed
from tap_accessgov import retries
from tap_accessgov.engine.concurrency import Workers, read_ahead
from tap_accessgov.engine.partitions import ConcurrentPartitionsStream
from tap_accessgov.retries import retry_after_seconds
from tap_accessgov.streams import STREAM_TYPES
from tap_accessgov.streams.automation_exclusions import AutomationExclusionsStream
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    BIN_TAP,
    CREDENTIAL,
    SMALL_DATASET,
    STREAMS,
    SyncResult,
    catalog_selecting,
    config_file,
    logged_before,
    ns,
    offline_stream,
    parse_singer,
    run_cli,
    shared_emulator,
    sync,
    tap_config,
    without_run,
)

FEED = "/api/v1/grants/feed"
# The test tenant with 12 apps in its catalog instead of conftest's TEST_CATALOG_APPS, for the
# run that pays for every request (15% faults, each retried after a second or more, one at a
# time once the 429s have halved the requests in flight): the apps without grants only
# lengthen the catalog read; every endpoint is still read, every fault kind still drawn.
SMALL_CATALOG = {**SMALL_DATASET, "catalog_apps": 12}


def feed_only(emulator: Emulator, **settings: t.Any) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    """grant_feed alone, one request at a time unless asked otherwise: the retry policy is
    per request, and a fault planned for the next request then meets the one retried (with
    concurrent windows it would meet another window's; tests/test_backfill.py has those)."""
    config = {**tap_config(emulator), "max_concurrency": 1, **settings}
    return config, catalog_selecting(config, {"grant_feed": None})


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exponential waits from 10 ms and no jitter, for tests about what a retried run delivers
    and says rather than how long it waits (the Retry-After tests keep the real waits)."""
    monkeypatch.setattr(retries, "FIRST_WAIT", 0.01)
    monkeypatch.setattr(random, "random", lambda: 0.0)  # the SDK's jitter: 0 to 1 s more


def record_multiset(result: SyncResult) -> dict[str, Counter]:
    """The records of a run, without what names the run (each run is a new snapshot)."""
    return {
        stream: Counter(json.dumps(without_run(r), sort_keys=True) for r in rows)
        for stream, rows in result.records.items()
    }


@pytest.mark.parametrize(
    "kind", ["429", "500", "502", "503", "504", "drop", "malformed", "truncated", "slow"]
)
@pytest.mark.usefixtures("quick_retries")
def test_a_transient_fault_is_retried_and_nothing_is_lost(
    emulator: Emulator, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    config, catalog = feed_only(emulator, request_timeout=1)
    emulator.faults.add(kind=kind, path=FEED, times=1, delay=3)
    with caplog.at_level(logging.INFO):
        result = sync(config, catalog=catalog)
    truth = emulator.dataset.feed_entries()
    assert Counter(
        json.dumps(r["feed"], sort_keys=True) for r in result.records["grant_feed"]
    ) == Counter(json.dumps(e["feed"], sort_keys=True) for e in truth)
    assert emulator.stats["faults_by_kind"] == {kind: 1}
    retries = [r for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 1, [r.getMessage() for r in caplog.records]
    assert retries[0].levelno == logging.WARNING
    what = {
        "drop": "failed: ConnectionError",
        "slow": "failed: ReadTimeout",
        "truncated": "failed: ChunkedEncodingError",
        "malformed": "answered 200 with a body that is not a JSON object",
    }.get(kind, f"answered {kind}")
    assert re.fullmatch(
        f"POST {FEED} {what}.*; retrying in \\d+\\.\\d s(?: as its Retry-After asks)? "
        "\\(attempt 1 of 6\\)",
        retries[0].getMessage(),
    ), retries[0].getMessage()
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_retry_after_in_seconds_is_honoured_and_logged(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    config, catalog = feed_only(emulator)
    emulator.faults.add(kind="429", path=FEED, times=1, retry_after="2")
    with caplog.at_level(logging.WARNING):
        sync(config, catalog=catalog)
    waits = [r.getMessage() for r in caplog.records if "Retry-After" in r.getMessage()]
    assert len(waits) == 1
    assert waits[0].startswith(f"POST {FEED} answered 429: rate limit exceeded; retrying in ")
    assert waits[0].endswith(" s as its Retry-After asks (attempt 1 of 6)")
    seconds = float(waits[0].split("retrying in ")[1].split(" s")[0])
    assert 2.0 <= seconds <= 3.0  # Retry-After plus the SDK's jitter (at most 1 s)


def test_retry_after_as_an_http_date(emulator: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    config, catalog = feed_only(emulator)
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=3)
    emulator.faults.add(
        kind="429", path=FEED, times=1, retry_after=email.utils.format_datetime(when, usegmt=True)
    )
    with caplog.at_level(logging.WARNING):
        result = sync(config, catalog=catalog)
    assert len(result.records["grant_feed"]) == len(emulator.dataset.feed_entries())
    waits = [r.getMessage() for r in caplog.records if "Retry-After" in r.getMessage()]
    assert len(waits) == 1
    seconds = float(waits[0].split("retrying in ")[1].split(" s")[0])
    # the date's whole seconds from now (2-3 s by the time it is read), plus at most 1 s of
    # jitter: a date read as "now" would wait under a second
    assert 1.0 <= seconds <= 4.0


@pytest.mark.parametrize(("ahead", "low", "high"), [(45, 43.0, 45.0), (7200, 60.0, 60.0)])
def test_retry_after_as_a_future_http_date_is_that_far_capped(
    ahead: int, low: float, high: float
) -> None:
    """An HTTP date 45 s ahead is a wait of 45 s (less the time the date's second has run);
    one two hours ahead is the cap, 60 s."""
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=ahead)
    response = requests.Response()
    response.headers["Retry-After"] = email.utils.format_datetime(when, usegmt=True)
    seconds = retry_after_seconds(response)
    assert seconds is not None
    assert low <= seconds <= high


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("7", 7.0),
        ("3600", 60.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # a date already past: retry now
        # Not RFC 9110 delay-seconds: urllib3's parser refuses them, exponential waits apply.
        ("0.5", None),
        ("-5", None),
        ("soon", None),
        (None, None),
    ],
)
def test_retry_after_parsing_is_capped(header: str | None, expected: float | None) -> None:
    response = requests.Response()
    if header is not None:
        response.headers["Retry-After"] = header
    assert retry_after_seconds(response) == expected


@pytest.mark.usefixtures("quick_retries")
def test_retries_are_bounded_then_fatal_with_method_path_and_status(emulator: Emulator) -> None:
    config, catalog = feed_only(emulator, max_retries=1)
    emulator.faults.add(kind="503", path=FEED, times=2)
    with pytest.raises(FatalAPIError) as caught:
        sync(config, catalog=catalog)
    assert str(caught.value) == f"POST {FEED} answered 503: unavailable (gave up after 2 attempts)"
    assert emulator.stats["faults_by_kind"] == {"503": 2}


@pytest.mark.usefixtures("quick_retries")
def test_dropped_connections_exhausting_retries_are_fatal_too(emulator: Emulator) -> None:
    config, catalog = feed_only(emulator, max_retries=1)
    emulator.faults.add(kind="drop", path=FEED, times=2)
    with pytest.raises(
        FatalAPIError, match=f"^POST {FEED} failed: ConnectionError \\(gave up after 2 attempts\\)$"
    ):
        sync(config, catalog=catalog)


@pytest.mark.usefixtures("quick_retries")
def test_backoff_logs_nothing_of_its_own(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK hands the backoff library the stream's logger: its own line per retry (INFO)
    and on giving up (ERROR) would repeat the tap's warning and fatal error."""
    backoff_dir = str(Path(backoff.__file__).parent)
    config, catalog = feed_only(emulator, max_retries=1)
    emulator.faults.add(kind="503", path=FEED, times=1)
    with caplog.at_level(logging.DEBUG):
        sync(config, catalog=catalog)
        emulator.faults.add(kind="503", path=FEED, times=2)
        with pytest.raises(FatalAPIError, match="gave up after 2 attempts"):
            sync(config, catalog=catalog)
    assert emulator.stats["faults_by_kind"] == {"503": 3}
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 2, retries
    from_backoff = [
        r.getMessage()
        for r in caplog.records
        if r.pathname.startswith(backoff_dir) or r.getMessage().startswith(("Backing", "Giving"))
    ]
    assert from_backoff == []


def test_backoff_itself_waits_nothing_so_a_stopping_sync_can_end_every_wait(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backoff library sleeps with ``time.sleep``, which nothing can cut short: a retry's
    wait is the tap's own (``backoff_handler``, on the stream's stopping event), and backoff's
    own sleeps are of 0 s, the SDK's jitter included. A 503 and a 429 retried here, each
    asking for no wait (their Retry-After)."""
    slept: list[float] = []

    def recorded(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    monkeypatch.setattr(backoff._sync, "time", types.SimpleNamespace(sleep=recorded))
    config, catalog = feed_only(emulator)
    emulator.faults.add(kind="503", path=FEED, times=1, retry_after="0")
    emulator.faults.add(kind="429", path=FEED, times=1, retry_after="0")
    sync(config, catalog=catalog)
    assert emulator.stats["faults_by_kind"] == {"503": 1, "429": 1}
    assert slept == [0.0, 0.0]


@pytest.mark.usefixtures("quick_retries")
def test_a_503_retried_leaves_the_requests_in_flight_as_they_were(emulator: Emulator) -> None:
    """A 503 is no rate limit: only a 429 lowers the run's requests in flight."""
    config, catalog = feed_only(emulator, max_retries=1)
    emulator.faults.add(kind="503", path=FEED, times=1)
    tap = TapAccessGov(config=config, catalog=catalog, parse_env_config=False)
    sync(config, catalog=catalog, tap=tap)
    assert emulator.stats["faults_by_kind"] == {"503": 1}
    budget = tap.request_budget
    assert (budget.slowdowns, budget.limit) == (0, budget.maximum)
    emulator.faults.add(kind="429", path=FEED, times=1)  # and a 429 does
    tap = TapAccessGov(config=config, catalog=catalog, parse_env_config=False)
    sync(config, catalog=catalog, tap=tap)
    assert tap.request_budget.slowdowns == 1


def test_a_401_is_retried_at_once_with_a_new_token(
    emulator: Emulator, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No wait, and no jitter on it (the SDK's jitter adds up to 1 s to any wait, made
    0.5 s here so that a jittered zero shows)."""
    monkeypatch.setattr(random, "random", lambda: 0.5)
    config, catalog = feed_only(emulator)
    emulator.faults.add(kind="401", path=FEED, times=1)
    with caplog.at_level(logging.WARNING):
        sync(config, catalog=catalog)
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert retries == [
        f"POST {FEED} answered 401; retrying once with a new access token; "
        "retrying in 0.0 s (attempt 1 of 6)"
    ]


@pytest.mark.parametrize(
    ("kind", "message"), [("400", "invalid argument"), ("403", "permission denied")]
)
def test_client_errors_are_fatal_at_once(emulator: Emulator, kind: str, message: str) -> None:
    config, catalog = feed_only(emulator)
    emulator.faults.add(kind=kind, path=FEED, times=1)
    with pytest.raises(FatalAPIError, match=f"^POST {FEED} answered {kind}: {message}"):
        sync(config, catalog=catalog)
    assert emulator.stats["api_requests"] == 1  # not retried


@pytest.mark.usefixtures("quick_retries")
def test_a_run_with_15_percent_faults_delivers_exactly_the_clean_run(
    make_emulator: t.Callable[..., Emulator], capsys: pytest.CaptureFixture[str]
) -> None:
    emulator = make_emulator(Dataset(**SMALL_CATALOG))
    config = {**tap_config(emulator), "request_timeout": 1, "max_retries": 8, "page_size": 25}
    clean = sync(config)
    emulator.reset_stats()
    emulator.faults.random(
        rate=0.15,
        kinds=("429", "500", "502", "503", "504", "drop", "malformed", "truncated", "slow"),
        seed=3,
        delay=2,
        # what this run delivers is the point, not how long it waits: its 429s ask for no
        # wait (the Retry-After tests keep real ones), as quick_retries shortens the others
        retry_after=0,
    )
    faulted = sync(config)
    stats = emulator.stats
    # The log the faulted run reads goes on past the clean run's: compare both up to the
    # clean run's latest event (its bookmark), that instant included.
    read_up_to = ns(clean.state["bookmarks"]["system_log"]["replication_key_value"]) + 1
    expected = record_multiset(logged_before(clean, read_up_to))
    got = record_multiset(logged_before(faulted, read_up_to))
    lost = sum((expected[s] - got.get(s, Counter())).total() for s in expected)
    duplicates = sum((got[s] - expected.get(s, Counter())).total() for s in got)
    with capsys.disabled():
        print(
            f"\n[reliability] requests {stats['api_requests']}, faults injected "
            f"{stats['faults_injected']} {stats['faults_by_kind']}, faults survived "
            f"{stats['faults_injected']}, records {sum(len(r) for r in faulted.records.values())}, "
            f"lost {lost}, duplicates {duplicates}"
        )
    assert stats["faults_injected"] >= 0.05 * stats["api_requests"]  # 15% drawn at random
    assert lost == 0
    assert duplicates == 0


@pytest.mark.cli
def test_killed_run_resumes_from_the_last_state_with_every_event_at_least_once(
    emulator: Emulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, catalog = feed_only(emulator, page_size=10)
    first = sync(config, catalog=catalog)
    before = emulator.dataset.total
    emulator.add_events(count=1000)
    new_events = {
        json.dumps(e["feed"], sort_keys=True) for e in emulator.dataset.feed_entries()[before:]
    }
    emulator.latency = 0.02

    files = {}
    for name, content in (("config", config), ("catalog", catalog), ("state", first.state)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(content))
    with (tmp_path / "killed.log").open("w") as log:
        process = subprocess.Popen(
            [
                str(BIN_TAP),
                "--config",
                str(files["config"]),
                "--catalog",
                str(files["catalog"]),
                "--state",
                str(files["state"]),
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        assert process.stdout is not None
        lines = []
        for line in process.stdout:  # records arrive in chunks (output.py): kill mid-run
            lines.append(line)
            if sum('"type":"RECORD"' in x.replace(" ", "") for x in lines) >= 150:
                os.kill(process.pid, signal.SIGKILL)
                break
        lines.extend(process.stdout.read().splitlines(keepends=True))
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    killed = parse_singer("".join(lines))
    assert killed.states, "the tap echoes its starting state before the first record"
    last_state = killed.states[-1]
    # The unsorted stream commits no bookmark mid-run: what a target saved is the old one.
    committed = last_state["bookmarks"]["grant_feed"]["replication_key_value"]
    assert committed == first.state["bookmarks"]["grant_feed"]["replication_key_value"]

    emulator.latency = 0
    rerun = sync(config, catalog=catalog, state=last_state)
    delivered_killed = [
        json.dumps(r["feed"], sort_keys=True) for r in killed.records.get("grant_feed", [])
    ]
    delivered_rerun = [json.dumps(r["feed"], sort_keys=True) for r in rerun.records["grant_feed"]]
    assert 150 <= len(delivered_killed) < len(new_events)
    assert new_events <= set(delivered_rerun), "every new event arrives after the restart"
    rereads = len(set(delivered_killed) & set(delivered_rerun))
    with capsys.disabled():
        print(
            f"\n[interrupted] killed after {len(delivered_killed)} records; rerun from the last "
            f"emitted state delivered {len(delivered_rerun)} records, all {len(new_events)} new "
            f"events included; re-read {rereads} records delivered before the kill"
        )
    assert rereads == len(delivered_killed)  # unsorted feed: an interrupted run restarts


def run_at_debug(config: dict[str, t.Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The command line with DEBUG logging (urllib3's included)."""
    debug = {**os.environ, "TAP_ACCESSGOV_LOGLEVEL": "DEBUG"}
    return run_cli("--config", config_file(config, tmp_path), env=debug)


@pytest.mark.cli
def test_no_secret_or_token_in_any_output_at_debug(emulator: Emulator, tmp_path: Path) -> None:
    config = tap_config(emulator)
    emulator.faults.add(kind="401", path=FEED, times=1)  # forces a second token mid-run
    result = run_at_debug(config, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    output = result.stdout + result.stderr
    assert "urllib3.connectionpool" in result.stderr, "urllib3 debug logging is on"
    secret = config["client_secret"]
    key = secret.rsplit(":", 1)[1]
    jwk = json.loads(base64.urlsafe_b64decode(key + "=" * (-len(key) % 4)))
    tokens = emulator.tokens.issued
    assert len(tokens) == 2
    for needle in (secret, key, jwk["d"], *tokens):
        assert needle not in output


@pytest.mark.cli
def test_no_secret_in_an_authentication_failure_at_debug(
    emulator: Emulator, tmp_path: Path
) -> None:
    config = {**tap_config(emulator), "auth_method": "client_secret"}
    config["client_secret"] = make_credential(seed=99).client_secret  # valid form, wrong key
    result = run_at_debug(config, tmp_path)
    assert result.returncode != 0
    assert "Authentication failed" in result.stderr
    key = config["client_secret"].rsplit(":", 1)[1]
    assert key not in result.stdout + result.stderr


@pytest.mark.cli
def test_tls_is_verified_on_every_call_and_a_named_ca_bundle_is_trusted(tmp_path: Path) -> None:
    """Against an https emulator with a self-signed certificate: refused unless the user
    trusts it through REQUESTS_CA_BUNDLE, and then every call (token and API) succeeds."""
    context, certificate = self_signed(tmp_path)
    with Emulator(Dataset(**SMALL_DATASET), credential=CREDENTIAL, tls=context) as emu:
        path = config_file(tap_config(emu), tmp_path)
        assert emu.url.startswith("https://")
        env = {
            k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
        }

        untrusted = run_cli("--config", path, env=env)
        assert untrusted.returncode == 1
        assert "could not reach the token endpoint" in untrusted.stderr
        assert "(SSLError)" in untrusted.stderr
        assert emu.stats["token_requests"] == 0  # refused in the handshake

        trusted = run_cli("--config", path, env={**env, "REQUESTS_CA_BUNDLE": str(certificate)})
        assert trusted.returncode == 0, trusted.stderr[-2000:]
        streams = {
            m["stream"] for m in parse_singer(trusted.stdout).messages if m["type"] == "RECORD"
        }
        assert streams == {*STREAMS, "full_table_snapshots"}


@pytest.mark.parametrize(
    ("environment", "verify"),
    [
        ({}, True),
        ({"REQUESTS_CA_BUNDLE": "/etc/team/ca.pem"}, "/etc/team/ca.pem"),
        ({"CURL_CA_BUNDLE": "/etc/curl/ca.pem"}, "/etc/curl/ca.pem"),
    ],
)
def test_the_api_calls_verify_tls_with_the_bundle_a_user_names_else_the_default(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], verify: bool | str
) -> None:
    """The SDK sends prepared requests, which skip requests' environment settings: the
    session verifies with the CA bundle the environment names, else the default one, and
    never not at all (requests skips verification for a ``verify`` of None). The test above
    cannot show it for the API calls: on an untrusted server the token call fails first."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert offline_stream("grant_feed").requests_session.verify == verify


@pytest.mark.parametrize("reader", ["head -c 1000", "false"])
@pytest.mark.cli
def test_a_loader_that_stops_reading_ends_the_run_in_one_line(
    emulator: Emulator, tmp_path: Path, reader: str
) -> None:
    """A real pipe into a reader that goes away: one line, non-zero exit, and the background
    exclusion fetches stopped (slow answers keep them busy otherwise); a reader gone before
    the first message (``false``) stops the run before it asks the service anything. Nothing
    is timed (on a loaded machine this run alone took 13 s of a former 20 s bound): a run
    that hangs meets the timeout."""
    config = {**tap_config(emulator), "max_concurrency": 8, "page_size": 10}
    catalog = catalog_selecting(config, {"automation_exclusions": None, "users": None})
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    emulator.latency = 0.1
    command = (
        f"set -o pipefail; '{BIN_TAP}' --config '{config_file(config, tmp_path)}' "
        f"--catalog '{tmp_path / 'catalog.json'}' 2> '{tmp_path / 'tap.log'}' | {reader} > /dev/null"
    )
    result = subprocess.run(["bash", "-c", command], timeout=300, check=False)
    stderr = (tmp_path / "tap.log").read_text()
    assert result.returncode != 0
    errors = [line for line in stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1, stderr[-3000:]
    assert (
        "The output was closed: the loader reading this tap's output stopped reading" in errors[0]
    )
    assert "Traceback" not in stderr
    assert "Exception ignored" not in stderr
    requests_made = emulator.stats["api_requests"]
    if reader == "false":
        assert requests_made == 0
    time.sleep(1)
    assert emulator.stats["api_requests"] == requests_made, "no fetch goes on after the exit"


@pytest.mark.cli
def test_every_successful_run_ends_with_the_whole_state(emulator: Emulator, tmp_path: Path) -> None:
    """Also a run with nothing new, which the SDK would end on a RECORD (its last STATE
    came before the re-read records): a target that echoes the last STATE it saw needs it."""
    path = config_file(tap_config(emulator), tmp_path)
    first = run_cli("--config", path)
    assert first.returncode == 0, first.stderr[-2000:]
    first_out = parse_singer(first.stdout)
    assert first_out.messages[-1]["type"] == "STATE"
    state = first_out.messages[-1]["value"]
    assert state == first_out.state
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(state))

    second = run_cli("--config", path, "--state", str(state_file))  # nothing new
    assert second.returncode == 0, second.stderr[-2000:]
    second_out = parse_singer(second.stdout)
    assert second_out.records["grant_feed"], "the bookmark instant is re-read"
    last = second_out.messages[-1]
    assert last["type"] == "STATE"
    assert (
        last["value"]["bookmarks"]["grant_feed"]["replication_key_value"]
        == state["bookmarks"]["grant_feed"]["replication_key_value"]
    )
    assert set(last["value"]["bookmarks"]) == {*STREAMS, "full_table_snapshots"}


def test_a_partitioned_stream_has_one_state_and_drops_the_partitions_of_an_older_one() -> None:
    """A full-table stream read per app or per entitlement has nothing to resume: its state is
    the stream's one, not an entry per partition that every STATE message would carry (the
    small tenant's final state was 140 KB of them, its STATE messages 42% of the output).
    A state an earlier release wrote with such entries loses them; bookmarks stay."""
    partitioned = {
        stream.name for stream in STREAM_TYPES if issubclass(stream, ConcurrentPartitionsStream)
    }
    assert {"app_entitlements", "automation_exclusions", "entitlement_owners"} <= partitioned
    config = tap_config(shared_emulator())
    first = sync(config)
    assert first.counts()["entitlement_owners"] > 100
    for state in first.states:
        assert not any("partitions" in state["bookmarks"].get(name, {}) for name in partitioned)
    assert len(json.dumps(first.state)) < 2_000, first.state
    older = json.loads(json.dumps(first.state))
    for name in partitioned:
        older["bookmarks"][name] = {"partitions": [{"context": {"appId": "an-app"}}]}
    selected = catalog_selecting(config, {"app_entitlements": None, "automation_exclusions": None})
    second = sync(config, state=older, catalog=selected)
    assert second.counts()["automation_exclusions"] > 0
    assert second.state["bookmarks"]["app_entitlements"] == {}
    assert second.state["bookmarks"]["automation_exclusions"] == {}
    # every stream's entries are gone, a stream not selected too; the bookmarks stay
    for message in second.states:
        assert not any("partitions" in bookmark for bookmark in message["bookmarks"].values())
    for name in partitioned - {"app_entitlements", "automation_exclusions"}:
        assert second.state["bookmarks"][name] == {}, name
    assert second.state["bookmarks"]["grant_feed"] == first.state["bookmarks"]["grant_feed"]
    # streams only listed for another (the directory reads the exclusions' partitions) get
    # no state of their own
    alone = sync(config, catalog=catalog_selecting(config, {"users": None}))
    assert alone.state == {"bookmarks": {"users": {}}}


def test_a_partitions_ids_left_out_of_its_records_are_filled_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The service may leave a partition's own ids out of the objects it lists (an exclusion
    without its entitlement): the record still carries them, from the partition it was read
    for, as they are its primary key."""
    emulator = shared_emulator()
    config = tap_config(emulator)
    parse = AutomationExclusionsStream.parse_response

    def without_ids(self: AutomationExclusionsStream, response: t.Any) -> t.Iterator[t.Any]:
        for record in parse(self, response):
            yield {k: v for k, v in record.items() if k not in ("appId", "appEntitlementId")}

    monkeypatch.setattr(AutomationExclusionsStream, "parse_response", without_ids)
    result = sync(config, catalog=catalog_selecting(config, {"automation_exclusions": None}))
    read = Counter(
        (r["appId"], r["appEntitlementId"], r["userId"])
        for r in result.records["automation_exclusions"]
    )
    excluded = Counter(
        (r["app_id"], r["app_entitlement_id"], r["user_id"])
        for r in emulator.dataset.excluded_users()
    )
    assert read == excluded
    assert len(read) > 100


@pytest.mark.parametrize("stream", ["grant_feed", "automation_exclusions", "users"])
def test_a_failed_run_exits_at_once_while_a_worker_waits_for_an_answer(
    emulator: Emulator, stream: str
) -> None:
    """One worker's request fails (403) while another's is never answered (the emulator holds
    it for ten minutes): the run fails within seconds, not after ``request_timeout``, and no
    worker thread outlives it. The grant feed reads time windows in workers, the exclusions
    read their partitions ahead (engine/partitions.py), and ``users`` alone reads the
    directory ahead in a thread while the others fetch the exclusion pages (streams/users.py):
    there the directory's next page never comes while an exclusion page fails."""
    faults: list[tuple[str, str, float]]  # kind, path, delay of a "slow" one
    settings: dict[str, t.Any] = {}
    failing = stream  # the stream whose session the 403 comes through
    if stream == "grant_feed":
        faults = [("slow", FEED, 600), ("403", FEED, 0)]  # any two windows
    else:
        # The main thread waits for the partitions in order: the first fails, the second hangs
        # (for users: the second is read, and the directory's second page hangs).
        (a, ae), (b, be) = emulator.dataset.exclusion_entitlements[:2]
        path = "/api/v1/apps/{}/entitlements/{}/automation/exclusions"
        faults = [("403", path.format(a, ae), 0)]
        settings["exclusion_entitlements"] = [
            {"app_id": a, "app_entitlement_id": ae},
            {"app_id": b, "app_entitlement_id": be},
        ]
        if stream == "automation_exclusions":
            faults.append(("slow", path.format(b, be), 600))
        else:
            directory = "/api/v1/users"
            faults += [("slow", directory, 0), ("slow", directory, 600)]  # the first page at once
            settings["page_size"] = 10
            failing = "automation_exclusions"
    for kind, path, delay in faults:
        emulator.faults.add(kind=kind, path=path, delay=delay)
    slow = sum(kind == "slow" for kind, _, _ in faults)
    config = {**tap_config(emulator), "max_concurrency": 4, "request_timeout": 60, **settings}
    tap = TapAccessGov(
        config=config, catalog=catalog_selecting(config, {stream: None}), parse_env_config=False
    )

    def hanging_first(response: requests.Response, *args: t.Any, **kwargs: t.Any) -> None:
        """The 403 is handed on only once the other request hangs in the emulator."""
        if response.status_code == 403:
            deadline = time.monotonic() + 5
            while (
                emulator.stats["faults_by_kind"].get("slow", 0) < slow
                and time.monotonic() < deadline
            ):
                time.sleep(0.01)

    tap.streams[failing].requests_session.hooks["response"].append(hanging_first)  # type: ignore[attr-defined]
    started = time.monotonic()
    with pytest.raises(FatalAPIError, match="answered 403"):
        sync(config, tap=tap)
    took = time.monotonic() - started
    # A run that waited for the request in flight would end at its timeout (the request
    # hangs 600 s): the failed run ends before it, however loaded the machine
    assert took < config["request_timeout"], f"the failed run waited {took:.0f} s for a request"
    assert emulator.stats["faults_by_kind"] == {"slow": slow, "403": 1}
    workers = (
        "grant-feed",
        "prefetch",
        "directory",
    )  # the Workers' thread names (engine/concurrency.py)
    assert not [th.name for th in threading.enumerate() if th.name.startswith(workers)]


def test_the_final_state_is_written_after_the_sdk_has_synced_every_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole STATE that ends a successful run is written by the tap's ``sync_all`` once
    the SDK's has returned (the first bend listed in tap.py), not from inside it by a stream's
    metrics hook (``log_sync_costs``, which the SDK happens to call last)."""
    events: list[str] = []
    sdk_sync_all, write_message = Tap.sync_all, TapAccessGov.write_message

    def sync_all(tap: Tap) -> None:
        sdk_sync_all(tap)
        events.append("the SDK's sync_all returned")

    def write(tap: TapAccessGov, message: t.Any) -> None:
        events.append(f"{type(message).__name__} {json.dumps(getattr(message, 'value', None))}")
        write_message(tap, message)

    monkeypatch.setattr(Tap, "sync_all", sync_all)
    monkeypatch.setattr(TapAccessGov, "write_message", write)
    config = tap_config(shared_emulator())
    tap = TapAccessGov(config=config, parse_env_config=False)
    result = sync(config, tap=tap)
    assert events[-2:] == ["the SDK's sync_all returned", f"StateMessage {json.dumps(tap.state)}"]
    assert result.messages[-1] == {"type": "STATE", "value": result.state}
    assert set(result.state["bookmarks"]) == {*STREAMS, "full_table_snapshots"}


def test_read_ahead_reads_the_next_chunks_while_the_caller_holds_one_and_raises_its_failure() -> (
    None
):
    """``read_ahead`` (engine/concurrency.py): a page series whose pages must follow each other
    has its pages read in a worker from the call on (not from the caller's first ask), hands
    every item on in order, and raises in the caller what the reading raised."""
    ahead = threading.Event()

    def read() -> t.Iterator[int]:
        for item in range(25):
            if item == 20:
                ahead.set()  # two chunks of ten have gone to the queue
            yield item
        raise RuntimeError("the service failed")

    workers = Workers(1, threading.Event(), "read-ahead-test")
    try:
        items = read_ahead(workers, read, chunk=10, chunks=3)
        assert ahead.wait(5), "the chunks are read from the call on, before the caller asks"
        taken = [next(items)]
        with pytest.raises(RuntimeError, match="the service failed"):
            taken.extend(items)
        assert taken == list(range(25))
    finally:
        workers.close()
    assert not [th.name for th in threading.enumerate() if th.name.startswith("read-ahead-test")]


def test_read_ahead_ends_its_caller_s_wait_when_its_workers_are_closed() -> None:
    """``Workers.close`` sets ``stop``, joins the threads and clears ``stop`` again: a caller
    of ``read_ahead`` waiting for the next chunk still ends (``closed`` stays true), whenever
    the close falls between two of its looks."""
    stop = threading.Event()
    workers = Workers(1, stop, "read-ahead-close-test")
    reading = threading.Event()

    def read() -> t.Iterator[int]:
        """A page that never comes until the sync stops (the close hangs the call up)."""
        reading.set()
        stop.wait()
        yield from ()

    taken: list[int] = []
    items = read_ahead(workers, read, chunk=10, chunks=3)
    caller = threading.Thread(target=lambda: taken.extend(items), daemon=True)
    caller.start()
    assert reading.wait(5)
    workers.close()
    assert not stop.is_set(), "close clears stop once its threads are joined"
    caller.join(1)
    assert not caller.is_alive(), "the caller still waits for a chunk after the close"
    assert taken == []
