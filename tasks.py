#!/usr/bin/env python3
"""The project's two commands, runnable on a machine that has only Python 3.11+.

    python3 tasks.py demo   # start the emulator, extract all streams from it, show a summary
    python3 tasks.py test   # lint, type-check and run the whole test suite
    python3 tasks.py benchmark  # the side-by-side performance figures of the README

Each creates ``.venv`` and installs the project into it first (only when pyproject.toml
changed since the last install), so nothing else needs to be set up by hand.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".installed"


def run(*args: str | Path) -> None:
    print("+", " ".join(str(a) for a in args), flush=True)
    subprocess.run([str(a) for a in args], cwd=ROOT, check=True)


def bootstrap() -> None:
    """Create .venv and install the project with its dev extras when pyproject.toml changed."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    if not (BIN / "python").exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(BIN / "python", "-m", "pip", "install", "--quiet", "-e", ".[dev]")
    STAMP.write_text(digest)


def test(extra: list[str]) -> None:
    run(BIN / "ruff", "check", ".")
    run(BIN / "ruff", "format", "--check", ".")
    run(BIN / "mypy", "tap_accessgov")
    run(BIN / "python", "-m", "pytest", *extra)


def demo(extra: list[str]) -> None:
    run(BIN / "python", "scripts/demo.py", *extra)


def benchmark(extra: list[str]) -> None:
    run(BIN / "python", "scripts/benchmark.py", *extra)


COMMANDS = {"test": test, "demo": demo, "benchmark": benchmark}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python3 tasks.py {{{'|'.join(COMMANDS)}}} [args...]")
    bootstrap()
    try:
        COMMANDS[sys.argv[1]](sys.argv[2:])
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)
