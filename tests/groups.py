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

import pytest

GROUPS = {
    "offline": "unit tests and in-process syncs (no subprocess of the tap, no Meltano)",
    "cli": "runs the tap's console script",
    "e2e": "Meltano, loaders, dbt and PostgreSQL",
}
_E2E_FIXTURES = {"postgres", "warehouse_url", "meltano_plugins"}


class _Running:
    item: pytest.Item | None = None


def pytest_configure(config: pytest.Config) -> None:
    for name, description in GROUPS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)
        if not any(item.get_closest_marker(group) for group in ("cli", "e2e")):
            item.add_marker(pytest.mark.offline)


def pytest_runtest_setup(item: pytest.Item) -> None:
    _Running.item = item


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
