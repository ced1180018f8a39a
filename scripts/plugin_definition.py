"""The extractor's Meltano plugin definition, in Meltano Hub's form, generated from the tap
itself so that it cannot drift from it: every setting of tap_accessgov/settings.py with its
kind, label, description, default, sensitivity and choices, the SDK's built-in settings this
tap supports, and the capabilities ``--about`` lists.

It is what a Meltano project outside this checkout adds the tap from (README.md)::

    meltano add --plugin-type extractor tap-accessgov --from-ref hub/tap-accessgov.yml

    python scripts/plugin_definition.py           # (re)write hub/tap-accessgov.yml
    python scripts/plugin_definition.py --check   # fail when the file differs from the tap

meltano.yml declares the same extractor for this checkout (``pip_url: -e .``);
tests/test_docs.py holds its settings equal to these.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
import typing as t
from pathlib import Path

import yaml

from tap_accessgov.settings import CONFIG_SCHEMA, OPTION_LABELS, SETTING_NAMES
from tap_accessgov.tap import TapAccessGov

ROOT = Path(__file__).resolve().parent.parent
DEFINITION = ROOT / "hub" / "tap-accessgov.yml"
# The release the definition describes, as pyproject.toml holds it (`python3 tasks.py release`
# writes both): the settings below are that release's, so its pip_url installs that release
# from the index. A project may point pip_url at a wheel or a git URL instead.
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
PIP_URL = f"tap-accessgov=={VERSION}"
REPOSITORY = "https://github.com/accessgov/tap-accessgov"

# The SDK's settings this tap supports, as Meltano shows them (the SDK's schema gives none of
# these words), in this order. batch_config says which loaders it is for.
BUILT_IN_SETTINGS: tuple[dict[str, str], ...] = (
    {
        "name": "batch_config",
        "kind": "object",
        "label": "BATCH messages",
        "description": (
            "SDK BATCH files instead of RECORD messages, for a loader that reads them "
            "(target-postgres; target-jsonl drops them). A stream that a stream map, "
            "flattening or a deselected property changes keeps RECORD messages "
            "(docs/decisions.md, Loaders)."
        ),
    },
    {
        "name": "stream_maps",
        "kind": "object",
        "label": "Stream maps",
        "description": "Stream maps (filter, rename, hash or drop fields), as in every SDK tap.",
    },
    {
        "name": "stream_map_config",
        "kind": "object",
        "label": "Stream map config",
        "description": "User-defined values for stream map expressions.",
    },
    {
        "name": "flattening_enabled",
        "kind": "boolean",
        "label": "Flattening enabled",
        "description": "Flatten nested objects into columns (e.g. feed__date).",
    },
    {
        "name": "flattening_max_depth",
        "kind": "integer",
        "label": "Flattening max depth",
        "description": "How many levels of nested objects to flatten.",
    },
)


def setting_kind(spec: dict[str, t.Any]) -> str:
    """Meltano's kind of a JSON-schema property."""
    if "enum" in spec:
        return "options"
    if spec.get("format") == "date-time":
        return "date_iso8601"
    return str(next(kind for kind in spec["type"] if kind != "null"))


def setting(name: str, spec: dict[str, t.Any]) -> dict[str, t.Any]:
    """One of the tap's own settings, as Meltano declares it."""
    declared: dict[str, t.Any] = {"name": name, "kind": setting_kind(spec)}
    if "default" in spec:
        declared["value"] = spec["default"]
    declared["label"] = spec["title"]
    if spec.get("secret"):
        declared["sensitive"] = True
    declared["description"] = spec["description"]
    if "enum" in spec:
        labels = OPTION_LABELS[name]  # a KeyError here: settings.py must label each choice
        declared["options"] = [{"label": labels[value], "value": value} for value in spec["enum"]]
    return declared


def definition(pip_url: str = PIP_URL) -> dict[str, t.Any]:
    """The plugin definition, as ``meltano add --from-ref`` reads it."""
    return {
        "name": TapAccessGov.name,
        "namespace": "tap_accessgov",
        "variant": "accessgov",
        "label": "AccessGov",
        "description": (
            "Grant feed, apps and app entitlements, automation exclusions and users of an "
            "access-governance service (ConductorOne-style API)"
        ),
        "repo": REPOSITORY,
        "docs": f"{REPOSITORY}#readme",
        "keywords": ["meltano_sdk"],
        "maintenance_status": "active",
        "supported_python_versions": ["3.11", "3.12", "3.13", "3.14"],
        "pip_url": pip_url,
        "executable": TapAccessGov.name,
        "capabilities": [str(capability) for capability in TapAccessGov.capabilities],
        # Both ways of getting a token (auth_method) need the client id and its secret: the
        # choice is whether the secret is sent or only signs an assertion.
        "settings_group_validation": [list(CONFIG_SCHEMA["required"])],
        "settings": [
            *(setting(name, CONFIG_SCHEMA["properties"][name]) for name in SETTING_NAMES),
            *(dict(built_in) for built_in in BUILT_IN_SETTINGS),
        ],
    }


def rendered(pip_url: str = PIP_URL) -> str:
    header = (
        "# Generated by scripts/plugin_definition.py from the tap's settings: do not edit.\n"
        "# meltano add --plugin-type extractor tap-accessgov --from-ref <this file> (README.md)\n"
    )
    body = yaml.safe_dump(definition(pip_url), sort_keys=False, width=100, allow_unicode=True)
    return header + str(body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail when the file differs from the tap"
    )
    args = parser.parse_args(argv)
    text = rendered()
    if args.check:
        if not DEFINITION.exists() or DEFINITION.read_text() != text:
            print(
                f"{DEFINITION.relative_to(ROOT)} differs from the tap's settings: "
                "run python scripts/plugin_definition.py",
                file=sys.stderr,
            )
            return 1
        return 0
    DEFINITION.parent.mkdir(exist_ok=True)
    DEFINITION.write_text(text)
    print(DEFINITION.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
