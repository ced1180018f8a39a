"""The SDK's standard tap tests (CLI, discovery, connection, final state, per-stream schema
and record checks), with the suite's default settings (150 records a stream at most), run
against emulators of the service's newest shapes (the shared one), a 2024-2025 release's and
a release that changed a field's type on every endpoint (emulator/shapes.py)."""

from __future__ import annotations

from singer_sdk.testing import get_tap_test_class

from tap_accessgov.tap import TapAccessGov
from tests.conftest import shaped_emulator, shared_emulator, tap_config

TestTapAccessGov = get_tap_test_class(tap_class=TapAccessGov, config=tap_config(shared_emulator()))
TestTapAccessGovOlderShapes = get_tap_test_class(
    tap_class=TapAccessGov, config=tap_config(shaped_emulator("older"))
)
TestTapAccessGovChangedShapes = get_tap_test_class(
    tap_class=TapAccessGov, config=tap_config(shaped_emulator("changed"))
)
