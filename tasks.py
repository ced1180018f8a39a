#!/usr/bin/env python3
"""The project's two commands, runnable on a machine that has only Python 3.11+.

    python3 tasks.py demo   # start the emulator, extract all streams from it, show a summary
    python3 tasks.py test   # lint, type-check and run the whole test suite (in CI, CI=true:
                            # then the offline and cli groups against the next singer-sdk)
    python3 tasks.py benchmark  # the side-by-side performance figures of docs/performance.md
    python3 tasks.py mutants [MODULE...] [--functions NAME,...]  # do the tests notice a change?

Each creates ``.venv`` and installs the project into it first (only when pyproject.toml or
the lock file changed since the last install), so nothing else needs to be set up by hand.
What is installed is ``requirements/dev.txt``: every package at the exact version CI tested,
checked against its recorded hashes, so a fresh clone next year installs what CI ran.

    python3 tasks.py lock   # re-resolve requirements/dev.txt after changing pyproject.toml
    python3 tasks.py release X.Y.Z  # the version everywhere it is named, committed and tagged
    python3 tasks.py build  # the sdist and the wheel in dist/, checked (CHANGELOG.md: versions)
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".installed"
LOCK = ROOT / "requirements" / "dev.txt"
# How .venv is installed (part of its stamp: a change reinstalls): the lock, then compiled.
INSTALL = "uv pip install --require-hashes; compileall"


def run(*args: str | Path, env: dict[str, str] | None = None) -> None:
    shown = " ".join(f"{k}={v}" for k, v in (env or {}).items())
    print("+", shown, *(str(a) for a in args), flush=True)
    subprocess.run([str(a) for a in args], cwd=ROOT, check=True, env=env and {**os.environ, **env})


def bootstrap() -> None:
    """Create .venv and install the locked dev requirements, then the project itself, when
    pyproject.toml, the lock file or the way of installing (``INSTALL``) changed.

    The lock lists every package with its hashes, so nothing is resolved and the install is
    the same on every machine and every day. uv (itself locked: Meltano installs plugins
    with it) installs them: pip took about as long from the lock as from version ranges.
    Then the installed modules are compiled, as pip does by default and uv does not: where
    PYTHONDONTWRITEBYTECODE is set (many container images) every command would otherwise
    compile Meltano, singer-sdk & co. from source again (measured: ~1.5 s of CPU per
    ``meltano run``, ~0.8 s per tap run; docs/performance.md). meltano.yml does the same for
    the plugins (UV_COMPILE_BYTECODE).
    """
    digest = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + LOCK.read_bytes() + INSTALL.encode()
    ).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    if not (BIN / "python").exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    uv_lock = VENV / "uv-requirement.txt"
    uv_lock.write_text(locked("uv"))
    run(BIN / "python", "-m", "pip", "install", "--quiet", "--require-hashes", "-r", uv_lock)
    install = (BIN / "uv", "pip", "install", "--quiet", "--python", BIN / "python", "--no-deps")
    run(*install, "--require-hashes", "-r", LOCK)
    run(*install, "-e", ".")
    compile_installed(BIN / "python")
    STAMP.write_text(digest)


def compile_installed(python: Path) -> None:
    """Compile what is installed in ``python``'s virtualenv, as pip does by default and uv
    does not (``bootstrap``): .venv's, and the next singer-sdk's (``test_sdk_next``)."""
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site_packages = subprocess.check_output([python, "-c", purelib], text=True).strip()
    run(python, "-m", "compileall", "-q", "-j", "0", site_packages)


def compile_checkout() -> None:
    """Compile the checkout's own modules (the tap, the emulator, the harness, the benchmarks,
    the scripts), as an installed wheel's are: the tap is installed editable here, into .venv
    and Meltano's plugin, so where PYTHONDONTWRITEBYTECODE is set every start of the tap
    compiled its package from source again (measured: ``tap-accessgov --about`` 1.19 s against 1.00 s of
    CPU; the tests start it hundreds of times, through Meltano and as a command). Only what
    changed since is compiled again: a fraction of a second."""
    own = ("tap_accessgov", "emulator", "harness", "benchmarks", "scripts")
    run(BIN / "python", "-m", "compileall", "-q", *own)


def locked(package: str) -> str:
    """One package's entry of the lock file: its ``name==version`` line and its hashes."""
    entry: list[str] = []
    for line in LOCK.read_text().splitlines():
        if line.startswith(f"{package}=="):
            entry = [line]
        elif entry and line.lstrip().startswith("--hash"):
            entry.append(line)
        elif entry:
            break
    if not entry:
        sys.exit(f"{LOCK.relative_to(ROOT)} has no entry for {package}: run python3 tasks.py lock")
    return "\n".join(entry) + "\n"


def lock(extra: list[str]) -> None:
    """Re-resolve requirements/dev.txt from pyproject.toml (for every platform and Python the
    project supports), with uv, which the dev requirements already install (Meltano uses it)."""
    run(
        BIN / "uv",
        "pip",
        "compile",
        "pyproject.toml",
        "--extra",
        "dev",
        "--universal",
        "--generate-hashes",
        "--python-version",
        "3.11",
        "--no-header",
        "--quiet",
        "-o",
        LOCK,
        *extra,
    )


def test(extra: list[str]) -> None:
    """Lint, type-check, the whole suite; in CI also the suite against the SDK's next release.
    Ends with how long each step took (pytest itself prints its groups and slowest tests).

    The suite runs on a worker more than there are cores (pytest-xdist; pyproject's addopts
    give a plain ``pytest`` one per core; ``-n 0`` among the arguments runs it in one process):
    its tests wait part of their time (processes starting, retries, heartbeats), and a third
    worker on 2 cores fills it. Measured on fresh clones the same day: pytest 676 s against
    708 s with a worker per core (the whole command 903 s against 952 s); two later runs with
    3 workers, 683 and 766 s: the gain is within the machine's noise, and costs nothing.

    Its end-to-end tests use the PostgreSQL that answers at ACCESSGOV_TEST_POSTGRES_URL (or
    the PG* variables, default 127.0.0.1:5432), else a throwaway server of their own; where
    one answers, the tests marked ON_EVERY_SERVER also run on a throwaway server, as on a
    fresh machine, and those marked ON_OWN_SERVER only there (tests/conftest.py, WAREHOUSES).
    """
    steps: dict[str, float] = {}
    try:
        install = PluginInstall(steps)
        try:
            rewriting = rewrite_tests_once()
            step(steps, "ruff check", BIN / "ruff", "check", ".")
            step(steps, "ruff format", BIN / "ruff", "format", "--check", ".")
            step(steps, "mypy", BIN / "mypy")  # pyproject's files: all but the tests
            rewriting.wait()  # a module that fails to import fails the suite's collection
            install.extractor_installed()
            workers = str((os.cpu_count() or 1) + 1)  # the arguments given may say otherwise
            pytest: tuple[str | Path, ...] = (BIN / "python", "-m", "pytest", "-n", workers, *extra)
            step(steps, "pytest", *pytest, env={INSTALL_DONE: str(install.done)})
        finally:
            install.wait()
        if os.environ.get("CI") == "true" and not extra:
            test_sdk_next(steps)
    finally:
        print("\nthe test command's steps:", flush=True)
        for name, seconds in steps.items():
            print(f"  {name:<28} {seconds:6.0f} s", flush=True)


def rewrite_tests_once() -> subprocess.Popen[bytes]:
    """pytest's rewritten test modules (its assertion rewriting) kept in their __pycache__, by
    one collection, started here (to be waited for): where PYTHONDONTWRITEBYTECODE is set
    (many container images, CI's machines) pytest keeps none, and every worker of both suite
    runs rewrote every test module again (measured: a collection took 4.6 s of CPU without
    them, 2.1 s with them). It runs beside the linters and ``meltano install``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.Popen(
        [BIN / "python", "-m", "pytest", "--collect-only", "-q", "-n", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# Where the suite's end-to-end tests learn that the install they wait for has ended: a file
# that holds its exit status once it has (tests/conftest.py, the meltano_plugins fixture).
INSTALL_DONE = "ACCESSGOV_PLUGINS_INSTALL_DONE"
# meltano.yml's kinds of plugin, in the order they are installed: the extractor (this
# checkout, editable) first, since its install writes the checkout's package metadata, which
# the suite's own processes read (pyproject's pythonpath puts the checkout first).
PLUGIN_KINDS = ("extractor", "loader", "utility", "orchestrator")


class PluginInstall:
    """``meltano install`` of meltano.yml's plugins in the background, kind by kind
    (``PLUGIN_KINDS``), its output in a log shown when it fails: on a fresh clone it is most
    of a minute, which the linters and then the suite's first tests (the cli group, which
    needs no plugin) use. ``extractor_installed`` waits for the tap's own plugin; ``done``
    is the file that holds the exit status once every kind is installed (or one failed),
    which the end-to-end tests wait for instead of installing themselves."""

    def __init__(self, steps: dict[str, float]) -> None:
        self.log = VENV / "meltano-install.log"
        self.done = VENV / "meltano-install.status"
        self.done.unlink(missing_ok=True)
        self._steps = steps
        self._extractor = threading.Event()
        self._thread = threading.Thread(target=self._install, name="meltano install")
        self._thread.start()

    def _install(self) -> None:
        started = time.monotonic()
        status = 0
        with self.log.open("wb") as out:
            for kind in PLUGIN_KINDS:
                status = subprocess.run(
                    [BIN / "meltano", "install", "--plugin-type", kind],
                    cwd=ROOT,
                    env={**os.environ, "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false"},
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    check=False,
                ).returncode
                self._extractor.set()
                if status != 0:
                    break
        self._steps["meltano install (meanwhile)"] = time.monotonic() - started
        self.done.write_text(str(status))

    def extractor_installed(self) -> None:
        self._extractor.wait()

    def wait(self) -> None:
        """Until the install has ended; a failed one fails the command with its log's tail."""
        self._thread.join()
        status = int(self.done.read_text())
        if status != 0:
            print(self.log.read_text(errors="replace")[-3000:], file=sys.stderr)
            raise subprocess.CalledProcessError(status, "meltano install")


def step(
    steps: dict[str, float], name: str, *args: str | Path, env: dict[str, str] | None = None
) -> None:
    """``run`` one step of the test command and note how long it took, failed or not."""
    started = time.monotonic()
    try:
        run(*args, env=env)
    finally:
        steps[name] = time.monotonic() - started


# ----- CI only: the suite against the SDK's next release ---------------------------------------

SDK_NEXT_VENV = ROOT / ".venv-sdk-next"
SDK_NEXT_BIN = SDK_NEXT_VENV / ("Scripts" if os.name == "nt" else "bin")


def test_sdk_next(steps: dict[str, float]) -> None:
    """CI's second run (``CI=true``, the whole suite asked for): the tests that run the tap
    itself (the offline and cli groups: the e2e group runs the tap through Meltano, which
    installs it in a virtualenv of its own) against the newest pre-release of singer-sdk on the
    package index, so that the next release finds the tap ready.

    Its own virtualenv, ``.venv-sdk-next``: the lock file's packages, then the newest
    singer-sdk, pre-releases included, with whatever its dependencies need (resolved, not
    locked: the point is to meet what the next release brings). Made anew on each run, and
    compiled as .venv is (``compile_installed``): where PYTHONDONTWRITEBYTECODE is set, every
    start of the tap in the cli group compiled singer-sdk & co. from source again (measured,
    2 pairs alternating: the run took 283 and 283 s compiled, plus 11-13 s to compile,
    against 289 and 337 s from source).
    """
    started = time.monotonic()
    if SDK_NEXT_VENV.exists():
        shutil.rmtree(SDK_NEXT_VENV)
    venv.EnvBuilder(with_pip=True).create(SDK_NEXT_VENV)
    python = SDK_NEXT_BIN / "python"
    install = (BIN / "uv", "pip", "install", "--quiet", "--python", python)
    run(*install, "--no-deps", "--require-hashes", "-r", LOCK)
    run(*install, "--prerelease=allow", "--upgrade-package", "singer-sdk", "singer-sdk[msgspec]")
    run(*install, "--no-deps", "-e", ".")
    compile_installed(python)
    run(
        python, "-c", "import importlib.metadata as m; print('singer-sdk', m.version('singer-sdk'))"
    )
    steps["install the next singer-sdk"] = time.monotonic() - started
    # Twice as many workers as cores: these tests wait much of their time (retry waits,
    # timeouts, rate limits kept real), and a waiting worker holds a core idle. Measured on
    # 2 cores: 142 s with 4 workers, 181 s with 2 (the e2e group, CPU-bound, gains nothing).
    workers = str(2 * (os.cpu_count() or 1))
    # its timings (tests/groups.py) beside the main run's, not over them
    timings = os.environ.get("ACCESSGOV_TEST_TIMINGS")
    step(
        steps,
        "pytest, next singer-sdk",
        *(python, "-m", "pytest", "-n", workers, "-m", "not e2e", *WITH_THE_SDK),
        env={"ACCESSGOV_TEST_TIMINGS": f"{timings}.sdk-next.json"} if timings else None,
    )


# What the next singer-sdk's run reads: the tests of the tap. Left out, what never imports the
# SDK and so cannot answer differently there (tests/test_layout.py checks it): the emulator's
# own tests, the vendor's SDK against the emulator, dbt-spark's choice of a Java, the dbt
# utilities' build-and-prune, the repository's layout, and the harness the demo and the
# benchmarks share (harness/).
WITH_THE_SDK = (
    "tests",
    "--ignore=tests/test_vendor_sdk.py",
    "--ignore=tests/test_dbt_spark.py",
    "--ignore=tests/test_dbt_build_and_prune.py",
    "--ignore=tests/test_layout.py",
    "--ignore=tests/test_support.py",
)


# ----- the release: the version, then sdist and wheel --------------------------------------------

# Where a release is named besides pyproject.toml (the one place that holds the number): each
# file and the pattern of its mentions, whose group 1 is the version. `release` rewrites them,
# tests/test_release.py holds them equal. CHANGELOG.md's sections and hub/tap-accessgov.yml
# (generated: scripts/plugin_definition.py) are written by `release` on their own terms.
VERSION_MENTIONS = {
    "dbt_accessgov/dbt_project.yml": r'^version: "(\d+\.\d+\.\d+)"$',
    # a release's files on GitHub (the plugin definition) and its tag (the dbt package)
    "README.md": r"(?:/v|@v|revision: v|version )(\d+\.\d+\.\d+)\b",
    "dbt_accessgov/README.md": r"(?:/v|@v|revision: v)(\d+\.\d+\.\d+)\b",
}
CHANGELOG_SECTION = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)


def package_version(root: Path = ROOT) -> str:
    """The version pyproject.toml holds: what every build of the checkout is, tags or not."""
    return str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"])


def released_versions(root: Path = ROOT) -> list[str]:
    """CHANGELOG.md's released versions, newest first (its ``## [X.Y.Z] - date`` sections)."""
    return [
        version for version, _ in CHANGELOG_SECTION.findall((root / "CHANGELOG.md").read_text())
    ]


def release(extra: list[str]) -> None:
    """``python3 tasks.py release X.Y.Z``: the release of the work tree as it is committed."""
    if len(extra) != 1:
        sys.exit("usage: python3 tasks.py release X.Y.Z")
    try:
        make_release(ROOT, extra[0])
    except ValueError as exc:
        sys.exit(f"release: {exc}")
    print(
        f"Released {extra[0]} as the tag v{extra[0]}. Then: python3 tasks.py build, "
        "twine upload dist/*, git push --follow-tags (docs/development.md, Releasing)."
    )


def make_release(root: Path, version: str) -> None:
    """The version named in every file that names it (``write_release``), committed as a
    commit of its own and tagged ``vX.Y.Z``, in the git checkout ``root``, which must have no
    uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout

    if git("status", "--porcelain", "--untracked-files=no"):
        raise ValueError("commit or stash the changes first: a release is a commit of its own")
    changed = write_release(root, version, datetime.datetime.now(datetime.UTC).date())
    git("commit", "--quiet", "-m", f"Release {version}", *map(str, changed))
    git("tag", "-a", f"v{version}", "-m", f"tap-accessgov {version}")


def write_release(root: Path, version: str, date: datetime.date) -> list[Path]:
    """Name ``version`` as the release in every file of ``root`` that names one: pyproject.toml,
    CHANGELOG.md (the Unreleased entries become the version's section, dated ``date``, with
    its link), the plugin definition (regenerated: its pip_url installs the release) and
    ``VERSION_MENTIONS``. Refuses a version not above the last release, or nothing to release.
    Returns the files written."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ValueError(f"{version!r} is not a version X.Y.Z")
    current = package_version(root)
    if tuple(map(int, version.split("."))) <= tuple(map(int, current.split("."))):
        raise ValueError(f"{version} is not above the current version, {current}")
    changelog = root / "CHANGELOG.md"
    text = changelog.read_text()
    unreleased = re.search(r"^## \[Unreleased\]\n(.*?)(?=^## \[)", text, re.M | re.S)
    if unreleased is None or not re.search(r"^### ", unreleased[1], re.M):
        raise ValueError("CHANGELOG.md says nothing under [Unreleased]: nothing to release")
    repository = "https://github.com/accessgov/tap-accessgov"
    text = text.replace(
        "## [Unreleased]\n", f"## [Unreleased]\n\n## [{version}] - {date.isoformat()}\n", 1
    ).replace(
        f"[Unreleased]: {repository}/compare/v{current}...HEAD\n",
        f"[Unreleased]: {repository}/compare/v{version}...HEAD\n"
        f"[{version}]: {repository}/compare/v{current}...v{version}\n",
    )
    changelog.write_text(text)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        re.sub(
            r'^version = "[^"]+"$',
            f'version = "{version}"',
            pyproject.read_text(),
            count=1,
            flags=re.M,
        )
    )
    for name, pattern in VERSION_MENTIONS.items():
        path = root / name
        path.write_text(
            re.sub(pattern, lambda m: m[0].replace(m[1], version), path.read_text(), flags=re.M)
        )
    subprocess.run(
        [BIN / "python", root / "scripts" / "plugin_definition.py"],
        cwd=root,
        check=True,
        capture_output=True,
    )
    names = ["pyproject.toml", "CHANGELOG.md", "hub/tap-accessgov.yml", *VERSION_MENTIONS]
    return [root / name for name in names]


# ----- sdist and wheel ---------------------------------------------------------------------

DIST = ROOT / "dist"


def build(extra: list[str]) -> None:
    """``python3 tasks.py build [DIR]``: the sdist and the wheel of this checkout in ``DIR``
    (default dist/, emptied first), checked (``build_release``)."""
    outdir = Path(extra[0]).resolve() if extra else DIST
    if outdir.exists():
        shutil.rmtree(outdir)
    for artifact in build_release(ROOT, outdir):
        print(artifact.relative_to(ROOT) if artifact.is_relative_to(ROOT) else artifact)


def build_release(source: Path, outdir: Path) -> tuple[Path, Path]:
    """The sdist and the wheel of the project at ``source`` (a checkout: its version is
    pyproject.toml's) in ``outdir``, with the standard frontend (``python -m build``: the
    sdist, then the wheel from the sdist, so the sdist is complete). Refused where a release
    tag on the checkout's commit names another version (a tag pushed without ``release``).
    Without isolation: the backend is the lock's, checked against its hashes, not whatever the
    index serves that day. Then the checks an index and a user would make: ``twine check
    --strict`` (the metadata and the README render), ``check-wheel-contents`` (no stray or
    duplicate files) and pyroma at 10/10 (the metadata is complete). Returns (sdist, wheel)."""
    version = package_version(source)
    tags = subprocess.run(
        ["git", "tag", "--points-at", "HEAD", "--list", "v*"],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    if any(tag != f"v{version}" for tag in tags):
        sys.exit(f"build: the commit is tagged {', '.join(tags)} but is version {version}")
    run(BIN / "python", "-m", "build", "--no-isolation", "--outdir", outdir, source)
    (sdist,) = outdir.glob("*.tar.gz")
    (wheel,) = outdir.glob("*.whl")
    run(BIN / "twine", "check", "--strict", sdist, wheel)
    run(BIN / "check-wheel-contents", wheel)
    run(BIN / "pyroma", "--min", "10", sdist)
    return sdist, wheel


def demo(extra: list[str]) -> None:
    run(BIN / "python", "-m", "scripts.demo", *extra)


def benchmark(extra: list[str]) -> None:
    run(BIN / "python", "-m", "benchmarks.benchmark", *extra)


def mutants(extra: list[str]) -> None:
    """Mutation testing of the named modules (scripts/mutants.py); not part of ``test``."""
    run(BIN / "python", "-m", "scripts.mutants", *extra)


COMMANDS = {
    "test": test,
    "demo": demo,
    "benchmark": benchmark,
    "lock": lock,
    "release": release,
    "build": build,
    "mutants": mutants,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python3 tasks.py {{{'|'.join(COMMANDS)}}} [args...]")
    bootstrap()
    if sys.argv[1] in ("test", "demo", "benchmark"):
        compile_checkout()
    try:
        COMMANDS[sys.argv[1]](sys.argv[2:])
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)
