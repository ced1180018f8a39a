"""A pytest plugin for mutation runs (scripts/mutants.py): each mutant's tests in the order
that ends a killed mutant's run soonest, and a test far slower than it was ended.

mutmut hands a mutant's run the tests that reach the changed function as node ids in no
order (a set's), and pytest runs them in the order given: a module's tests then alternate
with another's, and the module's fixtures (test_backfill's and test_streams' syncs) are set
up again at each turn. Each run stops at its first failure (``-x``), so a mutant that a test
kills runs that test alone if it comes first. This plugin runs first the tests that killed
the run's earlier mutants (``KILLERS``, most kills first: a function's mutants are mostly
killed by the same few tests), then the rest module by module, the quickest module first
and in it the quickest test first, by what each took (setup, call and teardown) in mutmut's
first run of the unchanged code (``DURATIONS``).

A mutant can also make a test run far longer without failing it soon: a window read without
its bounds reads the whole feed again for each window. mutmut's own limit is about fifteen
times the tests' whole time (tens of minutes); here a test that takes ``SLOWER`` times what
it took on the unchanged code, and ``GRACE`` more, ends the mutant's run as a timeout.
"""

from __future__ import annotations

import json
import os
import signal
import typing as t
from collections import Counter, defaultdict
from pathlib import Path

import pytest

if t.TYPE_CHECKING:
    import types

# mutmut's runs happen in its copy of the tree (``mutants/``), the current directory
DURATIONS = Path("mutant-test-durations.json")
KILLERS = Path("mutant-killers.txt")  # a line per killed mutant: the test that failed
# what mutmut names its runs that are not a mutant's (the unchanged code's, to learn which
# test reaches what; a forced failure; the listing of the tests)
STATS_RUN = "stats"
NOT_A_MUTANT = {"", STATS_RUN, "fail", "list_all_tests", "mutant_generation"}
# a test of a mutant's run slower than this is taken for one that would not end soon; the
# margin holds four runs at once on two cores (each test about twice as slow as alone) and a
# module's fixtures set up by another test than in the first run (its sync, its emulator)
SLOWER = 10
GRACE = 30.0  # s
TIMED_OUT = 36  # the exit code mutmut gives a timeout (scripts/mutants.py's TIMEOUT)
TOOK = pytest.StashKey[dict[str, float]]()

_took: defaultdict[str, float] = defaultdict(float)


def _run() -> str:
    return os.environ.get("MUTANT_UNDER_TEST", "")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _run() == STATS_RUN:
        _took[report.nodeid] += report.duration
    elif report.failed and _run() not in NOT_A_MUTANT:
        # one short append per killed mutant (-x: its run ends here): whole lines, whichever
        # of mutmut's processes writes
        with KILLERS.open("a") as killers:
            killers.write(report.nodeid + "\n")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _run() == STATS_RUN and _took:
        # a resumed run's stats are of the tests new since: the others' figures stay
        DURATIONS.write_text(json.dumps(_durations() | _took, indent=0, sort_keys=True))


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    took = config.stash[TOOK] = _durations()
    kills = Counter(KILLERS.read_text().splitlines()) if KILLERS.exists() else Counter[str]()
    by_module: defaultdict[str, float] = defaultdict(float)
    for item in items:
        by_module[item.nodeid.split("::")[0]] += took.get(item.nodeid, 0.0)

    def rank(item: pytest.Item) -> tuple[int, float, str, float]:
        module = item.nodeid.split("::")[0]
        return -kills[item.nodeid], by_module[module], module, took.get(item.nodeid, 0.0)

    items.sort(key=rank)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> t.Generator[None, None, None]:
    took = item.config.stash.get(TOOK, {}).get(item.nodeid)
    if took is None or _run() in NOT_A_MUTANT:
        yield
        return
    signal.signal(signal.SIGALRM, _timed_out)
    signal.setitimer(signal.ITIMER_REAL, SLOWER * took + GRACE)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _timed_out(signum: int, frame: types.FrameType | None) -> None:
    """The mutant's run ends here, whatever its threads are doing: a timeout."""
    os._exit(TIMED_OUT)
