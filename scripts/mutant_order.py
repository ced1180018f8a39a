"""A pytest plugin for mutation runs (scripts/mutants.py): each mutant's tests in the order
that ends a killed mutant's run soonest.

mutmut hands a mutant's run the tests that reach the changed function as node ids in no
order (a set's), and pytest runs them in the order given: a module's tests then alternate
with another's, and the module's fixtures (test_backfill's and test_streams' syncs) are set
up again at each turn. Each run stops at its first failure (``-x``), so a mutant that a test
kills runs that test alone if it comes first. This plugin runs first the tests that killed
the run's earlier mutants (``KILLERS``, most kills first: a function's mutants are mostly
killed by the same few tests), then the rest module by module, the quickest module first
and in it the quickest test first, by what each took (setup, call and teardown) in mutmut's
first run of the unchanged code (``DURATIONS``).
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path

import pytest

# mutmut's runs happen in its copy of the tree (``mutants/``), the current directory
DURATIONS = Path("mutant-test-durations.json")
KILLERS = Path("mutant-killers.txt")  # a line per killed mutant: the test that failed
# what mutmut names its runs that are not a mutant's (the unchanged code's, to learn which
# test reaches what; a forced failure; the listing of the tests)
STATS_RUN = "stats"
NOT_A_MUTANT = {"", STATS_RUN, "fail", "list_all_tests", "mutant_generation"}

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
        DURATIONS.write_text(json.dumps(_took, indent=0, sort_keys=True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    took: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    kills = Counter(KILLERS.read_text().splitlines()) if KILLERS.exists() else Counter[str]()
    by_module: defaultdict[str, float] = defaultdict(float)
    for item in items:
        by_module[item.nodeid.split("::")[0]] += took.get(item.nodeid, 0.0)

    def rank(item: pytest.Item) -> tuple[int, float, str, float]:
        module = item.nodeid.split("::")[0]
        return -kills[item.nodeid], by_module[module], module, took.get(item.nodeid, 0.0)

    items.sort(key=rank)
