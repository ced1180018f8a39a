"""The command line's side of failures: input files read with one clear line when they are
not JSON objects, and every failure the tap explains ended in one line and exit code 1.

Why: a data engineer reads the last lines of a scheduler's log, and ``meltano config test``
shows only the last line a plugin logs; a 40-line traceback hides the one fact that matters.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import typing as t
from pathlib import Path

from singer_sdk.exceptions import ConfigValidationError, FatalAPIError

from tap_accessgov.auth import AuthenticationError
from tap_accessgov.output import OutputClosedError


class InputFileError(Exception):
    """A --config, --state or --catalog file that cannot be read as a JSON object."""


def read_json_object(text: str, what: str, name: str) -> dict[str, t.Any]:
    """The JSON object in ``text``, or an InputFileError naming the file and the problem."""
    if not text.strip():
        msg = f"{what} file {name}: is empty"
        raise InputFileError(msg)
    try:
        value = json.loads(text)
    except ValueError as exc:
        msg = f"{what} file {name}: is not JSON ({exc})"
        raise InputFileError(msg) from None
    if not isinstance(value, dict):
        msg = f"{what} file {name}: is not a JSON object"
        raise InputFileError(msg)
    return value


def read_json_file(path: str, what: str) -> dict[str, t.Any]:
    """The JSON object in the file at ``path`` (see read_json_object)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"{what} file {path}: not found"
        raise InputFileError(msg) from None
    except (OSError, UnicodeDecodeError) as exc:
        problem = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        msg = f"{what} file {path}: cannot be read ({problem})"
        raise InputFileError(msg) from None
    return read_json_object(text, what, path)


def checked_json_file(file: t.IO[str] | None, what: str) -> t.IO[str] | None:
    """``file`` read once and checked (see read_json_object), handed back as the SDK reads it."""
    if file is None:
        return None
    text = file.read()
    read_json_object(text, what, file.name)
    return io.StringIO(text)


@contextlib.contextmanager
def failing_in_one_line(logger: logging.Logger) -> t.Iterator[None]:
    """A failure the tap explains (bad config or input file, authentication, an API error
    after retries, a loader that stopped reading) ends in one line naming what is wrong,
    exit code 1; the traceback is at DEBUG."""
    try:
        yield
    except ConfigValidationError as exc:
        # One line, so that `meltano config test`, which shows the last one, shows all.
        logger.error("Config validation failed: %s", "; ".join(exc.errors))
        sys.exit(1)
    except InputFileError as exc:
        logger.error("%s", exc)
        sys.exit(1)
    except (AuthenticationError, FatalAPIError) as exc:
        logger.debug("Run failed", exc_info=True)
        logger.error("Run failed: %s", exc)
        sys.exit(1)
    except OutputClosedError:
        # Nothing more can be written; without this, Python reports the unflushed stdout
        # once more at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        logger.error(
            "The output was closed: the loader reading this tap's output stopped reading "
            "(see its own log for why). Stopping."
        )
        sys.exit(1)
