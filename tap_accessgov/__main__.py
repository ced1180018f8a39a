"""``python -m tap_accessgov``: the same command line as the ``tap-accessgov`` script (for a
Python whose scripts directory is not on PATH, or to name the interpreter explicitly)."""

from tap_accessgov.tap import TapAccessGov

TapAccessGov.cli()
