"""The SDK's standard tap tests (CLI, discovery, connection, final state, per-stream schema
and record checks), run against the shared emulator."""

from __future__ import annotations

from singer_sdk.testing import SuiteConfig, get_tap_test_class

from tap_accessgov.tap import TapAccessGov
from tests.conftest import shared_emulator, tap_config

TestTapAccessGov = get_tap_test_class(
    tap_class=TapAccessGov,
    config=tap_config(shared_emulator()),
    suite_config=SuiteConfig(max_records_limit=None),
)
