"""No personal value of any user in the logs: full command-line runs at INFO and DEBUG, stderr
scanned for every e-mail, username, display name, profile value and *Sources value."""

from __future__ import annotations

import json
import logging
import os
import re
import typing as t
from pathlib import Path

import pytest
import requests

from emulator import Emulator
from tap_accessgov.paging import Page
from tap_accessgov.tap import TapAccessGov
from tests.conftest import config_file, run_cli, shared_emulator, tap_config

PERSONAL_FIELDS = ("email", "emails", "username", "usernames", "displayName", "profile")


def _strings(value: t.Any) -> t.Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def personal_values(user: dict[str, t.Any]) -> set[str]:
    """The values of a User that identify a person: e-mails, usernames, the display name,
    every string in the profile, and the ``value`` of every ``*Sources`` entry."""
    values: set[str] = set()
    for name in PERSONAL_FIELDS:
        values.update(_strings(user.get(name)))
    for name, sources in user.items():
        if name.endswith("Sources"):
            values.update(s["value"] for s in sources or [] if isinstance(s.get("value"), str))
    return {value for value in values if value}


def excluded_users(emulator: Emulator) -> dict[str, dict[str, t.Any]]:
    dataset = emulator.dataset
    return {
        entry["user"]["id"]: entry["user"]
        for app_id, entitlement_id in dataset.exclusion_entitlements
        for entry in dataset.exclusion_entries(app_id, entitlement_id)
    }


def found_in(text: str, values: t.Iterable[str]) -> set[str]:
    """The values that occur in ``text`` as whole words (so that a job title such as
    "Manager" does not match inside "TokenManager"). Values shorter than four characters
    (profile tags such as "all" or "ops") are not looked for: they are ordinary log words."""
    return {
        value
        for value in values
        if len(value) >= 4
        and value in text
        and re.search(rf"(?<![\w.@-]){re.escape(value)}(?![\w.@-])", text) is not None
    }


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
@pytest.mark.cli
def test_no_personal_value_in_the_logs(emulator: Emulator, tmp_path: Path, level: str) -> None:
    config = {**tap_config(emulator), "max_concurrency": 4}
    env = {**os.environ, "TAP_ACCESSGOV_LOGLEVEL": level}
    result = run_cli("--config", config_file(config, tmp_path), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    users = excluded_users(emulator)
    values = set().union(*(personal_values(user) for user in users.values()))
    assert len(values) > 500
    extracted = sum(value in result.stdout for value in values)
    assert extracted == len(values), "the users are extracted (the scan finds their values)"
    if level == "DEBUG":
        assert "urllib3.connectionpool" in result.stderr, "DEBUG logging is on"
    assert not found_in(result.stderr, values)


def test_an_exclusion_without_a_user_id_is_reported_by_its_ids_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The entry skipped for lack of a user id may still hold the user's e-mail and name."""
    user = {"email": "kim.doe@example.com", "displayName": "Kim Doe", "emails": ["kd@x.example"]}
    entry = {"appId": "a1", "appEntitlementId": "e1", "appUserId": "au1", "user": user}
    response = requests.Response()
    response.status_code = 200
    response._content = json.dumps({"list": [entry]}).encode()
    tap = TapAccessGov(config=tap_config(shared_emulator()), parse_env_config=False)
    exclusions = tap.streams["automation_exclusions"]
    with caplog.at_level(logging.DEBUG):
        entries = list(exclusions.parse_response(Page.read(response)))
        assert entries == [entry], "the request loop yields the service's entries"
        assert exclusions.exclusion_record(entry) is None  # type: ignore[attr-defined]
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "Skipping an automation exclusion without a user id (app a1, app entitlement e1, "
        "app user au1)"
    ]
    assert not found_in("\n".join(messages), personal_values(user))
