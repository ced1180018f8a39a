"""The README's commands, as the tests run them: every fenced ``bash`` block of README.md is
preceded by ``<!-- run as written by tests/<file>.py::<test> -->`` (or ``.ci/run``), and that
test reads the block from the README (``readme_commands``) instead of a copy of its own, so a
command changed in the README is a command changed in its test (tests/test_readme.py checks
the markers).

What cannot be run here as written is said once, in ``REPOSITORY``'s replacements: the
repository's GitHub addresses are a local copy of this work tree, and Meltano Hub's plugins
come from this project's pinned definitions (neither is reachable from the test machines).
An ``export`` line sets placeholders (a tenant's credential, a warehouse): the test sets
those variables itself (the emulator's, the tests' PostgreSQL), and runs every other line.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.support import checkout_copy

ROOT = Path(__file__).resolve().parent.parent
# Where the README says the repository is (its clone, its raw files, its git URL for pip).
REPOSITORY = "https://github.com/accessgov/tap-accessgov"
RAW_FILES = "https://raw.githubusercontent.com/accessgov/tap-accessgov"
_BLOCK = re.compile(
    r"(?:<!-- run as written by (?P<runner>\S+) -->\n)?```(?P<language>\w*)\n(?P<body>.*?)```",
    re.S,
)


@dataclass(frozen=True)
class Block:
    runner: str | None  # tests/<file>.py::<test>, .ci/run, or None: unmarked
    language: str
    body: str


def readme_blocks(readme: Path = ROOT / "README.md") -> list[Block]:
    """Every fenced block of a README, with the runner its marker names."""
    return [
        Block(m["runner"], m["language"], m["body"]) for m in _BLOCK.finditer(readme.read_text())
    ]


def readme_commands(
    runner: str, replacements: dict[str, str] | None = None, readme: Path = ROOT / "README.md"
) -> list[str]:
    """The command lines of the README's bash blocks that ``runner`` runs, in order: every
    line but ``export`` lines, blank lines and comments, each with ``replacements`` made
    (what cannot be reached from here, module docstring). Fails when there are none."""
    lines = [
        line
        for block in readme_blocks(readme)
        if block.runner == runner and block.language == "bash"
        for line in block.body.splitlines()
        if line.strip() and not line.lstrip().startswith(("export ", "#"))
    ]
    assert lines, f"README.md has no bash block run by {runner}"
    for old, new in (replacements or {}).items():
        lines = [line.replace(old, new) for line in lines]
    return lines


def readme_script(runner: str) -> str:
    """The one bash block of the README that ``runner`` runs as a whole script."""
    (body,) = [b.body for b in readme_blocks() if b.runner == runner and b.language == "bash"]
    return body


def run_commands(
    commands: list[str], cwd: Path, env: dict[str, str], timeout: float = 900
) -> list[str]:
    """Each command by bash, one after another, in ``cwd`` (a ``cd DIR`` line moves it, as in
    a shell); each must succeed. Their outputs (stdout and stderr), in order."""
    outputs = []
    for command in commands:
        if command.startswith("cd "):
            cwd = cwd / command.removeprefix("cd ").strip()
            continue
        result = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"{command}\n{output[-5000:]}"
        outputs.append(output)
    return outputs


def readme_yaml(runner: str) -> str:
    """The one yaml block of the README that ``runner`` uses (a file the README shows)."""
    (body,) = [b.body for b in readme_blocks() if b.runner == runner and b.language == "yaml"]
    return body


# ----- the repository the README's addresses name: a copy of this work tree -----------------


def git(directory: Path, *args: str) -> str:
    identity = ("-c", "user.name=readme test", "-c", "user.email=readme@example.invalid")
    return subprocess.run(
        ["git", *identity, *args], cwd=directory, check=True, capture_output=True, text=True
    ).stdout


def committed_copy(directory: Path, tag: str | None = None) -> Path:
    """A copy of this checkout, as it is now, committed to a repository of its own in
    ``directory`` (what a clone of the README's address gets, with this work tree's files),
    tagged ``tag`` where one is given, else with no tag (a fork, a mirror, a CI checkout)."""
    source = checkout_copy(directory)
    git(source, "init", "-q")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "main")
    if tag:
        git(source, "tag", "-a", tag, "-m", tag)
    return source
