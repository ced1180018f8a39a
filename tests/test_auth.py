"""Authentication against the emulator: both token methods, one token per run, refresh
before expiry, one retry after a 401, and clear failures that never carry the secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from singer_sdk.exceptions import FatalAPIError

from emulator import Emulator, make_credential
from tap_accessgov.auth import AuthenticationError
from tap_accessgov.retries import TOKEN_MAX_TRIES
from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    CREDENTIAL,
    STREAMS,
    catalog_selecting,
    config_file,
    run_cli,
    sync,
    tap_config,
)


def feed_only(emulator: Emulator, **overrides: object) -> tuple[dict[str, object], dict]:
    """grant_feed alone, one request at a time: a fault planned for the next request meets
    the one retried (concurrent windows: tests/test_backfill.py)."""
    config = {**tap_config(emulator), "max_concurrency": 1, **overrides}
    return config, catalog_selecting(config, {"grant_feed": None})


@pytest.mark.parametrize("method", ["client_assertion", "client_secret"])
def test_each_method_gets_exactly_one_token_per_run(emulator: Emulator, method: str) -> None:
    config = {**tap_config(emulator), "auth_method": method}
    result = sync(config)
    stats = emulator.stats
    assert stats["token_requests_by_method"] == {method: 1}
    assert stats["token_requests"] == 1
    assert stats["unauthorized"] == 0
    assert len(result.records["grant_feed"]) == len(emulator.dataset.feed_entries())
    assert set(result.records) == {*STREAMS, "full_table_snapshots"}


def test_token_is_renewed_before_it_expires(emulator: Emulator) -> None:
    emulator.token_lifetime = 3  # renewed after 1.5 s (half the lifetime at most)
    emulator.latency = 0.2
    config, catalog = feed_only(emulator, page_size=100)
    result = sync(config, catalog=catalog)
    assert len(result.records["grant_feed"]) == len(emulator.dataset.feed_entries())
    stats = emulator.stats
    assert stats["unauthorized"] == 0  # never sent an expired token
    pages = stats["api_requests"]
    assert pages >= 15
    # 15 pages at >= 0.2 s each take >= 3 s: the token was renewed at least once, and not
    # for every request.
    assert 2 <= stats["token_requests"] < pages


def test_a_revoked_token_is_replaced_once_and_the_request_retried(emulator: Emulator) -> None:
    config, catalog = feed_only(emulator)
    tap = TapAccessGov(config=config, catalog=catalog, parse_env_config=False)
    tap.authenticator.update_access_token()
    emulator.revoke_tokens()
    result = sync(config, tap=tap)
    assert len(result.records["grant_feed"]) == len(emulator.dataset.feed_entries())
    stats = emulator.stats
    assert stats["unauthorized"] == 1
    assert stats["token_requests"] == 2


def test_wrong_secret_fails_clearly_without_the_secret(emulator: Emulator) -> None:
    other = make_credential(seed=99, tenant="acme.accessgov.test")
    config = {**tap_config(emulator), "client_secret": other.client_secret}
    with pytest.raises(AuthenticationError) as caught:
        sync(config)
    message = str(caught.value)
    assert "Authentication failed for client_id " + CREDENTIAL.client_id in message
    assert "answered 401" in message
    assert other.client_secret.rsplit(":", 1)[1] not in message
    assert emulator.stats["api_requests"] == 0


@pytest.mark.parametrize("method", ["client_assertion", "client_secret"])
@pytest.mark.cli
def test_wrong_secret_on_the_command_line(emulator: Emulator, tmp_path, method: str) -> None:
    other = make_credential(seed=99, tenant="acme.accessgov.test")
    config = {**tap_config(emulator), "client_secret": other.client_secret, "auth_method": method}
    result = run_cli("--config", config_file(config, tmp_path))
    assert result.returncode == 1
    failures = [
        line
        for line in result.stderr.splitlines()
        if "Run failed: Authentication failed for client_id" in line
    ]
    assert len(failures) == 1
    assert "Traceback" not in result.stderr
    # Refused once: the concurrent exclusion fetches do not each ask for a token again.
    assert emulator.stats["token_requests"] == 1
    for text in (result.stdout, result.stderr):
        assert other.client_secret not in text
        assert other.client_secret.rsplit(":", 1)[1] not in text


def test_token_endpoint_errors_are_retried(emulator: Emulator) -> None:
    emulator.faults.add(kind="503", path="/auth/v1/token", times=1)
    emulator.faults.add(kind="429", path="/auth/v1/token", times=1, retry_after="1")
    config, catalog = feed_only(emulator)
    result = sync(config, catalog=catalog)
    assert len(result.records["grant_feed"]) == len(emulator.dataset.feed_entries())
    assert emulator.stats["faults_injected"] == 2


def test_fatal_error_names_method_path_and_message(emulator: Emulator) -> None:
    config = {
        **tap_config(emulator),
        "app_entitlement_refs": [{"app_id": "nope", "app_entitlement_id": "nope"}],
        "expand_mask": ["not_a_path"],
    }
    config, catalog = config, catalog_selecting(config, {"grant_feed": None})
    with pytest.raises(FatalAPIError, match=r"POST /api/v1/grants/feed answered 400: .+"):
        sync(config, catalog=catalog)


def test_a_second_401_is_fatal_and_clear(emulator: Emulator) -> None:
    emulator.faults.add(kind="401", path="/api/v1/grants/feed", times=2)
    config, catalog = feed_only(emulator)
    with pytest.raises(
        FatalAPIError, match="answered 401 to a newly issued access token"
    ) as caught:
        sync(config, catalog=catalog)
    assert "POST /api/v1/grants/feed" in str(caught.value)
    # what to do about it, in the words of the service's web app
    assert str(caught.value).endswith(
        "Check that the API credential is still valid and that its scope and allowed IPs "
        "permit this call."
    )
    stats = emulator.stats
    assert stats["token_requests"] == 2
    assert stats["faults_by_kind"] == {"401": 2}


def test_a_401_after_a_successful_renewal_may_be_retried_again(emulator: Emulator) -> None:
    """Each time a renewed token has worked, a later 401 earns one more renewal."""
    emulator.faults.add(kind="401", path="/api/v1/grants/feed", times=1)
    config, catalog = feed_only(emulator, page_size=100)
    tap = TapAccessGov(config=config, catalog=catalog, parse_env_config=False)
    first = sync(config, tap=tap)
    assert len(first.records["grant_feed"]) == len(emulator.dataset.feed_entries())
    emulator.faults.add(kind="401", path="/api/v1/grants/feed", times=1)
    second = sync(config, tap=tap)  # same authenticator; resumes from the bookmark
    assert second.records["grant_feed"]
    assert emulator.stats["token_requests"] == 3
    assert emulator.stats["faults_by_kind"] == {"401": 2}


@pytest.mark.cli
def test_connection_test_passes_with_the_credential_and_fails_in_one_line_without(
    emulator: Emulator, tmp_path: Path
) -> None:
    passed = run_cli("--config", config_file(tap_config(emulator), tmp_path), "--test")
    assert passed.returncode == 0, passed.stderr[-2000:]
    assert {
        m["stream"] for m in map(json.loads, passed.stdout.splitlines()) if m["type"] == "RECORD"
    } == set(STREAMS), "--test reads one record a stream: it completes no full-table snapshot"
    other = make_credential(seed=99, tenant="acme.accessgov.test")
    config = {**tap_config(emulator), "client_secret": other.client_secret}
    failed = run_cli("--config", config_file(config, tmp_path), "--test")
    assert failed.returncode == 1
    assert (
        sum("Run failed: Authentication failed" in line for line in failed.stderr.splitlines()) == 1
    )
    assert "Traceback" not in failed.stderr


@pytest.mark.cli
def test_an_unreachable_token_endpoint_ends_the_run_without_every_thread_retrying(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Concurrent exclusion fetches share one failure: the run ends after one round of
    retries, not one round per worker."""
    emulator.faults.add(kind="503", path="/auth/v1/token", times=100)
    config = {**tap_config(emulator), "max_concurrency": 8}
    result = run_cli("--config", config_file(config, tmp_path))
    assert result.returncode == 1
    assert (
        sum("Run failed: Authentication failed" in line for line in result.stderr.splitlines()) == 1
    )
    assert "answered 503" in result.stderr
    assert emulator.stats["token_requests"] == TOKEN_MAX_TRIES
