"""``python -m scripts.compare_output --base REF [--head REF_OR_DIR]``: does a change of the
tap's internals change what a user gets? Every stream's output of two versions, compared.

Both versions run against ONE emulator (frozen: its data never changes and the tap's own calls
are not logged, so the system log is the same for every run), with the same config, the same
python and a catalog of their own discovery with everything selected. Each runs at
``max_concurrency`` 1, where the order is deterministic and stdout is compared line by line,
and at the default, where threads may finish in any order and each stream's lines are
compared as a multiset (and the final STATE as is); then once more from its own first run's
final STATE, the incremental run. Only what names the run is normalised (``RUN_SPECIFIC``);
the STATEs before a run's final one also carry its clock (the SDK's signposts, the windows'
bounds), so on their own they differ even between two runs of the same code.

``--base`` is a git ref, extracted to a temporary directory (``git archive``); ``--head`` is
the work tree unless it names another ref or a directory. Exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import typing as t
from collections import Counter
from pathlib import Path

from harness.support import ROOT, EmulatorProcess

# tests/conftest.py's SMALL_DATASET: several pages of every stream, a run in seconds.
EMULATOR_OPTIONS = (
    "--seed=11",
    "--events=1500",
    "--apps=4",
    "--users=250",
    "--exclusion-entitlements=8",
    "--max-exclusions=180",
    "--catalog-apps=24",
    "--frozen",
)
# What differs between two runs of the same code: the SDK's extraction time of every message,
# and the run's start stamped on full-table records (also the run id of full_table_snapshots,
# whose completedAt is when it was written): tests/conftest.py's without_run.
RUN_SPECIFIC = {
    "message": ("time_extracted",),
    "record": ("snapshotAt",),
    "full_table_snapshots": ("completedAt",),
}
STATE = '{"type":"STATE"'  # how the SDK starts a STATE line
SHOWN = 300  # characters of each side around a first difference

# The tap's CLI with the package imported from the side's directory (the first argument)
# rather than the editable install, which it names on stderr for the check.
RUN_TAP = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); import tap_accessgov; "
    "print('tap_accessgov:', tap_accessgov.__file__, file=sys.stderr); "
    "from tap_accessgov.tap import TapAccessGov; TapAccessGov.cli()"
)


def extract(ref: str, directory: Path) -> Path:
    """A ref's tracked files in ``directory``: no worktree to register and remove in a
    checkout others work in."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(directory, filter="data")
    return directory


def describe(ref: str) -> str:
    """The commit a ref names, for the reader to check."""
    return subprocess.run(
        ["git", "log", "-1", "--format=%h %s", ref], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()[:100]


class Side:
    """One version of the tap: its directory, and its runs' stdout kept in ``workdir``."""

    def __init__(self, name: str, directory: Path, workdir: Path) -> None:
        self.name = name
        self.directory = directory
        self.workdir = workdir

    def tap(self, *args: str, output: str) -> str:
        """The tap's stdout (also written to ``<workdir>/<side>-<output>.jsonl``); its
        stderr goes to a file beside it, whose tail is shown if it fails."""
        stdout = self.workdir / f"{self.name}-{output}.jsonl"
        stderr = self.workdir / f"{self.name}-{output}.log"
        with stdout.open("w") as out, stderr.open("w") as err:
            code = subprocess.run(
                [sys.executable, "-c", RUN_TAP, str(self.directory), *args],
                cwd=self.directory,
                stdout=out,
                stderr=err,
                check=False,
            ).returncode
        if code != 0:
            sys.exit(
                f"{self.name}'s tap failed ({code}) in {output}:\n{stderr.read_text()[-3000:]}"
            )
        imported = stderr.read_text().partition("tap_accessgov: ")[2].splitlines()[0]
        if not Path(imported).is_relative_to(self.directory):
            sys.exit(f"{self.name}'s run imported tap_accessgov from {imported}")
        return stdout.read_text()

    def catalog(self, config: Path) -> Path:
        """This side's discovery, every stream and property selected."""
        catalog = json.loads(self.tap("--config", str(config), "--discover", output="discover"))
        for entry in catalog["streams"]:
            for item in entry["metadata"]:
                if item["metadata"].get("inclusion") != "unsupported":
                    item["metadata"]["selected"] = True
        path = self.workdir / f"{self.name}-catalog.json"
        path.write_text(json.dumps(catalog))
        return path


def normalised(line: str) -> str:
    """The line with each run-specific value replaced in its text, every other byte kept."""
    message = json.loads(line)
    fields = [(name, message) for name in RUN_SPECIFIC["message"]]
    if message["type"] == "RECORD":
        names = RUN_SPECIFIC["record"] + RUN_SPECIFIC.get(message["stream"], ())
        fields += [(name, message["record"]) for name in names]
    for name, holder in fields:
        if name in holder:
            value = f'"{name}":{json.dumps(holder[name])}'
            assert value in line, f"{value} not written as expected in {line[:SHOWN]}"
            line = line.replace(value, f'"{name}":"<{name}>"', 1)
    return line


def by_stream(output: str) -> dict[str, list[str]]:
    """The normalised lines of each stream (a stream's SCHEMA and RECORDs), STATEs apart."""
    streams: dict[str, list[str]] = {}
    for line in output.splitlines():
        stream = json.loads(line).get("stream", "STATE")
        streams.setdefault(stream, []).append(normalised(line))
    return streams


def final_state(output: str) -> str:
    return [line for line in output.splitlines() if line.startswith(STATE)][-1]


def first_difference(base: str, head: str) -> str:
    """Both lines around their first differing character."""
    at = next((i for i, (a, b) in enumerate(zip(base, head, strict=False)) if a != b), None)
    at = min(len(base), len(head)) if at is None else at
    start = max(0, at - SHOWN // 3)
    return (
        f"      at character {at}:\n"
        f"      base: {base[start : start + SHOWN]}\n"
        f"      head: {head[start : start + SHOWN]}"
    )


def compare_lines(base: list[str], head: list[str]) -> str | None:
    """Line by line: None when equal, else how many positions differ and the first."""
    pairs = list(itertools.zip_longest(base, head, fillvalue=""))
    differing = [i for i, (a, b) in enumerate(pairs) if a != b]
    if not differing:
        return None
    first = differing[0]
    return (
        f"{len(differing)} of {len(pairs)} lines differ (base {len(base)}, head "
        f"{len(head)}); the first is line {first + 1}:\n" + first_difference(*pairs[first])
    )


def compare_multisets(base: list[str], head: list[str]) -> str | None:
    """As multisets: None when equal, else how many lines only one side has and the first
    of each (sorted), side by side where both have one."""
    only_base = sorted((Counter(base) - Counter(head)).elements())
    only_head = sorted((Counter(head) - Counter(base)).elements())
    if not only_base and not only_head:
        return None
    counts = f"{len(only_base)} lines only in base, {len(only_head)} only in head"
    if only_base and only_head:
        return f"{counts}; the first of each:\n" + first_difference(only_base[0], only_head[0])
    return f"{counts}:\n      {(only_base or only_head)[0][:SHOWN]}"


def differing_bookmarks(base: list[str], head: list[str]) -> str:
    """The state's keys that differ in any pair of STATE lines: a summary of them all."""
    paths: set[str] = set()

    def walk(a: t.Any, b: t.Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in dict.fromkeys([*a, *b]):
                walk(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        elif a != b:
            paths.add(path)

    for a, b in zip(base, head, strict=False):
        walk(json.loads(a)["value"], json.loads(b)["value"], "")
    return "\n      keys that differ in any line: " + ", ".join(sorted(paths))


def compare(title: str, runs: list[str], ordered: bool) -> bool:
    """Print each stream's verdict, STATE's (in order, every line and the final one alone)
    and the interleaving's, for the runs of base and head; True when all are identical."""
    print(f"\n== {title} ==")
    base, head = (by_stream(run) for run in runs)
    rows: list[tuple[str, list[str], str | None]] = []
    for stream in dict.fromkeys([*base, *head]):
        a, b = base.get(stream, []), head.get(stream, [])
        if stream != "STATE":
            rows.append((stream, a, compare_lines(a, b) if ordered else compare_multisets(a, b)))
            continue
        every = [("STATE, every line", a, b)] if ordered else []
        for name, in_base, in_head in [*every, ("final STATE", a[-1:], b[-1:])]:
            verdict = compare_lines(in_base, in_head)
            keys = verdict and differing_bookmarks(in_base, in_head)
            rows.append((name, in_base, verdict and f"{verdict}{keys}"))
    if ordered:  # the streams' lines and the STATEs interleaved alike
        a, b = (
            [STATE if line.startswith(STATE) else normalised(line) for line in run.splitlines()]
            for run in runs
        )
        rows.append(("stdout, every line", a, compare_lines(a, b)))
    for name, lines, verdict in rows:
        print(f"  {name:22} {verdict or f'identical (lines: {len(lines)})'}")
    # The STATEs before a run's final one hold its clock (signposts, the backfill's since and
    # window bounds): shown, not counted; the final STATE and the interleaving are.
    return not any(verdict for name, _, verdict in rows if name != "STATE, every line")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="a git ref: the old version")
    parser.add_argument("--head", help="a git ref or a directory (default: the work tree)")
    parser.add_argument("--keep", action="store_true", help="keep the runs' output, and say where")
    args = parser.parse_args(argv)
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="compare_output-"))
    try:
        head_dir = ROOT if args.head is None else Path(args.head)
        if args.head is not None and not head_dir.is_dir():
            head_dir = extract(args.head, workdir / "head")
        sides = [
            Side("base", extract(args.base, workdir / "base"), workdir),
            Side("head", head_dir.resolve(), workdir),
        ]
        print(f"base: {args.base} ({describe(args.base)}), in {sides[0].directory}")
        head_name = args.head or "the work tree"
        print(f"head: {head_name}, in {sides[1].directory}")
        print(
            "normalised (run-specific), nothing else: time_extracted of every message, "
            "snapshotAt of every record, completedAt of full_table_snapshots' records"
        )
        print(
            "note: the STATEs before a run's final one hold its clock (signposts, backfill "
            "since, window bounds): they differ between two runs of the same code"
        )
        same = True
        with EmulatorProcess(workdir, "emulator", *EMULATOR_OPTIONS) as emulator:
            print(f"one emulator for every run: python -m emulator {' '.join(EMULATOR_OPTIONS)}")
            serial, default = workdir / "serial.json", workdir / "default.json"
            serial.write_text(json.dumps({**emulator.config, "max_concurrency": 1}))
            default.write_text(json.dumps(emulator.config))
            catalogs = [side.catalog(default) for side in sides]
            for config, ordered in ((serial, True), (default, False)):
                mode = "max_concurrency 1" if ordered else "the default max_concurrency"
                runs = [
                    side.tap("--config", str(config), "--catalog", str(catalog), output=config.stem)
                    for side, catalog in zip(sides, catalogs, strict=True)
                ]
                same &= compare(f"{mode}, a first run (no state)", runs, ordered)
                incremental = []
                for side, catalog, run in zip(sides, catalogs, runs, strict=True):
                    state = workdir / f"{side.name}-{config.stem}-state.json"
                    state.write_text(json.dumps(json.loads(final_state(run))["value"]))
                    incremental.append(
                        side.tap(
                            *("--config", str(config), "--catalog", str(catalog)),
                            *("--state", str(state)),
                            output=f"{config.stem}-incremental",
                        )
                    )
                title = f"{mode}, an incremental run from each side's final STATE"
                same &= compare(title, incremental, ordered)
    finally:
        if args.keep:
            print(f"\nthe runs' output: {workdir}")
        else:
            shutil.rmtree(workdir)
    verdict = "the same" if same else "DIFFERENT"
    print(f"\n{verdict} beyond the normalisation ({time.monotonic() - started:.0f} s)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
