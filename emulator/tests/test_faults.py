"""Faults on demand: gateway errors with Retry-After, transport faults, paths, seeding, latency."""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest
import requests

from emulator import Dataset, Emulator, errors
from emulator.tests.conftest import (
    FEED,
    assertion,
    assertion_form,
    exclusions_url,
    feed,
    login,
    token_request,
)

# ----- faults ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["429", "500", "502", "503", "504"])
def test_gateway_error_faults(api, emu: Emulator, ds: Dataset, kind: str) -> None:
    emu.reset_stats()
    emu.faults.add(kind=kind, path=FEED, times=2)
    for _ in range(2):
        response = feed(api, emu, {})
        assert response.status_code == int(kind)
        assert response.json()["code"] in (8, 13, 14)
        if kind == "429":
            assert response.headers["Retry-After"] == "1"
    assert feed(api, emu, {}).json()["list"] == ds.feed_entries()[:25]
    assert emu.stats["faults_by_kind"] == {kind: 2}
    assert emu.stats["faults_injected"] == 2


NAMED_CODES = {
    "400": "INVALID_ARGUMENT",
    "401": "UNAUTHENTICATED",
    "403": "PERMISSION_DENIED",
    "429": "RESOURCE_EXHAUSTED",
    "500": "INTERNAL",
    "502": "UNAVAILABLE",
    "503": "UNAVAILABLE",
    "504": "UNAVAILABLE",
}


@pytest.mark.parametrize("kind", sorted(NAMED_CODES))
def test_error_faults_answer_the_codes_errors_py_names(api, emu: Emulator, kind: str) -> None:
    """Each injected error answers the gRPC code errors.py names for its status (403 had a
    bare 7 before PERMISSION_DENIED was named)."""
    emu.faults.add(kind=kind, path=FEED)
    response = feed(api, emu, {})
    assert response.status_code == int(kind)
    assert response.json() == {
        "code": getattr(errors, NAMED_CODES[kind]),
        "message": response.json()["message"],
        "details": [],
    }


def test_throttling_and_oversized_bodies_answer_named_codes(fresh: Emulator) -> None:
    first, second = login(fresh), login(fresh)
    fresh.max_in_flight, fresh.latency = 1, 0.5
    held = threading.Thread(target=lambda: first.post(fresh.url + FEED, json={}, timeout=10))
    held.start()
    time.sleep(0.2)
    throttled = second.post(fresh.url + FEED, json={}, timeout=10)
    held.join()
    assert (throttled.status_code, throttled.json()["code"]) == (429, errors.RESOURCE_EXHAUSTED)
    fresh.max_in_flight, fresh.latency = 0, 0
    # A body announced too large is refused before it is read: announce it, send none.
    conn = http.client.HTTPConnection("127.0.0.1", fresh.port, timeout=10)
    conn.putrequest("POST", FEED)
    conn.putheader("Content-Length", str(2 << 20))
    conn.endheaders()
    too_big = conn.getresponse()
    assert (too_big.status, json.loads(too_big.read())["code"]) == (413, errors.INVALID_ARGUMENT)
    conn.close()


def test_retry_after_as_http_date(api, emu: Emulator) -> None:
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    emu.faults.add(kind="429", retry_after=date)
    assert feed(api, emu, {}).headers["Retry-After"] == date


def test_transport_faults(api, emu: Emulator, ds: Dataset) -> None:
    emu.faults.add(kind="drop")
    with pytest.raises(requests.ConnectionError):
        feed(api, emu, {})
    emu.faults.add(kind="malformed")
    malformed = feed(api, emu, {})
    assert malformed.status_code == 200
    with pytest.raises(ValueError, match="Expecting value"):
        malformed.json()
    emu.faults.add(kind="truncated")
    with pytest.raises((requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        feed(api, emu, {})
    emu.faults.add(kind="slow", delay=0.5)
    with pytest.raises(requests.ReadTimeout):
        api.post(emu.url + FEED, json={}, timeout=0.2)
    assert feed(api, emu, {}).json()["list"] == ds.feed_entries()[:25]


def test_faults_respect_paths(api, emu: Emulator, ds: Dataset) -> None:
    emu.faults.add(kind="503", path="/api/v1/apps", times=1)
    assert feed(api, emu, {}).status_code == 200
    assert (
        api.get(exclusions_url(emu, *ds.exclusion_entitlements[0]), timeout=10).status_code == 503
    )
    emu.faults.add(kind="503", times=1)  # any /api/ path, never the token endpoint
    assert login(emu) is not None
    assert feed(api, emu, {}).status_code == 503
    emu.faults.add(kind="500", path="/auth/v1/token")
    assert token_request(emu, **assertion_form(assertion())).status_code == 500


def test_random_faults_are_seeded(api, emu: Emulator) -> None:
    def run() -> list[int]:
        emu.faults.random(rate=0.5, kinds=("500", "503"), seed=3)
        return [feed(api, emu, {}).status_code for _ in range(20)]

    first = run()
    assert first == run()
    assert {200, 500, 503} <= set(first)
    emu.faults.clear()
    assert feed(api, emu, {}).status_code == 200


def test_random_429s_ask_for_the_wait_given(api, emu: Emulator) -> None:
    """One second unless told (as a rule's 429), the given wait when told."""
    try:
        for given, asked in ((None, "1"), (0, "0"), ("Wed, 21 Oct 2015 07:28:00 GMT", None)):
            options = {} if given is None else {"retry_after": given}
            emu.faults.random(rate=1.0, kinds=("429",), **options)
            answer = feed(api, emu, {})
            assert answer.status_code == 429
            assert answer.headers["Retry-After"] == (asked or given)
    finally:
        emu.faults.clear()  # the emulator is the module's


def test_latency(api, emu: Emulator) -> None:
    emu.latency = 0.2
    started = time.perf_counter()
    feed(api, emu, {})
    assert time.perf_counter() - started >= 0.2
