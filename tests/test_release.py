"""What a release ships (``python3 tasks.py release``, then ``build``; CHANGELOG.md): the
version pyproject.toml holds, named alike wherever a release is named, a wheel that holds the
tap and nothing else, and that wheel installed into an empty virtual environment, away from
this checkout, doing everything a user's first run does.

The artifacts are built once per worker from a copy of this checkout (its tracked and new
files, as they are now) committed to a repository of its own and released there as
``9.8.7`` by ``tasks.make_release``, a version no real release has, so that what the build
says can only have come from the release command."""

from __future__ import annotations

import datetime
import json
import os
import re
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
from tests.readme import (
    RAW_FILES,
    REPOSITORY,
    committed_copy,
    git,
    readme_commands,
    run_commands,
)

TAG_VERSION = "9.8.7"
pytestmark = pytest.mark.xdist_group("release")  # one worker builds, every test reuses it


@pytest.fixture(scope="session")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``committed_copy`` released as 9.8.7 by the release command (``tasks.make_release``)."""
    source = committed_copy(tmp_path_factory.mktemp("released"))
    with pytest.MonkeyPatch.context() as env:  # the release's commit and tag need an author
        for variable in ("GIT_AUTHOR", "GIT_COMMITTER"):
            env.setenv(f"{variable}_NAME", "release test")
            env.setenv(f"{variable}_EMAIL", "release@example.invalid")
        tasks.make_release(source, TAG_VERSION)
    return source


@pytest.fixture(scope="session")
def release(released: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel) of ``released``, built and checked as ``tasks.py build`` does.
    For the session, not the module: the groups run apart (tests/groups.py, ORDER) and this
    file has a test in each, so a module's fixture was built again for every group."""
    return tasks.build_release(released, tmp_path_factory.mktemp("dist"))


def test_the_build_is_the_released_version(release: tuple[Path, Path]) -> None:
    sdist, wheel = release
    assert sdist.name == f"tap_accessgov-{TAG_VERSION}.tar.gz"
    assert wheel.name == f"tap_accessgov-{TAG_VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(f"tap_accessgov-{TAG_VERSION}.dist-info/METADATA").decode()
    assert f"\nVersion: {TAG_VERSION}\n" in metadata


def version_mentions(root: Path) -> dict[str, set[str]]:
    """Every place of ``root`` that names a release, and the versions it names there."""
    definition = yaml.safe_load((root / "hub" / "tap-accessgov.yml").read_text())
    mentions = {
        "pyproject.toml": {tasks.package_version(root)},
        "CHANGELOG.md (latest release)": set(tasks.released_versions(root)[:1]),
        "hub/tap-accessgov.yml (pip_url)": {definition["pip_url"].removeprefix("tap-accessgov==")},
    }
    for name, pattern in tasks.VERSION_MENTIONS.items():
        mentions[name] = set(re.findall(pattern, (root / name).read_text(), re.M))
    return mentions


def test_every_place_names_the_latest_release() -> None:
    """pyproject.toml (the one place that holds the number), CHANGELOG.md's latest release,
    the plugin definition's pip_url and every link to a release agree, and the installed tap
    says that version."""
    mentions = version_mentions(ROOT)
    latest = tasks.released_versions()[0]
    assert mentions == {place: {latest} for place in mentions}
    from tap_accessgov import USER_AGENT

    assert f"tap-accessgov/{latest}" == USER_AGENT


def test_the_release_command_names_the_new_version_everywhere(released: Path) -> None:
    """``tasks.make_release`` in a copy: every mention moved to 9.8.7 in one commit tagged
    v9.8.7, the Unreleased entries under the new version's section (with its link), and an
    empty Unreleased section above it."""
    mentions = version_mentions(released)
    assert mentions == {place: {TAG_VERSION} for place in mentions}
    assert git(released, "tag", "--points-at", "HEAD").split() == [f"v{TAG_VERSION}"]
    assert git(released, "status", "--porcelain") == ""
    before = (ROOT / "CHANGELOG.md").read_text()
    after = (released / "CHANGELOG.md").read_text()
    entries = re.search(r"^## \[Unreleased\]\n(.*?)^## \[", before, re.M | re.S)
    assert entries
    section = re.search(
        rf"^## \[{TAG_VERSION}\] - \d{{4}}-\d{{2}}-\d{{2}}\n(.*?)^## \[", after, re.M | re.S
    )
    assert section
    assert section[1] == entries[1]
    assert re.search(r"^## \[Unreleased\]\n\n## \[", after, re.M)
    assert f"[{TAG_VERSION}]: https://" in after
    with pytest.raises(ValueError, match="nothing to release"):  # and not twice
        tasks.write_release(released, "9.8.8", datetime.date(2030, 1, 1))


def test_a_clone_without_tags_builds_the_latest_release(tmp_path: Path) -> None:
    """A clone with no tags (a fork, a mirror, a CI checkout) builds CHANGELOG.md's latest
    release, not a development version of its own (setuptools-scm's 0.1.devN, before)."""
    source = committed_copy(tmp_path / "clone")
    assert git(source, "tag") == ""
    subprocess.run(
        [tasks.BIN / "python", "-c", PREPARE_METADATA, str(tmp_path / "metadata")],
        cwd=source,
        check=True,
        capture_output=True,
    )
    (info,) = (tmp_path / "metadata").glob("*.dist-info")
    metadata = (info / "METADATA").read_text()
    assert re.search(r"^Version: (.+)$", metadata, re.M)[1] == tasks.released_versions()[0]


# The build backend's own hook for a wheel's metadata (PEP 517), as a frontend calls it
PREPARE_METADATA = (
    "import sys, pathlib; from setuptools import build_meta; "
    "out = pathlib.Path(sys.argv[1]); out.mkdir(); build_meta.prepare_metadata_for_build_wheel(str(out))"
)


def test_a_build_refuses_a_tag_of_another_version(released: Path, tmp_path: Path) -> None:
    """A tag pushed by hand, naming a version the checkout is not: the build says so."""
    git(released, "tag", "-a", "v9.9.9", "-m", "wrong")
    try:
        with pytest.raises(SystemExit, match=r"tagged v9\.8\.7, v9\.9\.9 but is version 9\.8\.7"):
            tasks.build_release(released, tmp_path / "dist")
    finally:
        git(released, "tag", "-d", "v9.9.9")


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
def test_the_tap_installed_alone_runs_every_stream(released: Path, tmp_path: Path) -> None:
    """The README's plain-pipes lines, as the release's README has them: ``pip install`` of the
    release's git tag (the released copy's address in place of GitHub's), its dependencies
    resolved from the package index as a user's are, into an empty virtual environment, run
    from a directory outside this checkout; then ``--about``, ``--discover`` and ``--test``
    with a config.json of the emulator, its version the release's, and a sync of every
    stream that gives what the checkout's tap gives."""
    require_group("cli")
    environment = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(environment)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "PATH": f"{environment / 'bin'}:{os.environ['PATH']}",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    emulator = shared_emulator()
    (tmp_path / "config.json").write_text(json.dumps(tap_config(emulator)))
    runner = "tests/test_release.py::test_the_tap_installed_alone_runs_every_stream"
    commands = readme_commands(
        # file://localhost/: pip's parser takes no git+file URL without a host
        runner,
        {f"git+{REPOSITORY}@": f"git+file://localhost{released}@"},
        released / "README.md",
    )
    assert commands[0].startswith("pip install ")
    assert f"@v{TAG_VERSION}'" in commands[0]
    run_commands(commands, tmp_path, env)

    tap = str(environment / "bin" / "tap-accessgov")

    def run(*args: str) -> str:
        result = subprocess.run(
            args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    where = run(
        str(environment / "bin" / "python"),
        "-c",
        "import tap_accessgov; print(tap_accessgov.__file__)",
    )
    assert Path(where.strip()).is_relative_to(environment), "imported from outside the install"
    assert run(tap, "--version").startswith(f"tap-accessgov v{TAG_VERSION},")
    about = json.loads(run(tap, "--about", "--format", "json"))
    assert about["version"] == TAG_VERSION
    from tap_accessgov.tap import TapAccessGov

    # the tap's own settings, beside those the SDK adds (stream maps, flattening, batches)
    assert set(about["settings"]["properties"]) >= set(TapAccessGov.config_jsonschema["properties"])
    catalog = json.loads((tmp_path / "catalog.json").read_text())
    assert {entry["tap_stream_id"] for entry in catalog["streams"]} >= set(STREAMS)

    installed = parse_singer(run(tap, "--config", str(tmp_path / "config.json")))
    checkout = sync(tap_config(emulator))
    assert set(installed.records) >= set(STREAMS)
    assert installed.counts() == checkout.counts()
    assert Counter(m["type"] for m in installed.messages)["STATE"] > 0


@pytest.mark.e2e
def test_a_new_meltano_project_adds_the_tap_from_its_definition(
    release: tuple[Path, Path], tmp_path: Path
) -> None:
    """The README's lines for a team that runs Meltano, in a new project (``meltano init``):
    the extractor added from the release's plugin definition (its address here a local copy,
    its pip_url the built wheel: the release is on no index here), the loader from this
    project's pinned definition (the Hub is not reachable from here), ``meltano install``,
    ``meltano config test`` and a run into target-jsonl. The extractor is the one plugin the
    first line adds; no setting is written to meltano.yml: the tenant comes from the
    environment, as in production."""
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
        "PATH": f"{tasks.BIN}:{os.environ['PATH']}",
    }
    project = tmp_path / "analytics"
    run_meltano("init", "--no-usage-stats", str(project), env=env, cwd=tmp_path)
    version = tasks.package_version()
    runner = "tests/test_release.py::test_a_new_meltano_project_adds_the_tap_from_its_definition"
    commands = readme_commands(
        runner,
        {
            f"{RAW_FILES}/v{version}/hub/tap-accessgov.yml": str(extractor_ref),
            "--plugin-type loader target-jsonl": f"--plugin-type loader target-jsonl --from-ref {loader_ref}",
        },
    )
    (tmp_path / "output").mkdir()
    outputs = run_commands(commands[:1], project, env)
    plugins = yaml.safe_load((project / "meltano.yml").read_text())["plugins"]
    # one plugin: `meltano add extractor tap-accessgov --from-ref` added a utility beside it
    assert {kind: [p["name"] for p in listed] for kind, listed in plugins.items()} == {
        "extractors": ["tap-accessgov"]
    }
    added = plugins["extractors"][0]
    assert added["pip_url"] == str(wheel)
    assert added["settings"] == definition["settings"]
    assert "config" not in added  # the secret stays in the environment
    outputs += run_commands(commands[1:], project, env)
    assert any("Plugin configuration is valid" in output for output in outputs)

    loaded = {
        path.stem: len(path.read_text().splitlines())
        for path in (tmp_path / "output").glob("*.jsonl")
    }
    assert loaded == dict(sync(tap_config(emulator)).counts())


def test_the_changelog_keeps_a_changelog(released: Path) -> None:
    """CHANGELOG.md in the Keep a Changelog form: Unreleased first, then each version newest
    first with its date, its entries under the form's headings, a link for each; every
    version tag has its section, here and in the released copy (this checkout may have no
    tags; the copy has the release's)."""
    for root in (ROOT, released):
        check_changelog(root)


def check_changelog(root: Path) -> None:
    text = (root / "CHANGELOG.md").read_text()
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
    tags = git(root, "tag", "--list", "v*").split()
    assert {tag.removeprefix("v") for tag in tags} <= {v for v, _ in sections}
