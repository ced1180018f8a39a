"""A pytest plugin for mutation runs (scripts/mutants.py): each mutant's tests in the order
that ends a killed mutant's run soonest, and a test far slower than it was ended.

mutmut hands a mutant's run the tests that reach the changed function sorted by what their
call took, quickest first, whatever their module: a module's tests then alternate with
another's, and the module's fixtures (test_backfill's and test_streams' syncs, set up
outside the call) are set up again at each turn. Each run stops at its first failure
(``-x``), so a mutant that a test kills runs that test alone if it comes first. This plugin
runs first the tests that killed the run's earlier mutants of the same function (``KILLERS``,
most kills first: a function's mutants are mostly killed by the same few tests), then the
rest module by module, the quickest module first and in it the quickest test first, by what
each took (setup, call and teardown) in mutmut's first run of the unchanged code
(``DURATIONS``), whose order it leaves alone (mutmut learns there which test reaches what).

A mutant can also make a test run far longer without failing it soon: a window read without
its bounds reads the whole feed again for each window. mutmut's own limit is some thirty
times the CPU time of the mutant's tests' calls (tens of minutes); here a test that takes
``SLOWER`` times what it and the slowest test of its module took on the unchanged code (a
module's fixtures are set up by whichever of its tests comes first), and ``GRACE`` more,
ends the mutant's run as a timeout, noted in ``TIMEOUTS`` (which test, after how long).
"""

from __future__ import annotations

import json
import os
import signal
import time
import typing as t
from collections import Counter, defaultdict
from pathlib import Path

import pytest

if t.TYPE_CHECKING:
    import types

# mutmut's runs happen in its copy of the tree (``mutants/``), the current directory
DURATIONS = Path("mutant-test-durations.json")
KILLERS = Path("mutant-killers.txt")  # per killed mutant: its function, the test that failed
TIMEOUTS = Path("mutant-timeouts.txt")  # per run ended here: the mutant, its test, the limit
# what mutmut names its runs that are not a mutant's (the unchanged code's, to learn which
# test reaches what; a forced failure; the listing of the tests)
STATS_RUN = "stats"
NOT_A_MUTANT = {"", STATS_RUN, "fail", "list_all_tests", "mutant_generation"}
# a test of a mutant's run slower than this is taken for one that would not end soon; the
# margin holds four runs at once on two cores (each test about twice as slow as alone)
SLOWER = 10
GRACE = 30.0  # s
TIMED_OUT = 36  # the exit code mutmut gives a timeout (scripts/mutants.py's TIMEOUT)


def _run() -> str:
    return os.environ.get("MUTANT_UNDER_TEST", "")


def _module(item: pytest.Item) -> str:
    """The test module of ``item`` (its node id's path)."""
    return item.nodeid.split("::")[0]


def _function(mutant: str) -> str:
    """The function a mutant changes (its name without ``__mutmut_<n>``)."""
    return mutant.rsplit("__mutmut_", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(MutantRun(), "mutant-run")


def _durations() -> dict[str, float]:
    """What each test took on the unchanged code: this plugin's figures (setup, call and
    teardown), else mutmut's own (its call alone)."""
    mutmut_stats = Path("mutmut-stats.json")
    took: dict[str, float] = {}
    if mutmut_stats.exists():
        took |= json.loads(mutmut_stats.read_text()).get("duration_by_test", {})
    if DURATIONS.exists():
        took |= json.loads(DURATIONS.read_text())
    return took


class MutantRun:
    """One pytest session of mutmut's: the stats run's figures, or a mutant's tests."""

    def __init__(self) -> None:
        self.took: defaultdict[str, float] = defaultdict(float)  # the stats run's, by test
        self.limit: dict[str, float] = {}  # a mutant's run: each test's time limit, s
        self.killed = False  # a mutant's run: its killer was noted

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if _run() == STATS_RUN:
            self.took[report.nodeid] += report.duration
        elif report.failed and _run() not in NOT_A_MUTANT and not self.killed:
            self.killed = True
            # one short append per killed mutant (-x: its run ends here): whole lines,
            # whichever of mutmut's processes writes
            with KILLERS.open("a") as killers:
                killers.write(f"{_function(_run())}\t{report.nodeid}\n")

    def pytest_sessionfinish(self) -> None:
        if _run() == STATS_RUN and self.took:
            # a resumed run's stats are of the tests new since: the others' figures stay
            before = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
            DURATIONS.write_text(json.dumps(before | self.took, indent=0, sort_keys=True))

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if _run() in NOT_A_MUTANT:
            return
        took = _durations()
        function = _function(_run())
        kills = Counter(
            test
            for line in (KILLERS.read_text().splitlines() if KILLERS.exists() else ())
            for killed, _, test in [line.partition("\t")]
            if killed == function
        )
        by_module: defaultdict[str, float] = defaultdict(float)
        slowest: defaultdict[str, float] = defaultdict(float)
        for item in items:
            module = _module(item)
            by_module[module] += took.get(item.nodeid, 0.0)
            slowest[module] = max(slowest[module], took.get(item.nodeid, 0.0))
        self.limit = {
            item.nodeid: SLOWER * (took[item.nodeid] + slowest[_module(item)]) + GRACE
            for item in items
            if item.nodeid in took
        }

        def rank(item: pytest.Item) -> tuple[int, float, str, float]:
            module = _module(item)
            return -kills[item.nodeid], by_module[module], module, took.get(item.nodeid, 0.0)

        items.sort(key=rank)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> t.Generator[None, None, None]:
        limit = self.limit.get(item.nodeid)
        if limit is None:
            yield
            return
        started = time.monotonic()

        def timed_out(signum: int, frame: types.FrameType | None) -> None:
            """The mutant's run ends here, whatever its threads are doing: a timeout."""
            took = time.monotonic() - started
            with TIMEOUTS.open("a") as timeouts:
                timeouts.write(f"{_run()}\t{item.nodeid}\t{took:.1f} s\t{limit:.1f} s\n")
            os._exit(TIMED_OUT)

        signal.signal(signal.SIGALRM, timed_out)
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
