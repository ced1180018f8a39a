"""Bad settings fail before any request, from the real command line: one line that names the
setting and what is wrong, a non-zero exit, no traceback, never the secret."""

from __future__ import annotations

import json
import logging
import subprocess

import pytest
from singer_sdk.exceptions import ConfigValidationError

from tap_accessgov.tap import TapAccessGov
from tests.conftest import (
    BIN,
    CREDENTIAL,
    STREAMS,
    config_file,
    require_group,
    run_cli,
    shared_emulator,
    tap_config,
)

GOOD = {
    "client_id": CREDENTIAL.client_id,
    "client_secret": CREDENTIAL.client_secret,
    "api_url": "http://127.0.0.1:9",  # nothing listens: validation must fail before any call
}
SECRET_KEY_PART = CREDENTIAL.client_secret.rsplit(":", 1)[1]

CASES = [
    ({"client_id": "no-at-sign/tap"}, "client_id: has no '@'"),
    ({"client_id": "abc@/tap"}, "client_id: the hostname between '@' and '/' is empty"),
    (
        {"client_secret": CREDENTIAL.client_secret.replace(":v1:", ":v2:")},
        "client_secret: unsupported version marker",
    ),
    (
        {"client_secret": "secret-token:accessgov.test:v1:%%%"},
        "client_secret: the key part is not base64url",
    ),
    ({"auth_method": "password"}, "auth_method: 'password' is not one of"),
    ({"page_size": 5}, "page_size: 5 is less than the minimum of 10"),
    ({"page_size": 500}, "page_size: 500 is greater than the maximum of 100"),
    ({"start_date": "last tuesday"}, "start_date: 'last tuesday' is not an RFC 3339 date-time"),
    (
        {"start_date": "2025-02-01T00:00:00Z", "end_date": "2025-01-01T00:00:00Z"},
        "end_date: must be later than start_date",
    ),
    (
        {"app_user_refs": [{"id": "u1"}]},
        "app_user_refs[0]: 'app_id' is a required property",
    ),
    (
        {"app_entitlement_refs": [{"app_id": "a1"}]},
        "app_entitlement_refs[0]: needs app_entitlement_id",
    ),
    (
        {"app_entitlement_refs": [{"app_id": "a1", "app_entitlement_id": "e1", "id": "e1"}]},
        "app_entitlement_refs[0]: needs app_entitlement_id (not also 'id', its deprecated name)",
    ),
    (
        {"exclusion_entitlements": [{"app_id": "", "app_entitlement_id": "e"}]},
        "exclusion_entitlements[0].app_id: '' should be non-empty",
    ),
    (
        {"exclusion_entitlements": [{"app_id": "a", "app_entitlement_id": "e"}] * 2},
        "exclusion_entitlements[1]: repeats entry [0]",
    ),
    (
        {"api_url": "http://accessgov.example.com"},
        "api_url: plain http is allowed only for loopback",
    ),
    ({"api_url": "ftp://127.0.0.1"}, "api_url: must be an absolute URL"),
    ({"client_secret": None}, "client_secret: required, but not set"),
    ({"client_secret": [CREDENTIAL.client_secret]}, "client_secret: must be a string"),
    ({"client_secret": {"key": CREDENTIAL.client_secret}}, "client_secret: must be a string"),
]


@pytest.mark.parametrize(("overrides", "expected"), CASES, ids=[c[1][:40] for c in CASES])
@pytest.mark.cli
def test_bad_setting_fails_with_one_clear_line(tmp_path, overrides: dict, expected: str) -> None:
    config = {k: v for k, v in {**GOOD, **overrides}.items() if v is not None}
    result = run_cli("--config", config_file(config, tmp_path))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if expected in line]
    assert len(lines) == 1, result.stderr
    assert "ERROR" in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    for text in (result.stdout, result.stderr):
        assert SECRET_KEY_PART not in text


@pytest.mark.parametrize(("overrides", "expected"), [CASES[0], CASES[2], CASES[-1]])
@pytest.mark.cli
def test_connection_test_reports_bad_settings_the_same_way(
    tmp_path, overrides: dict, expected: str
) -> None:
    """``--test`` runs before the SDK's command handles errors: it must not print a traceback."""
    config = {k: v for k, v in {**GOOD, **overrides}.items() if v is not None}
    result = run_cli("--config", config_file(config, tmp_path), "--test")
    assert result.returncode == 1
    assert sum(expected in line for line in result.stderr.splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert SECRET_KEY_PART not in result.stdout + result.stderr


@pytest.mark.cli
def test_discovery_needs_no_valid_config(tmp_path) -> None:
    """Meltano discovers before it syncs; a bad client id is reported by the sync, not here."""
    config = {"client_id": "no-at-sign/tap", "client_secret": "x"}  # no api_url to fall back on
    result = run_cli("--config", config_file(config, tmp_path), "--discover")
    assert result.returncode == 0, result.stderr[-2000:]
    streams = {entry["tap_stream_id"] for entry in json.loads(result.stdout)["streams"]}
    assert streams == {*STREAMS, "full_table_snapshots"}


def test_all_problems_are_reported_together() -> None:
    config = {**GOOD, "client_id": "bad", "start_date": "never", "api_url": "http://example.com"}
    with pytest.raises(ConfigValidationError) as caught:
        TapAccessGov(config=config, parse_env_config=False)
    assert [error.split(":", 1)[0] for error in caught.value.errors] == [
        "client_id",
        "api_url",
        "start_date",
    ]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080",
        "http://localhost:1",
        "http://[::1]:80",
        "https://proxy.example/base",
    ],
)
def test_allowed_api_urls(url: str) -> None:
    tap = TapAccessGov(config={**GOOD, "api_url": url + "/"}, parse_env_config=False)
    assert tap.api_url == url


def test_default_api_url_comes_from_the_client_id() -> None:
    config = {k: v for k, v in GOOD.items() if k != "api_url"}
    tap = TapAccessGov(config=config, parse_env_config=False)
    assert tap.api_url == "https://acme.accessgov.test"
    assert tap.config["page_size"] == 100
    assert tap.config["auth_method"] == "client_assertion"


@pytest.mark.cli
def test_about_documents_every_setting_and_marks_the_secret() -> None:
    result = run_cli("--about", "--format", "json")
    about = json.loads(result.stdout)
    properties = about["settings"]["properties"]
    for name in (
        "client_id",
        "client_secret",
        "auth_method",
        "api_url",
        "start_date",
        "end_date",
        "page_size",
        "app_ids",
        "app_entitlement_refs",
        "app_user_refs",
        "user_ids",
        "expand_mask",
        "exclusion_entitlements",
    ):
        assert properties[name].get("description"), name
    assert properties["client_secret"].get("secret") is True
    assert properties["client_secret"].get("writeOnly") is True


@pytest.mark.cli
def test_python_dash_m_runs_the_same_command_line() -> None:
    """``python -m tap_accessgov`` is the console script: same options, same output."""
    require_group("cli")
    by_module = subprocess.run(
        [str(BIN / "python"), "-m", "tap_accessgov", "--about", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert by_module.returncode == 0, by_module.stderr[-2000:]
    assert by_module.stdout == run_cli("--about", "--format", "json").stdout


INPUT_FILE_CASES = {
    "config missing": ("config", None, "config file {path}: not found"),
    "config not JSON": ("config", "{'page_size': 50}", "config file {path}: is not JSON ("),
    "config empty": ("config", "", "config file {path}: is empty"),
    "config not an object": ("config", "[1, 2]", "config file {path}: is not a JSON object"),
    "state empty": ("state", "", "state file {path}: is empty"),
    "state not JSON": ("state", '{"bookmarks": ', "state file {path}: is not JSON ("),
}


@pytest.mark.parametrize("case", INPUT_FILE_CASES)
@pytest.mark.cli
def test_an_unreadable_config_or_state_file_fails_in_one_line(tmp_path, case: str) -> None:
    kind, content, expected = INPUT_FILE_CASES[case]
    path = tmp_path / f"{kind}.json"
    if content is not None:
        path.write_text(content)
    args = ["--config", str(path)]
    if kind == "state":
        args = ["--config", config_file(GOOD, tmp_path), "--state", str(path)]
    result = run_cli(*args)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1, result.stderr
    assert expected.format(path=path) in errors[0]
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) <= 3, result.stderr


@pytest.mark.parametrize("shape", ["current", "deprecated"])
def test_an_app_entitlement_has_one_shape_in_every_setting_and_the_old_one_still_works(
    caplog: pytest.LogCaptureFixture, shape: str
) -> None:
    """``{app_id, app_entitlement_id}`` in app_entitlement_refs as in exclusion_entitlements;
    app_entitlement_refs' former ``{app_id, id}`` sends the same request, with one line."""
    entitlements = [("a1", "e1"), ("a2", "e2")]
    name = "app_entitlement_id" if shape == "current" else "id"
    refs = [{"app_id": app, name: entitlement} for app, entitlement in entitlements]
    with caplog.at_level(logging.WARNING):
        tap = TapAccessGov(config={**GOOD, "app_entitlement_refs": refs}, parse_env_config=False)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == (
        []
        if shape == "current"
        else [
            "app_entitlement_refs: entries of the form {app_id, id} are deprecated; write "
            "{app_id, app_entitlement_id}, as in exclusion_entitlements (read as such for now)"
        ]
    )
    feed = tap.streams["grant_feed"]
    assert feed.config["app_entitlement_refs"] == [
        {"app_id": app, "app_entitlement_id": entitlement} for app, entitlement in entitlements
    ]
    body = feed.prepare_request_payload(None, None)  # type: ignore[attr-defined]
    assert body["appEntitlementRefs"] == [
        {"appId": app, "id": entitlement} for app, entitlement in entitlements
    ]
    assert tap.config.given["app_entitlement_refs"] == refs  # the SDK's config: as given


def test_an_unknown_setting_is_a_warning_naming_the_closest_known_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        TapAccessGov(config={**GOOD, "page_sise": 50}, parse_env_config=False)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "Unknown setting 'page_sise' is ignored; did you mean 'page_size'?"
    ]


@pytest.mark.cli
def test_no_setting_of_the_full_config_schema_warns(caplog: pytest.LogCaptureFixture) -> None:
    """Settings the SDK understands (stream maps, flattening, batch, faker) are known too."""
    about = json.loads(run_cli("--about", "--format", "json").stdout)
    known = set(about["settings"]["properties"])
    assert {"stream_maps", "stream_map_config", "flattening_enabled", "batch_config"} <= known
    with caplog.at_level(logging.WARNING):
        TapAccessGov(
            config={**dict.fromkeys(known, 1), **GOOD},
            parse_env_config=False,
            validate_config=False,
            setup_mapper=False,
        )
    assert not [r.getMessage() for r in caplog.records if "setting" in r.getMessage()]


@pytest.mark.cli
def test_a_passing_connection_test_says_so_without_errors(tmp_path) -> None:
    emulator = shared_emulator()
    result = run_cli("--config", config_file(tap_config(emulator), tmp_path), "--test")
    assert result.returncode == 0, result.stderr[-2000:]
    assert not [line for line in result.stderr.splitlines() if "ERROR" in line], result.stderr
    passed = [line for line in result.stderr.splitlines() if "Connection test passed" in line]
    assert len(passed) == 1
    assert passed[0].endswith(
        "Connection test passed: an access token was obtained and each stream answered "
        f"({', '.join(STREAMS)})"
    )


@pytest.mark.cli
def test_an_unknown_setting_is_named_even_when_another_setting_is_invalid(tmp_path) -> None:
    """A typo often explains the error next to it: the warning comes before the error."""
    config = {**GOOD, "page_sise": 50, "page_size": 5}
    result = run_cli("--config", config_file(config, tmp_path))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    warning = next(i for i, line in enumerate(lines) if "did you mean 'page_size'?" in line)
    error = next(i for i, line in enumerate(lines) if "Config validation failed" in line)
    assert warning < error
    assert "page_size: 5 is less than the minimum of 10" in lines[error]
