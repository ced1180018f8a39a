"""A pytest plugin for mutation runs (scripts/mutants.py): each mutant's tests in the order
that ends a killed mutant's run soonest, one module after another.

mutmut hands a mutant's run the tests that reach the changed function as node ids in no
order (a set's), and pytest runs them in the order given: a module's tests then alternate
with another's, and the module's fixtures (test_backfill's and test_streams' syncs) are set
up again at each turn. Each run also stops at its first failure (``-x``), so a mutant a quick
test kills runs that test alone if it comes first. This plugin sorts the run's tests by
module, the quickest module first, and within a module the quickest test first, by what each
took (setup, call and teardown) in mutmut's first run of the unchanged code, which it records
in ``DURATIONS``; without that record, the modules are still run one after another.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

# mutmut's runs happen in its copy of the tree (``mutants/``), the current directory
DURATIONS = Path("mutant-test-durations.json")
# what mutmut names the run of the unchanged code that learns which test reaches what
STATS_RUN = "stats"

_took: defaultdict[str, float] = defaultdict(float)


def _run_is_stats() -> bool:
    return os.environ.get("MUTANT_UNDER_TEST") == STATS_RUN


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _run_is_stats():
        _took[report.nodeid] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _run_is_stats() and _took:
        DURATIONS.write_text(json.dumps(_took, indent=0, sort_keys=True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    took: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    by_module: defaultdict[str, float] = defaultdict(float)
    for item in items:
        by_module[item.nodeid.split("::")[0]] += took.get(item.nodeid, 0.0)

    def rank(item: pytest.Item) -> tuple[float, str, float]:
        module = item.nodeid.split("::")[0]
        return by_module[module], module, took.get(item.nodeid, 0.0)

    items.sort(key=rank)
