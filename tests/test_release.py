"""What a release ships (``python3 tasks.py build``, CHANGELOG.md): the version of the git
tag, a wheel that holds the tap and nothing else, and that wheel installed into an empty
virtual environment, away from this checkout, doing everything a user's first run does.

The artifacts are built once per worker from a copy of this checkout (its tracked and new
files, as they are now) committed to a repository of its own and tagged ``v9.8.7``, a
version no real tag has, so that the version can only have come from that tag."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import venv
import zipfile
from collections import Counter
from pathlib import Path

import pytest
import yaml

import tasks
from tests.conftest import (
    ROOT,
    STREAMS,
    parse_singer,
    shared_emulator,
    sync,
    tap_config,
    tap_env,
)
from tests.conftest import meltano as run_meltano
from tests.groups import require_group

TAG_VERSION = "9.8.7"
pytestmark = pytest.mark.xdist_group("release")  # one worker builds, every test reuses it


def checkout_copy(directory: Path) -> Path:
    """This checkout's tracked and new (not ignored) files in ``directory``, as they are now."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # a tracked file deleted in the work tree is left out
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, directory / name)
    return directory


def git(directory: Path, *args: str) -> None:
    identity = ("-c", "user.name=release test", "-c", "user.email=release@example.invalid")
    subprocess.run(["git", *identity, *args], cwd=directory, check=True, capture_output=True)


def tagged_checkout(directory: Path) -> Path:
    """A copy of this checkout, as it is now, committed to a repository of its own in
    ``directory`` and tagged v9.8.7: a release as its repository holds it."""
    source = checkout_copy(directory)
    git(source, "init", "-q")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "the release")
    git(source, "tag", f"v{TAG_VERSION}")
    return source


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel) of ``tagged_checkout``, built and checked as ``tasks.py build`` does.
    For the session, not the module: the groups run apart (tests/groups.py, ORDER) and this
    file has a test in each, so a module's fixture was built again for every group."""
    source = tagged_checkout(tmp_path_factory.mktemp("tagged"))
    return tasks.build_release(source, tmp_path_factory.mktemp("dist"))


def test_the_version_is_the_git_tag(release: tuple[Path, Path]) -> None:
    sdist, wheel = release
    assert sdist.name == f"tap_accessgov-{TAG_VERSION}.tar.gz"
    assert wheel.name == f"tap_accessgov-{TAG_VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"tap_accessgov-{TAG_VERSION}.dist-info/METADATA").decode()
    assert f"\nVersion: {TAG_VERSION}\n" in metadata


def test_the_wheel_holds_the_tap_and_nothing_else(release: tuple[Path, Path]) -> None:
    _, wheel = release
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    info = f"tap_accessgov-{TAG_VERSION}.dist-info/"
    stray = sorted(n for n in names if not n.startswith(("tap_accessgov/", info)))
    assert stray == [], "the wheel holds files outside the package"
    # everything the tap reads at run time: every module of the package, and its type marker
    shipped = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tap_accessgov").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert shipped - names == set(), "files of the package missing from the wheel"
    assert "tap_accessgov/py.typed" in names
    assert {f"{info}entry_points.txt", f"{info}METADATA", f"{info}RECORD"} <= names


@pytest.mark.cli
def test_the_wheel_installed_alone_runs_every_stream(
    release: tuple[Path, Path], tmp_path: Path
) -> None:
    """The wheel, with the dependencies it declares resolved from the package index (not the
    lock), in an empty virtual environment, run from a directory outside this checkout:
    ``--version``, ``--about``, ``--discover``, then a sync of every stream against the
    emulator that gives what the checkout's tap gives."""
    require_group("cli")
    _, wheel = release
    environment = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(environment)
    python = environment / "bin" / "python"
    subprocess.run(
        [str(tasks.BIN / "uv"), "pip", "install", "--quiet", "--python", str(python), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    tap = str(environment / "bin" / "tap-accessgov")

    def run(*args: str) -> str:
        result = subprocess.run(
            args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    where = run(str(python), "-c", "import tap_accessgov; print(tap_accessgov.__file__)")
    assert Path(where.strip()).is_relative_to(environment), "imported from outside the wheel"
    assert run(tap, "--version").startswith(f"tap-accessgov v{TAG_VERSION},")
    about = json.loads(run(tap, "--about", "--format", "json"))
    assert about["version"] == TAG_VERSION
    from tap_accessgov.tap import TapAccessGov

    # the tap's own settings, beside those the SDK adds (stream maps, flattening, batches)
    assert set(about["settings"]["properties"]) >= set(TapAccessGov.config_jsonschema["properties"])

    emulator = shared_emulator()
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tap_config(emulator)))
    catalog = json.loads(run(tap, "--config", str(config), "--discover"))
    assert {entry["tap_stream_id"] for entry in catalog["streams"]} >= set(STREAMS)

    installed = parse_singer(run(tap, "--config", str(config)))
    checkout = sync(tap_config(emulator))
    assert set(installed.records) >= set(STREAMS)
    assert installed.counts() == checkout.counts()
    assert Counter(m["type"] for m in installed.messages)["STATE"] > 0


@pytest.mark.e2e
def test_a_new_meltano_project_adds_the_tap_from_its_definition(
    release: tuple[Path, Path], tmp_path: Path
) -> None:
    """What the README tells a team that runs Meltano: ``meltano init``, then ``meltano add
    extractor tap-accessgov --from-ref hub/tap-accessgov.yml`` (its pip_url pointed at the
    built wheel, as a team pins a release), ``meltano install``, ``meltano config
    test tap-accessgov`` and a run into target-jsonl (added from this project's pinned
    definition: the Hub is not reachable from here). No setting is written to meltano.yml: the
    tenant comes from the environment, as in production."""
    require_group("e2e")
    _, wheel = release
    definition = yaml.safe_load((ROOT / "hub" / "tap-accessgov.yml").read_text())
    extractor_ref = tmp_path / "tap-accessgov.yml"
    extractor_ref.write_text(yaml.safe_dump({**definition, "pip_url": str(wheel)}))
    shipped = yaml.safe_load((ROOT / "meltano.yml").read_text())
    (loader,) = (p for p in shipped["plugins"]["loaders"] if p["name"] == "target-jsonl")
    loader_ref = tmp_path / "target-jsonl.yml"
    loader_ref.write_text(yaml.safe_dump(loader))

    emulator = shared_emulator()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MELTANO_", "TAP_", "DBT_"))},
        **tap_env(emulator),
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "TARGET_JSONL_DESTINATION_PATH": str(tmp_path / "output"),
    }
    project = tmp_path / "analytics"

    def meltano(*args: str, cwd: Path = project) -> str:
        return run_meltano(*args, env=env, timeout=600, cwd=cwd)

    meltano("init", "--no-usage-stats", str(project), cwd=tmp_path)
    meltano("add", "extractor", "tap-accessgov", "--from-ref", str(extractor_ref))
    meltano("add", "loader", "target-jsonl", "--from-ref", str(loader_ref))
    added = yaml.safe_load((project / "meltano.yml").read_text())["plugins"]["extractors"][0]
    assert added["pip_url"] == str(wheel)
    assert added["settings"] == definition["settings"]
    assert "config" not in added  # the secret stays in the environment
    meltano("install")
    assert "Plugin configuration is valid" in meltano("config", "test", "tap-accessgov")
    (tmp_path / "output").mkdir()
    meltano("run", "tap-accessgov", "target-jsonl")

    loaded = {
        path.stem: len(path.read_text().splitlines())
        for path in (tmp_path / "output").glob("*.jsonl")
    }
    assert loaded == dict(sync(tap_config(emulator)).counts())


def test_the_changelog_keeps_a_changelog() -> None:
    """CHANGELOG.md in the Keep a Changelog form: Unreleased first, then each version newest
    first with its date, its entries under the form's headings, a link for each; every
    version tag of this repository has its section."""
    text = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert sections[0] == ("Unreleased", "")
    versions = [tuple(map(int, v.split("."))) for v, _ in sections[1:]]
    assert versions
    assert versions == sorted(versions, reverse=True)
    assert all(date for _, date in sections[1:])
    headings = set(re.findall(r"^### (.+)$", text, re.M))
    assert headings <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
    for name, _ in sections:
        assert re.search(rf"^\[{re.escape(name)}\]: https://", text, re.M), name
    tags = subprocess.run(
        ["git", "tag", "--list", "v*"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert {tag.removeprefix("v") for tag in tags} <= {v for v, _ in sections}
