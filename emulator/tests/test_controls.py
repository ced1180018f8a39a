"""Events added at run time, the /_emulator/ controls, determinism and the command line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

from emulator import Emulator
from emulator.tests.conftest import (
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
