"""The test groups a developer can run alone (docs/development.md):

- offline: unit tests and in-process syncs against the emulator (no subprocess of the tap);
- cli: the installed console script, run as a user or Meltano runs it;
- e2e: Meltano runs, loaders, dbt builds and PostgreSQL.

e2e follows from the fixtures a test uses; cli is declared (``@pytest.mark.cli``) and checked
where the console script starts; what is neither is offline. ``python3 tasks.py test -m
offline`` (or ``cli``, ``e2e``) runs one group.

This is its own module, not conftest.py: the tests import their helpers as ``tests.conftest``
while pytest loads the same file as ``conftest``, two module objects; the test being run must
be recorded where both see it.
"""

from __future__ import annotations

import json
import os
import time
import typing as t
from collections import defaultdict
from pathlib import Path

import pytest

GROUPS = {
    "offline": "unit tests and in-process syncs (no subprocess of the tap, no Meltano)",
    "cli": "runs the tap's console script",
    "e2e": "Meltano, loaders, dbt and PostgreSQL",
}
_E2E_FIXTURES = {"postgres", "warehouse_url", "meltano_plugins"}


# Where a run writes every test's time, CPU and group as JSON, when set (the summary shows
# only the ten slowest): what a change to the suite's time is measured with, test by test.
TIMINGS_FILE = "ACCESSGOV_TEST_TIMINGS"


class _Running:
    item: pytest.Item | None = None
    cpu_mark = 0.0


def _cpu_seconds() -> float:
    """CPU time of this process (its emulators' threads among them) and of the processes it
    waited for (Meltano, the tap, the loaders, dbt under them); not a server that runs on
    (the configured PostgreSQL), nor a process left to end on its own (Spark's JVM, which
    pyspark does not wait for: docs/development.md)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class _Timings:
    """Each test's time (setup, call and teardown) and group, as the reports arrive: in the
    process that prints the summary, the only one under pytest-xdist that sees every test."""

    started = time.monotonic()
    seconds: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    group: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    for name, description in GROUPS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


# The order the groups are handed out in (pytest-xdist hands tests out in collection order).
ORDER = ("cli", "e2e", "offline")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its group, and hand the groups out in ``ORDER``: the e2e group
    before the offline one, since its tests are the long ones (seconds to minutes each), so
    that with several workers the short ones fill the end instead of one long test running
    alone; and the cli group before both, since a fresh clone's ``meltano install``, which
    only the e2e tests need, ends while its tests run (``python3 tasks.py test`` starts the
    install before the linters; measured from a fresh clone: the cli group keeps three
    workers 35-50 s, the install takes 40-60 s)."""
    for item in items:
        if _E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
        if not any(item.get_closest_marker(group) for group in ("cli", "e2e")):
            item.add_marker(pytest.mark.offline)
    items.sort(key=lambda item: ORDER.index(next(g for g in ORDER if item.get_closest_marker(g))))


def pytest_runtest_setup(item: pytest.Item) -> None:
    _Running.item = item


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> t.Iterator[None]:
    _Running.cpu_mark = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> t.Iterator[None]:
    """Each phase's report carries the CPU it used (``cpu_seconds``): the reports are what
    reaches the process that prints the summary, under pytest-xdist from every worker."""
    outcome = yield
    now = _cpu_seconds()
    outcome.get_result().user_properties.append(("cpu_seconds", now - _Running.cpu_mark))
    _Running.cpu_mark = now


def require_group(*groups: str) -> None:
    """Fail a test that starts a process its group does not allow, so that ``-m offline``
    never starts the console script or Meltano."""
    item = _Running.item
    if item is not None and not any(item.get_closest_marker(group) for group in groups):
        pytest.fail(
            f"{item.nodeid} starts a process of group {' or '.join(groups)}: "
            f"mark it @pytest.mark.{groups[0]}",
            pytrace=False,
        )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _Timings.seconds[report.nodeid] += report.duration
    _Timings.cpu[report.nodeid] += dict(report.user_properties).get("cpu_seconds", 0.0)
    _Timings.group.setdefault(
        report.nodeid, next((g for g in GROUPS if g in report.keywords), "offline")
    )


def write_timings(terminalreporter: pytest.TerminalReporter) -> None:
    """Where the run's time went: each group's tests, their time and their CPU added up (over
    all workers, so more than the wall clock when they run side by side), the ten slowest
    tests and the ten that used the most CPU (the suite is bound by CPU on a small machine:
    the second list says what a faster run must take from), so that the next slow test is
    seen when it lands."""
    if not _Timings.seconds:
        return
    if path := os.environ.get(TIMINGS_FILE):
        every_test = {
            test: {"seconds": seconds, "cpu": _Timings.cpu[test], "group": _Timings.group[test]}
            for test, seconds in _Timings.seconds.items()
        }
        Path(path).write_text(json.dumps(every_test, indent=1))
    write = terminalreporter.write_line
    wall = time.monotonic() - _Timings.started
    terminalreporter.section("where the time went", sep="-")
    write(f"{'group':<8} {'tests':>6} {'test time':>10} {'CPU':>7}")
    for name in (*GROUPS, "all"):
        tests = [test for test in _Timings.seconds if name in ("all", _Timings.group[test])]
        seconds = sum(_Timings.seconds[test] for test in tests)
        cpu = sum(_Timings.cpu[test] for test in tests)
        write(f"{name:<8} {len(tests):>6} {seconds:>9.0f}s {cpu:>6.0f}s")
    write(f"in {wall:.0f}s of wall clock")
    for title, measure in (("slowest", _Timings.seconds), ("most CPU", _Timings.cpu)):
        write(f"the ten tests of {title} (setup, call and teardown; wall clock, CPU):")
        for test in sorted(measure, key=lambda test: -measure[test])[:10]:
            write(
                f"{_Timings.seconds[test]:8.1f}s {_Timings.cpu[test]:7.1f}s  "
                f"{_Timings.group[test]:<7}  {test}"
            )
