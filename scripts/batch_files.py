#!/usr/bin/env python3
"""The ``batch-files`` utility's ``remove`` command (meltano.yml): the BATCH files of the
warehouse job's load (``tap-accessgov--batch``), removed once target-postgres has loaded them.

singer-sdk's targets read the files a BATCH message names and never delete them (sdk#3064
leaves that to the orchestrator), so without this step they would pile up run after run, a
first sync's as large as its data. The job runs it right after the load: a load that failed
leaves its files until the next job's removal, and no later run loads them (a BATCH message
names its own files, each name holding a new UUID). Only the files the tap names
(``tap-accessgov--<stream>-<uuid>-<n>.json.gz`` or ``.jsonl``) are removed, never anything else in the
directory. The standard library only: the utility runs it with the machine's ``python3``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The names of the tap's batch files: the SDK's (singer_sdk.contrib.batch_encoder_jsonl),
# and the tap's own without compression (tap_accessgov/output.py, PlainJSONLinesBatcher).
PATTERNS = ("tap-accessgov--*.json.gz", "tap-accessgov--*.jsonl")
USAGE = "usage: python3 scripts/batch_files.py remove DIRECTORY"


def remove(directory: Path) -> int:
    """Remove the tap's BATCH files in ``directory`` (none if it does not exist): how many."""
    removed = 0
    for pattern in PATTERNS:
        for path in directory.glob(pattern):
            if path.is_file():
                path.unlink()
                removed += 1
    return removed


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "remove" or not argv[1]:
        print(USAGE, file=sys.stderr)
        return 2
    directory = Path(argv[1])
    print(f"Removed {remove(directory)} BATCH file(s) of the load from {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
