"""Events added at run time, the /_emulator/ controls, determinism and the command line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from emulator import Emulator
from emulator.tests.conftest import (
    CRED,
    END,
    FEED,
    ROOT,
    login,
    small_dataset,
)
from emulator.timefmt import parse_rfc3339

# ----- added events and controls ---------------------------------------------------------


def test_added_events_are_visible(fresh: Emulator) -> None:
    ds = fresh.dataset
    session = login(fresh)
    # Compare instants, not strings: "…:36Z" sorts after "…:36.119Z" as text.
    latest = max((e["feed"]["date"] for e in ds.feed_entries()), key=parse_rfc3339)
    assert fresh.add_events(count=30) == 230
    new = [e for e in ds.feed_entries() if parse_rfc3339(e["feed"]["date"]) > parse_rfc3339(latest)]
    assert len(new) == 30
    assert new == ds.feed_entries()[200:]
    instants = [parse_rfc3339(e["feed"]["date"]) for e in new]
    assert instants == sorted(set(instants))
    assert instants[-1] < parse_rfc3339(END) + 60 * 10**9
    assert len({len(e["feed"]["date"]) for e in new}) > 1
    fresh.add_events(dates=[latest, "2025-05-01T10:00:00.123Z"])
    assert session.post(fresh.url + FEED, json={"after": latest, "pageSize": 100}, timeout=10).ok
    got = []
    body: dict[str, Any] = {"after": latest, "pageSize": 100}
    while True:
        page = session.post(fresh.url + FEED, json=body, timeout=10).json()
        got.extend(page["list"] or [])
        if not page["nextPageToken"]:
            break
        body["pageToken"] = page["nextPageToken"]
    assert got == ds.feed_entries(after=latest)
    assert sum(e["feed"]["date"] == latest for e in got) == 2
    assert ds.feed_entries()[-1]["feed"]["date"] == "2025-05-01T10:00:00.123Z"


def test_http_controls(fresh: Emulator) -> None:
    control = fresh.url + "/_emulator/"
    session = login(fresh)
    assert requests.post(control + "events", json={"count": 5}, timeout=10).json() == {"total": 205}
    requests.post(
        control + "faults", json={"kind": "429", "path": FEED, "retry_after": "2"}, timeout=10
    )
    response = session.post(fresh.url + FEED, json={}, timeout=10)
    assert (response.status_code, response.headers["Retry-After"]) == (429, "2")
    requests.post(
        control + "faults", json={"random": {"rate": 1.0, "kinds": ["502"], "seed": 1}}, timeout=10
    )
    assert session.post(fresh.url + FEED, json={}, timeout=10).status_code == 502
    requests.post(control + "faults", json={"clear": True}, timeout=10)
    assert session.post(fresh.url + FEED, json={}, timeout=10).status_code == 200
    stats = requests.get(control + "stats", timeout=10).json()
    assert stats["faults_by_kind"] == {"429": 1, "502": 1}
    assert stats["api_requests_by_path"] == {FEED: 3}
    settings = requests.post(
        control + "settings",
        json={"token_lifetime": 5, "latency": 0, "shapes": "older", "log_order": "descending"},
        timeout=10,
    )
    assert settings.json() == {
        "latency": 0.0,
        "token_lifetime": 5,
        "exclusions_ignore_page_token": False,
        "emit_unpopulated": None,
        "max_in_flight": 0,
        "throttle_retry_after": 1,
        "shapes": "older",
        "log_order": "descending",
        "log_retention_days": 0,
        "log_calls": True,
        "forbidden_operations": [],
        "absent_operations": [],
        "inline_app_owners": False,
    }
    assert fresh.token_lifetime == 5
    assert fresh.log_order == "descending"
    assert fresh.shapes == "older"
    bad = requests.post(control + "settings", json={"shapes": "oldest"}, timeout=10)
    assert bad.status_code == 400
    for wrong in ({"log_order": "newest-first"}, {"log_retention_days": -1}, {"log_calls": 1}):
        assert requests.post(control + "settings", json=wrong, timeout=10).status_code == 400
    requests.post(control + "revoke-tokens", timeout=10)
    assert session.post(fresh.url + FEED, json={}, timeout=10).status_code == 401
    requests.post(control + "reset-stats", timeout=10)
    assert requests.get(control + "stats", timeout=10).json()["api_requests"] == 0
    assert requests.post(control + "faults", json={"kind": "teapot"}, timeout=10).status_code == 400
    tenant = requests.get(control + "tenant", timeout=10).json()
    assert tenant == fresh.tenant()
    assert tenant["url"] == fresh.url
    assert requests.get(control + "config", timeout=10).status_code == 404


def test_dataset_is_deterministic() -> None:
    a, b = small_dataset(events=300), small_dataset(events=300)
    assert a.feed_entries() == b.feed_entries()
    assert a.exclusion_entitlements == b.exclusion_entitlements
    assert small_dataset(events=300, seed=2).feed_entries() != a.feed_entries()


def test_cli_serves_until_sigterm(tmp_path: Path) -> None:
    tenant_file, ready = tmp_path / "tenant.json", tmp_path / "ready"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emulator",
            "--port",
            "0",
            "--events",
            "500",
            "--users",
            "50",
            "--apps",
            "3",
            "--exclusion-entitlements",
            "5",
            "--write-tenant",
            str(tenant_file),
            "--ready-file",
            str(ready),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("emulator listening on http://127.0.0.1:")
        url = line.split()[-1]
        assert ready.read_text().strip() == url
        tenant = json.loads(tenant_file.read_text())
        assert tenant["url"] == url
        assert len(tenant["exclusion_entitlements"]) == 5
        assert set(tenant["exclusion_entitlements"][0]) == {"app_id", "app_entitlement_id"}
        response = requests.post(
            f"{url}/auth/v1/token",
            data={
                "grant_type": "client_credentials",
                "client_id": tenant["client_id"],
                "client_secret": tenant["client_secret"],
            },
            timeout=10,
        )
        assert response.status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


# ----- a frozen emulator -------------------------------------------------------------------


def _read_everything(emulator: Emulator, session: requests.Session) -> list[bytes]:
    """The raw bodies of the feed (every page, in pages of 37), the apps and the grants
    search: the requests a sync sends, in order."""
    bodies = []
    body: dict[str, Any] = {"pageSize": 37}
    while True:
        answer = session.post(emulator.url + FEED, json=body, timeout=10)
        answer.raise_for_status()
        bodies.append(answer.content)
        if not (token := answer.json()["nextPageToken"]):
            break
        body["pageToken"] = token
    for path in ("/api/v1/apps?pageSize=3", "/api/v1/users"):
        bodies.append(session.get(emulator.url + path, timeout=10).content)
    bodies.append(session.post(emulator.url + "/api/v1/search/grants", json={}, timeout=10).content)
    return bodies


def test_a_frozen_emulator_answers_byte_for_byte_as_a_thawed_one_and_builds_each_once() -> None:
    """Frozen (its answers kept): every body equal to a thawed emulator's of the same data,
    also in another field shape; read again, nothing is built; the gateway still checks
    every request (a bad bearer, a fault, a bad page token), and the data cannot change."""
    with (
        Emulator(small_dataset(events=900), credential=CRED, log_calls=False) as thawed,
        Emulator(
            small_dataset(events=900), credential=CRED, log_calls=False, frozen=True
        ) as frozen,
    ):
        thawed.service.page_tokens = frozen.service.page_tokens  # the same tokens both ways
        plain, kept = login(thawed), login(frozen)
        first = _read_everything(frozen, kept)
        assert first == _read_everything(thawed, plain)
        built = frozen.service.frozen.built  # type: ignore[union-attr]
        assert built == len(first)
        assert _read_everything(frozen, kept) == first
        assert frozen.service.frozen.built == built  # type: ignore[union-attr]
        frozen.update_settings({"shapes": "older"})
        thawed.update_settings({"shapes": "older"})
        assert _read_everything(frozen, kept) == _read_everything(thawed, plain) != first

        stranger = requests.Session()
        stranger.headers["Authorization"] = "Bearer forged"
        assert stranger.post(frozen.url + FEED, json={}, timeout=10).status_code == 401
        frozen.faults.add(kind="503", path=FEED)
        assert kept.post(frozen.url + FEED, json={}, timeout=10).status_code == 503
        assert (
            kept.post(frozen.url + FEED, json={"pageToken": "forged"}, timeout=10).status_code
            == 400
        )
        for change, call in (
            ("add events", lambda: frozen.add_events(count=1)),
            ("close tasks", frozen.close_tasks),
            ("remove", lambda: frozen.remove(user_id="u")),
            ("restore", lambda: frozen.restore(user_id="u")),
        ):
            with pytest.raises(ValueError, match=f"cannot {change}: this emulator is frozen"):
                call()
        answer = requests.post(frozen.url + "/_emulator/events", json={"count": 1}, timeout=10)
        assert answer.status_code == 400, answer.text
        with pytest.raises(ValueError, match="logs no calls"):
            frozen.log_calls = True
        with pytest.raises(AttributeError):
            frozen.frozen = False  # fixed for the emulator's life
        with pytest.raises(ValueError, match="logs no calls"):
            Emulator(small_dataset(), credential=CRED, frozen=True)
    assert frozen.dataset.total == 900
