"""``python3 tasks.py mutants [MODULE...]``: do the tests notice when the code changes?

Mutation testing with mutmut: each named module of the package (by default every module of
``COVERED_BY``) is changed in many small ways, one at a time (a ``<`` made ``<=``, a constant
moved, a call dropped), and the tests that cover it run against each change (a *mutant*). A
mutant the tests fail on is killed; one they pass on *survived*: a change of behaviour nobody
would notice, so a test still to write, or an equivalent change (docs/development.md,
*Mutation testing*, says which and why).

Each module is run in a copy of the work tree of its own (``.mutants/<module>/``: mutmut
copies it again into its ``mutants/`` there, with the changes switched on one at a time), with
the tests ``COVERED_BY`` names for it, in one process (no xdist): mutmut first runs them once to
learn which test reaches which function, then runs each mutant against the tests that reach
it, until one fails: first those that killed earlier mutants, then module by module, the
quickest first, and a test far slower than on the unchanged code ends the run as a timeout
(scripts/mutant_runs.py). Prints a table (module, mutants, killed, survived, timeouts, score)
and every survivor's diff. Not part of the test command: a module takes minutes to an hour;
``--functions`` tests only the mutants of the functions a change touched (``python3 tasks.py
mutants tap_accessgov/engine/time_ranges.py --functions pieces,records``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.support import checkout_copy

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
WORK = ROOT / ".mutants"

# The modules mutation testing covers, and the tests that cover each: those that exercise it
# through the tap as a user runs it (in-process syncs against the emulator) and its own unit
# tests. Only offline tests: mutmut runs the changed package in its own process.
COVERED_BY: dict[str, tuple[str, ...]] = {
    "tap_accessgov/timestamps.py": (
        "tests/test_timestamps.py",
        "tests/test_properties.py",
        "tests/test_shapes.py",
        "tests/test_config.py",
    ),
    "tap_accessgov/retries.py": (
        "tests/test_retries.py",
        "tests/test_reliability.py",
        "tests/test_auth.py",
    ),
    "tap_accessgov/paging.py": ("tests/test_paging.py", "tests/test_properties.py"),
    "tap_accessgov/conformance.py": (
        "tests/test_conformance.py",
        "tests/test_shapes.py",
        "tests/test_vendor_schemas.py",
    ),
    "tap_accessgov/streams/grant_feed.py": (
        "tests/test_streams.py",
        "tests/test_backfill.py",
        "tests/test_windows.py",  # the filters digest and the key, held against their format
    ),
    "tap_accessgov/streams/apps.py": ("tests/test_catalog.py", "tests/test_snapshots.py"),
    "tap_accessgov/streams/app_entitlements.py": ("tests/test_catalog.py",),
    "tap_accessgov/streams/automation_exclusions.py": (
        "tests/test_catalog.py",
        "tests/test_streams.py",
        "tests/test_people_streams.py",  # its partitions read by users
        "tests/test_privacy.py",  # what its warnings name (ids, never a person's values)
    ),
    "tap_accessgov/streams/users.py": ("tests/test_people_streams.py",),
    "tap_accessgov/streams/app_users.py": ("tests/test_people_streams.py",),
    "tap_accessgov/streams/grants.py": ("tests/test_people_streams.py",),
    "tap_accessgov/streams/access_reviews.py": ("tests/test_tasks.py", "tests/test_snapshots.py"),
    "tap_accessgov/streams/full_table_snapshots.py": ("tests/test_snapshots.py",),
    "tap_accessgov/streams/system_log.py": ("tests/test_system_log.py",),
    "tap_accessgov/streams/past_grants.py": ("tests/test_past_grants.py",),
    "tap_accessgov/streams/tasks.py": ("tests/test_tasks.py",),
    # the range reader: the three windowed streams' tests, and the backfill's (windows split,
    # resumed, read in every order)
    "tap_accessgov/engine/time_ranges.py": (
        "tests/test_windows.py",
        "tests/test_backfill.py",
        "tests/test_streams.py",
        "tests/test_system_log.py",
        "tests/test_tasks.py",
    ),
    "tap_accessgov/engine/windowed.py": (
        "tests/test_backfill.py",
        "tests/test_streams.py",
        "tests/test_system_log.py",
        "tests/test_tasks.py",
        "tests/test_past_grants.py",  # RunCappedStream's bookmark step, which it shares
        "tests/test_output.py",  # the STATEs that step writes, byte for byte the SDK's
    ),
    # what an audit is scoped by (issue 67): its streams, and a service that refuses one
    "tap_accessgov/engine/refused.py": ("tests/test_scoping_streams.py",),
    "tap_accessgov/streams/resources.py": (
        "tests/test_scoping_streams.py",
        "tests/test_people_streams.py",  # a viewed object without an id
    ),
    "tap_accessgov/streams/owners.py": ("tests/test_scoping_streams.py",),
    "tap_accessgov/streams/attributes.py": ("tests/test_scoping_streams.py",),
    "tap_accessgov/streams/iam_roles.py": ("tests/test_scoping_streams.py",),
    "tap_accessgov/streams/connectors.py": (
        "tests/test_scoping_streams.py",
        "tests/test_streams.py",  # the pseudonymisation example: oauthAuthorizedAs
        "tests/test_people_streams.py",  # a viewed object without an id
    ),
    # the machinery: what a run keeps of the records other streams read (the catalog's), and
    # the full-table streams' snapshot markers
    "tap_accessgov/engine/read_once.py": ("tests/test_catalog.py",),
    "tap_accessgov/engine/snapshots.py": ("tests/test_snapshots.py",),
    # the partitioned streams' reading (the catalog's entitlements, the owners of each, the
    # exclusions the users stream reads ahead while the directory pages)
    "tap_accessgov/engine/partitions.py": (
        "tests/test_catalog.py",
        "tests/test_scoping_streams.py",
        "tests/test_people_streams.py",
    ),
    # the rest of the machinery (every stream's base): the request path (retries, proxies,
    # the service's errors), the records' way out (conformance, the output, --test's limit)
    "tap_accessgov/engine/stream.py": (
        "tests/test_retries.py",
        "tests/test_output.py",
        "tests/test_shapes.py",
        "tests/test_snapshots.py",
        "tests/test_scoping_streams.py",
        "tests/test_streams.py",
        "tests/test_reliability.py",
        "tests/test_proxy.py",
        "tests/test_people_streams.py",  # the worker threads' names
        "tests/test_auth.py",  # the token a 401 refused
    ),
    # how messages leave: the writer, the STATEs (held for BATCH files), the files' records
    "tap_accessgov/output.py": (
        "tests/test_output.py",
        "tests/test_batch.py::test_batch_files_hold_the_records_and_a_mapped_or_narrowed_stream_keeps_records",
        "tests/test_backfill.py::test_a_state_leaves_after_the_batch_files_of_every_record_it_counts",
    ),
    # which streams' records go in BATCH files, and the STATEs that wait for them
    "tap_accessgov/engine/batch_files.py": (
        "tests/test_output.py",
        "tests/test_batch.py::test_batch_files_hold_the_records_and_a_mapped_or_narrowed_stream_keeps_records",
        "tests/test_batch.py::test_flattening_or_a_map_that_renames_or_removes_a_stream_keeps_record_messages",
        "tests/test_batch.py::test_a_stream_with_a_parent_or_children_keeps_record_messages",
        "tests/test_backfill.py::test_a_state_leaves_after_the_batch_files_of_every_record_it_counts",
    ),
    # the owner of concurrency: its own tests, and the reads of its users that hold threads
    "tap_accessgov/engine/concurrency.py": (
        "tests/test_concurrency.py",
        "tests/test_reliability.py",  # read_ahead's chunks, failures and close
    ),
}
# mutmut's exit codes of a mutant's test run, as its stats module names them; -9: stopped by
# ``stop_hung_mutants`` (a mutant that waits forever uses no CPU, so mutmut's limit, on CPU
# time, never ends it)
KILLED, SURVIVED = {1, 3, 37}, {0}
TIMEOUT = {24, -24, 36, 152, 255, -9}
# A mutant's run that uses no CPU for this long is stopped as hung (a worker that never
# answers, a queue read without end: the range reader's mutants); a run that waits on
# purpose (a retry's back-off, a service's latency) waits seconds, and a long one works.
HUNG_AFTER = 60  # s
# Mutants run at once: more than the cores, since a hung one holds its slot idle until stopped.
CHILDREN = 2 * (os.cpu_count() or 1)


@dataclass
class Score:
    module: str
    by_status: Counter[str] = field(default_factory=Counter)
    survivors: list[str] = field(default_factory=list)

    @property
    def mutants(self) -> int:
        return sum(self.by_status.values())

    @property
    def score(self) -> float:
        """Killed (timeouts too: the change made the tests hang) of all mutants tested."""
        tested = self.mutants - self.by_status["not tested"]
        return (self.by_status["killed"] + self.by_status["timeout"]) / tested if tested else 0.0


def work_tree(module: str, tests: tuple[str, ...], resume: bool) -> Path:
    """A copy of the work tree's files (tracked and new) for ``module``'s run, its
    pyproject.toml saying to mutmut what to change and which tests to run; with ``resume``,
    the copy of an earlier run that stopped, where mutmut goes on with the mutants not
    tested yet."""
    work = WORK / module.replace("/", "_").removesuffix(".py")
    if resume and (work / "mutants").exists():
        return work
    shutil.rmtree(work, ignore_errors=True)
    checkout_copy(work)
    # mutmut changes no decorated function (a decorator runs when the function is defined);
    # ``@override`` only marks an SDK hook for the type checker (a no-op at run time), so the
    # copy drops it, and the hooks the streams are made of are changed too
    source = work / module
    source.write_text(re.sub(r"^[ \t]*@override[ \t]*\n", "", source.read_text(), flags=re.M))
    top = sorted(path.name for path in work.iterdir())
    settings = {
        "source_paths": ["tap_accessgov"],
        "only_mutate": [module],
        "also_copy": [name for name in top if name not in ("tap_accessgov", "tests")],
        # scripts/mutant_runs.py: a mutant's tests, the likeliest to fail and quickest first
        "pytest_add_cli_args": [
            *("-n", "0", "-p", "no:cacheprovider", "-q", "-x"),
            *("-p", "scripts.mutant_runs"),
        ],
        "pytest_add_cli_args_test_selection": list(tests),
    }
    with (work / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n[tool.mutmut]\n")
        for key, value in settings.items():
            pyproject.write(f"{key} = {json.dumps(value)}\n")
    tomllib.loads((work / "pyproject.toml").read_text())  # still TOML
    return work


def run(
    module: str, tests: tuple[str, ...], resume: bool = False, functions: list[str] | None = None
) -> Score:
    """``module``'s mutants (only those of ``functions``, when named) against ``tests``."""
    work = work_tree(module, tests, resume)
    # mutmut names a mutant <module>.x_<function>__mutmut_<n> (a method: xǁ<class>ǁ<method>)
    dotted = module.removesuffix(".py").replace("/", ".")
    names = [
        pattern
        for function in functions or ()
        for pattern in (f"{dotted}.x_{function}__mutmut_*", f"{dotted}.xǁ*ǁ{function}__mutmut_*")
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    log = work / "mutmut.log"
    print(f"\n== {module}: mutmut run against {', '.join(tests)} (log: {log}) ==", flush=True)
    with log.open("a" if resume else "w") as out:
        mutmut = subprocess.Popen(
            [BIN / "mutmut", "run", "--max-children", str(CHILDREN), *names],
            cwd=work,
            env=env,
            stdout=out,
            stderr=out,
        )
        progress: dict[int, tuple[int, float]] = {}
        while mutmut.poll() is None:
            stop_hung_mutants(progress)
            time.sleep(5)
    meta_file = work / "mutants" / f"{module}.meta"
    if not meta_file.exists():
        sys.exit(f"mutmut found nothing to report for {module}; its log ends:\n{tail(log)}")
    meta = json.loads(meta_file.read_text())
    score = Score(module)
    for name, code in sorted(meta["exit_code_by_key"].items()):
        if code in KILLED:
            score.by_status["killed"] += 1
        elif code in SURVIVED:
            score.by_status["survived"] += 1
            score.survivors.append(name)
        elif code in TIMEOUT:
            score.by_status["timeout"] += 1
        elif code is None:
            score.by_status["not tested"] += 1
        else:  # no tests reach it (5, 33), or mutmut's own verdicts
            score.by_status["no tests" if code in (5, 33) else f"exit {code}"] += 1
            if code in (5, 33):
                score.survivors.append(name)
    for name in score.survivors:
        shown = subprocess.run(
            [BIN / "mutmut", "show", name], cwd=work, env=env, capture_output=True, text=True
        )
        print(f"\n-- survived: {name}\n{shown.stdout.strip()}", flush=True)
    return score


def stop_hung_mutants(progress: dict[int, tuple[int, float]]) -> None:
    """Stop each mutant's run (a process mutmut titles ``mutmut: <mutant>``) whose CPU time
    has not grown for ``HUNG_AFTER`` seconds: mutmut records it as killed by a signal,
    counted here as a timeout. ``progress``: each run's CPU seconds and when they last grew,
    kept from one call to the next."""
    listing = subprocess.run(
        ["ps", "-eo", "pid=,times=,args="], capture_output=True, text=True, check=False
    )
    now = time.monotonic()
    for line in listing.stdout.splitlines():
        pid_text, cpu_text, args = line.split(None, 2)
        if not args.startswith("mutmut: "):
            continue
        pid, cpu = int(pid_text), int(cpu_text)
        last_cpu, since = progress.get(pid, (-1, now))
        if cpu != last_cpu:
            progress[pid] = (cpu, now)
        elif now - since > HUNG_AFTER:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def tail(log: Path, lines: int = 30) -> str:
    """The end of a log that draws its progress with carriage returns, line by line."""
    return "\n".join(log.read_text(errors="replace").replace("\r", "\n").splitlines()[-lines:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"default: {', '.join(COVERED_BY)}")
    parser.add_argument(
        "--functions",
        type=lambda text: text.split(","),
        metavar="NAME[,NAME...]",
        default=[],
        help="only the mutants of these functions or methods of the modules (what a change "
        "touched; a method by its own name): the others are listed as not tested, outside "
        "the score",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="go on with a module's earlier run that stopped (its copy in .mutants/)",
    )
    args = parser.parse_args()
    unknown = [m for m in args.modules if m not in COVERED_BY]
    if unknown:
        parser.error(f"no tests named for {', '.join(unknown)}: add them to COVERED_BY")
    scores = [
        run(module, COVERED_BY[module], args.resume, args.functions)
        for module in args.modules or COVERED_BY
    ]
    print(
        "\nmodule                                       mutants  killed  survived  timeout  score"
    )
    for s in scores:
        print(
            f"{s.module:<44} {s.mutants:>8} {s.by_status['killed']:>7} "
            f"{len(s.survivors):>9} {s.by_status['timeout']:>8}  {s.score:6.1%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
