"""What the tests, the demo and the benchmarks share, written once: the emulator as a process of
its own, the tap's settings for an emulated tenant (as a config and as Meltano's variables),
and the PostgreSQL warehouse they load into.

It imports nothing else of the project: the emulator runs as ``python -m emulator`` (the tests
pass their in-process one). The tests, the demo and the benchmarks, run as modules from the
repository's root (``python -m scripts.demo``, ``python -m benchmarks.benchmark``), import it
as ``harness.support``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import typing as t
import urllib.parse
import urllib.request
from pathlib import Path

if t.TYPE_CHECKING:
    from collections.abc import Mapping

    import psycopg

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TAP = BIN / "tap-accessgov"


# ----- the tenant -> the tap's settings -------------------------------------------------------


class TenantSource(t.Protocol):
    """An emulator, in-process (``emulator.Emulator``) or a process (``EmulatorProcess``): it
    describes its tenant in the service's terms and knows nothing of the tap's settings."""

    def tenant(self) -> dict[str, t.Any]: ...


def tap_config(source: TenantSource) -> dict[str, t.Any]:
    """The tap's settings for an emulated tenant. No exclusion_entitlements: the tap finds
    them through the catalog, as a user's run does."""
    tenant = source.tenant()
    return {
        "client_id": tenant["client_id"],
        "client_secret": tenant["client_secret"],
        "api_url": tenant["url"],
        "start_date": tenant["before_first_event"],
    }


def listed_exclusion_entitlements(source: TenantSource) -> list[dict[str, str]]:
    """The exclusion_entitlements setting naming the tenant's entitlements with exclusions
    (for runs that must not read the catalog first)."""
    return list(source.tenant()["exclusion_entitlements"])


def tap_env(source: TenantSource) -> dict[str, str]:
    """The same settings as the environment variables Meltano passes to the tap."""
    return {
        f"TAP_ACCESSGOV_{name.upper()}": value if isinstance(value, str) else json.dumps(value)
        for name, value in tap_config(source).items()
    }


def emulator_environment_env(source: TenantSource) -> dict[str, str]:
    """What points meltano.yml's ``emulator`` environment at an emulator: the secret (the one
    export the README names) and its URL (a free port rather than the environment's 8765).
    The environment's other settings are literals that tests/test_support.py holds equal to
    ``tap_config`` of the default ``python -m emulator`` tenant."""
    config = tap_config(source)
    return {
        "TAP_ACCESSGOV_CLIENT_SECRET": config["client_secret"],
        "TAP_ACCESSGOV_API_URL": config["api_url"],
    }


# ----- the emulator as a process --------------------------------------------------------------


class EmulatorDidNotStart(RuntimeError):
    """``python -m emulator`` exited or did not answer in time (a port in use, a bad option)."""


class EmulatorProcess:
    """``python -m emulator`` as its own process (the demo, the benchmarks): started on a free
    port (or the one given), ready once it answers, stopped with SIGTERM. Its tap config is
    also written to ``<workdir>/<name>.json`` for the tap's ``--config``."""

    def __init__(
        self,
        workdir: Path,
        name: str,
        *options: str,
        port: int = 0,
        list_exclusion_entitlements: bool = False,
        show_output: bool = False,
        timeout: float = 120,
    ) -> None:
        ready = workdir / f"{name}.ready"
        ready.unlink(missing_ok=True)
        self.name = name
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "emulator",
                "--port",
                str(port),
                "--ready-file",
                str(ready),
                *options,
            ],
            cwd=ROOT,
            stdout=None if show_output else subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise EmulatorDidNotStart(
                    f"the emulator {name} did not start"
                    + (f" (is port {port} free?)" if port else "")
                )
            time.sleep(0.05)
        self.url = ready.read_text().strip()
        self._tenant = self.control("tenant")  # it answers
        self.config = tap_config(self)
        if list_exclusion_entitlements:
            self.config["exclusion_entitlements"] = listed_exclusion_entitlements(self)
        self.config_path = workdir / f"{name}.json"
        self.config_path.write_text(json.dumps(self.config))

    def tenant(self) -> dict[str, t.Any]:
        return self._tenant

    def control(self, path: str, body: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        """One of the emulator's ``/_emulator/`` controls: GET without a body, POST with one."""
        request = urllib.request.Request(
            f"{self.url}/_emulator/{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="GET" if body is None else "POST",
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return t.cast("dict[str, t.Any]", json.loads(response.read()))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=30)

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ----- copies of the work tree ------------------------------------------------------------------


def checkout_copy(directory: Path) -> Path:
    """This checkout's tracked and new (not ignored) files in ``directory``, as they are now:
    what a clone of it would hold, with the work tree's changes (the README's fresh clone,
    a release, mutation testing's copies)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # a tracked file deleted in the work tree is left out
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, directory / name, follow_symlinks=False)
    return directory


# ----- Meltano's plugins ---------------------------------------------------------------------


def install_plugins(*plugin: str, installed: bool = False) -> None:
    """``meltano install`` of meltano.yml's plugins (all, or e.g. ``"loader", "target-postgres"``)
    as a user's lays them out, quick when they are already there: a fresh checkout has none
    (``installed``: all of them are, installed by the caller, and nothing is run). Nothing
    else: the dbt utilities run the models' package in place (meltano.yml). A failure ends
    with the tail of Meltano's output."""
    commands = [] if installed else [["install", *plugin]]
    for command in commands:
        result = subprocess.run(
            [str(BIN / "meltano"), *command],
            cwd=ROOT,
            env={**os.environ, "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false"},
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            msg = (
                f"meltano {command[0]} failed ({result.returncode}):\n"
                f"{result.stdout[-3000:]}{result.stderr[-3000:]}"
            )
            raise RuntimeError(msg)


# ----- the warehouse --------------------------------------------------------------------------

# target-postgres's connection defaults in meltano.yml (host, port, user, password, database)
PG_DEFAULTS = {
    "PGHOST": "127.0.0.1",
    "PGPORT": "5432",
    "PGUSER": "postgres",
    "PGPASSWORD": "",
    "PGDATABASE": "test",
}


def libpq_env(url: str) -> dict[str, str]:
    """The PG* variables for a PostgreSQL URL: what the shipped target-postgres and the
    dbt-postgres profile read. The URL's parts are percent-decoded, as libpq decodes them
    (a password with ``@`` or ``:`` is written ``%40``, ``%3A`` in a URL)."""
    parts = urllib.parse.urlsplit(libpq_url(url))
    unquote = urllib.parse.unquote
    env = {
        "PGHOST": unquote(parts.hostname or "127.0.0.1"),
        "PGPORT": str(parts.port or 5432),
        "PGUSER": unquote(parts.username or "postgres"),
        "PGDATABASE": unquote(parts.path.lstrip("/")) or "postgres",
    }
    if parts.password:
        env["PGPASSWORD"] = unquote(parts.password)
    return env


def postgres_url(env: Mapping[str, str] = os.environ) -> str:
    """The SQLAlchemy URL of the database the PG* variables name, with meltano.yml's defaults
    for those unset: where the shipped target-postgres loads when nothing else is said."""
    pg = {name: env.get(name) or default for name, default in PG_DEFAULTS.items()}
    quote = urllib.parse.quote
    password = f":{quote(pg['PGPASSWORD'], safe='')}" if pg["PGPASSWORD"] else ""
    return (
        f"postgresql+psycopg://{quote(pg['PGUSER'], safe='')}{password}@{pg['PGHOST']}:"
        f"{pg['PGPORT']}/{quote(pg['PGDATABASE'], safe='')}"
    )


def answers(url: str, timeout: float = 5) -> bool:
    """Whether anything accepts connections where a PostgreSQL URL points (its host and port,
    or the Unix socket in its host directory). Nothing there is what a fresh machine has;
    something there that then refuses the connection is a configuration to fix, not this."""
    env = libpq_env(url)
    host, port = env["PGHOST"], int(env["PGPORT"])
    try:
        if host.startswith("/"):
            with socket.socket(socket.AF_UNIX) as unix:
                unix.settimeout(timeout)
                unix.connect(f"{host}/.s.PGSQL.{port}")
        else:
            socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg://``) as libpq and psycopg take it."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def connect(url: str) -> psycopg.Connection[tuple[t.Any, ...]]:
    """An autocommit connection to the database of a PostgreSQL (or SQLAlchemy) URL."""
    import psycopg

    return psycopg.connect(libpq_url(url), autocommit=True)


class Warehouse:
    """Schemas of one process in a PostgreSQL database (``<prefix>_<pid>_*``), each made on
    demand and all dropped at ``close()``: the benchmarks' loads."""

    def __init__(self, url: str | None = None, prefix: str = "bench") -> None:
        self.url = url or postgres_url()
        self.connection = connect(self.url)
        self.prefix = f"{prefix}_{os.getpid()}"
        self.schemas: list[str] = []

    def new_schema(self, name: str) -> str:
        schema = f"{self.prefix}_{name}_{len(self.schemas)}"
        self.connection.execute(f"CREATE SCHEMA {schema}")
        self.schemas.append(schema)
        return schema

    def rows(self, table: str) -> int:
        row = self.connection.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])

    def drop(self, schema: str) -> None:
        self.connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def close(self) -> None:
        for schema in self.schemas:
            self.drop(schema)
        self.connection.close()
