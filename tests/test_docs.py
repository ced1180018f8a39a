"""The documentation and the shipped configuration stay true: the settings table
(docs/configuration.md) is the tap's own `--about`, meltano.yml declares every setting, sample_config.json works against
the emulator as shipped, and the plugin definition is generated from the tap."""

from __future__ import annotations

import importlib.metadata
import json
import re
import typing as t

import pytest
import yaml

import tasks
from emulator import Emulator
from scripts.plugin_definition import definition, rendered
from scripts.plugin_definition import main as plugin_definition_main
from tap_accessgov.tap import TapAccessGov
from tests.conftest import CREDENTIAL, EMULATOR_DEFAULTS, ROOT, default_dataset, run_cli, sync


@pytest.mark.cli
def test_the_settings_table_is_the_about_output() -> None:
    about = run_cli("--about", "--format", "markdown").stdout
    table = [line for line in about.split("## Settings", 1)[1].splitlines() if line.startswith("|")]
    doc = (ROOT / "docs" / "configuration.md").read_text()
    block = re.search(r"<!-- settings-table:.*?-->\n(.*?)<!-- /settings-table -->", doc, re.S)
    assert block, "docs/configuration.md lost its settings-table markers"
    documented = block[1].strip().splitlines()
    if sdk_version() == locked_version("singer-sdk"):
        assert documented == table
    else:  # CI's run against the SDK's next release (tasks.py): its built-in settings differ
        own = set(TapAccessGov.config_jsonschema["properties"]) - SDK_BUILT_IN_SETTINGS
        mine = [row for row in table if row.split("|")[1].strip() in own]
        assert [row for row in documented if row.split("|")[1].strip() in own] == mine
        assert len(mine) == len(own)


def sdk_version() -> str:
    return importlib.metadata.version("singer-sdk")


def locked_version(package: str) -> str:
    """The version of ``package`` in the lock file (requirements/dev.txt)."""
    lock = (ROOT / "requirements" / "dev.txt").read_text()
    match = re.search(rf"^{re.escape(package)}(?:\[[^\]]*\])?==(\S+)", lock, re.M)
    assert match, package
    return match[1]


# Added to the tap's schema by the SDK (stream maps, flattening, batch); Meltano knows them.
SDK_BUILT_IN_SETTINGS = {
    "stream_maps",
    "stream_map_config",
    "faker_config",
    "flattening_enabled",
    "flattening_max_depth",
    "flattening_max_key_length",
    "flattening_separator",
    "batch_config",
}


def meltano_kind(spec: dict[str, t.Any]) -> str:
    """The Meltano setting kind of a JSON-schema property."""
    if "enum" in spec:
        return "options"
    if spec.get("format") == "date-time":
        return "date_iso8601"
    return next(kind for kind in spec["type"] if kind != "null")


def test_the_plugin_definition_declares_every_setting() -> None:
    """Each of the tap's settings as its schema (settings.py) declares it: name, default,
    label, description, kind, secrecy and choices, in the definition Meltano projects add the
    tap from (scripts/plugin_definition.py); meltano.yml declares the same for this checkout
    (each default is written once, in settings.py)."""
    extractor = definition()
    declared = {setting["name"]: setting for setting in extractor["settings"]}
    schema = TapAccessGov.config_jsonschema  # the SDK adds its built-in settings to it
    own = set(schema["properties"]) - SDK_BUILT_IN_SETTINGS
    assert own <= set(declared) <= own | SDK_BUILT_IN_SETTINGS
    assert all(setting.get("description") for setting in declared.values())
    assert extractor["settings_group_validation"] == [schema["required"]]
    for name in own:
        spec, setting = schema["properties"][name], declared[name]
        assert setting.get("value") == spec.get("default"), name
        assert setting["label"] == spec["title"], name
        assert setting["description"] == spec["description"], name
        assert setting["kind"] == meltano_kind(spec), name
        assert setting.get("sensitive", False) == spec.get("secret", False), name
        assert [option["value"] for option in setting.get("options", [])] == spec.get("enum", [])
        assert all(option["label"] for option in setting.get("options", [])), name
    assert declared["client_secret"].get("sensitive") is True
    assert {"catalog", "discover", "state", "about", "stream-maps"} <= set(
        extractor["capabilities"]
    )
    # the release the definition describes, from the index (tests/test_release.py: the version)
    assert extractor["pip_url"] == f"tap-accessgov=={tasks.package_version()}"

    shipped = yaml.safe_load((ROOT / "meltano.yml").read_text())["plugins"]["extractors"][0]
    assert shipped["settings"] == extractor["settings"]
    assert shipped["settings_group_validation"] == extractor["settings_group_validation"]
    if sdk_version() == locked_version("singer-sdk"):
        assert sorted(shipped["capabilities"]) == sorted(extractor["capabilities"])
    else:  # CI's run against the SDK's next release: it may add capabilities (0.55: start-date)
        assert set(shipped["capabilities"]) <= set(extractor["capabilities"])
    for field in ("namespace", "label", "description", "executable", "keywords"):
        assert shipped[field] == extractor[field], field
    assert shipped["pip_url"] == "-e ."  # this checkout


def test_the_plugin_definition_file_is_generated_from_the_tap() -> None:
    """hub/tap-accessgov.yml is what scripts/plugin_definition.py writes now; under the SDK's
    next release (CI, tasks.py) only the tap's own settings are held to it, as the SDK's
    capabilities may grow."""
    written = yaml.safe_load((ROOT / "hub" / "tap-accessgov.yml").read_text())
    if sdk_version() == locked_version("singer-sdk"):
        assert (ROOT / "hub" / "tap-accessgov.yml").read_text() == rendered()
        assert plugin_definition_main(["--check"]) == 0
    else:
        assert written["settings"] == definition()["settings"]


def test_meltano_yml_ships_the_pinned_loaders() -> None:
    project = yaml.safe_load((ROOT / "meltano.yml").read_text())
    loaders = {loader["name"]: loader["pip_url"] for loader in project["plugins"]["loaders"]}
    assert loaders == {
        "target-jsonl": "target-jsonl==0.1.4",
        "target-postgres": "meltanolabs-target-postgres==0.8.1",
    }


def test_sample_config_works_against_the_emulator_as_shipped() -> None:
    sample = json.loads((ROOT / "sample_config.json").read_text())
    # what `python -m emulator` serves
    assert sample["api_url"] == f"http://127.0.0.1:{EMULATOR_DEFAULTS.port}"
    dataset = default_dataset(events=2000)
    assert "exclusion_entitlements" not in sample  # found through the catalog
    assert sample["client_id"] == CREDENTIAL.client_id
    with Emulator(dataset, credential=CREDENTIAL) as emulator:
        result = sync({**sample, "api_url": emulator.url})
    assert len(result.records["grant_feed"]) == 2000
    assert result.records["automation_exclusions"]
    assert result.records["users"]
