"""harness/support.py, which the tests, the demo and the benchmarks share, and the benchmarks'
baseline client (benchmarks/raw_loop.py): the tenant -> settings mapping agrees with meltano.yml,
the PostgreSQL URL is read as libpq reads it, the emulator process starts, answers and stops."""

from __future__ import annotations

import functools
import json
import socket
import subprocess
import sys
from pathlib import Path

import psycopg.conninfo
import pytest
import yaml

from emulator import Dataset, Emulator
from harness.support import (
    PG_DEFAULTS,
    EmulatorDidNotStart,
    EmulatorProcess,
    emulator_environment_env,
    libpq_env,
    libpq_url,
    postgres_url,
    tap_config,
    tap_env,
)
from tests.conftest import (
    CREDENTIAL,
    EMULATOR_DEFAULTS,
    ROOT,
    SMALL_DATASET,
    default_dataset,
    ns,
)

RAW_LOOP = ROOT / "benchmarks" / "raw_loop.py"
PLAIN_SDK_TAP = "benchmarks.plain_sdk_tap"  # a module, run from the root: it imports the raw loop
LIBPQ_NAMES = {"host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "password": "PGPASSWORD"}


def meltano_yml() -> dict:
    return yaml.safe_load((ROOT / "meltano.yml").read_text())


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://postgres@127.0.0.1:5432/test",
        "postgresql://loader:s3cret@db.example:6543/warehouse",
        # what a URL must escape: @ : / % and spaces, in the user, the password and the database
        "postgresql+psycopg://us%40er:p%3As%2Fs%25w%40rd@db.example:5433/my%20db",
        "postgresql://app%2Bload:pass%20word@localhost/acme%2Fprod",
    ],
)
def test_libpq_env_reads_a_url_as_libpq_does(url: str) -> None:
    """The PG* variables say what libpq itself makes of the URL (its own parser, through
    psycopg): percent-escapes decoded in the user, the password and the database."""
    parsed = psycopg.conninfo.conninfo_to_dict(url.replace("+psycopg", ""))
    expected = {LIBPQ_NAMES[key]: str(value) for key, value in parsed.items() if key != "dbname"}
    expected |= {"PGDATABASE": str(parsed["dbname"])}
    assert libpq_env(url) == {"PGPORT": "5432", **expected}


def test_postgres_url_names_the_database_of_the_pg_variables() -> None:
    """The benchmarks' connection (postgres_url) reaches what the PG* variables name, with
    meltano.yml's target-postgres defaults for those unset, characters to escape included."""
    env = {
        "PGHOST": "db.example",
        "PGPORT": "6543",
        "PGUSER": "us@er",
        "PGPASSWORD": "p:s/s%w@rd",
        "PGDATABASE": "my db",
    }
    assert libpq_env(postgres_url(env)) == env
    assert libpq_env(postgres_url({})) == {k: v for k, v in PG_DEFAULTS.items() if v}
    loader = next(p for p in meltano_yml()["plugins"]["loaders"] if p["name"] == "target-postgres")
    declared = {
        s["env_aliases"][0]: str(s["value"]) for s in loader["settings"] if "env_aliases" in s
    }
    assert declared == PG_DEFAULTS


def test_meltano_yml_emulator_environment_is_the_default_tenant() -> None:
    """meltano.yml's `emulator` environment writes the tap's settings as literals (a user
    exports only the secret): they are what tap_config maps from the tenant `python -m
    emulator` serves by default, on its default port."""
    environment = next(e for e in meltano_yml()["environments"] if e["name"] == "emulator")
    (tap,) = environment["config"]["plugins"]["extractors"]
    literals = tap["config"]
    with Emulator(default_dataset(events=100), credential=CREDENTIAL) as emulator:
        mapped = tap_config(emulator)
        port = emulator.port
    assert set(literals) == set(mapped) - {"client_secret"}, "the secret is the one export"
    assert literals["client_id"] == mapped["client_id"]
    assert literals["api_url"] == mapped["api_url"].replace(
        f":{port}", f":{EMULATOR_DEFAULTS.port}"
    )
    # The default tenant ends at the current hour: its first event moves, the literal stays
    # before it.
    assert ns(literals["start_date"]) <= ns(mapped["start_date"])


def test_the_meltano_variables_are_the_tap_settings(emulator: Emulator) -> None:
    config = tap_config(emulator)
    assert tap_env(emulator) == {
        "TAP_ACCESSGOV_CLIENT_ID": config["client_id"],
        "TAP_ACCESSGOV_CLIENT_SECRET": config["client_secret"],
        "TAP_ACCESSGOV_API_URL": emulator.url,
        "TAP_ACCESSGOV_START_DATE": config["start_date"],
    }
    assert emulator_environment_env(emulator) == {
        "TAP_ACCESSGOV_CLIENT_SECRET": CREDENTIAL.client_secret,
        "TAP_ACCESSGOV_API_URL": emulator.url,
    }


def test_the_emulator_process_starts_on_a_free_port_answers_and_stops(tmp_path: Path) -> None:
    with EmulatorProcess(
        tmp_path, "tenant", "--events", "50", list_exclusion_entitlements=True
    ) as emulator:
        assert emulator.url.startswith("http://127.0.0.1:")
        config = json.loads(emulator.config_path.read_text())
        assert config == emulator.config
        assert config["exclusion_entitlements"] == emulator.tenant()["exclusion_entitlements"]
        assert {k: config[k] for k in ("client_id", "client_secret")} == {
            "client_id": CREDENTIAL.client_id,
            "client_secret": CREDENTIAL.client_secret,
        }
        assert emulator.control("events", {"count": 5})["total"] == 55
        assert emulator.control("stats")["api_requests"] == 0
    assert emulator.process.returncode is not None


def test_an_emulator_process_that_cannot_listen_says_so_at_once(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EmulatorDidNotStart, match=f"is port {port} free"):
            EmulatorProcess(tmp_path, "busy", "--events", "10", port=port, timeout=60)


def test_the_raw_loop_reads_the_whole_feed(tmp_path: Path) -> None:
    """The benchmarks' baseline is a program of its own: it reads every event."""
    with Emulator(Dataset(**SMALL_DATASET), credential=CREDENTIAL) as emulator:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(tap_config(emulator)))
        result = subprocess.run(
            [sys.executable, str(RAW_LOOP), str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert int(result.stdout) == len(emulator.dataset.feed_entries())
        assert emulator.stats["token_requests"] == 1


def test_the_plain_sdk_tap_and_its_floor_write_every_entry_the_raw_loop_reads(
    tmp_path: Path,
) -> None:
    """The ratios benchmark's two SDK sides (benchmarks/plain_sdk_tap.py): the plain tap writes
    each entry with its keys lifted and ends with the feed's bookmark; its floor (``--floor``)
    writes each entry exactly as the raw loop reads it, and no bookmark."""
    from benchmarks.raw_loop import pages

    with Emulator(Dataset(**SMALL_DATASET), credential=CREDENTIAL) as emulator:
        path = tmp_path / "config.json"
        config = tap_config(emulator)
        path.write_text(json.dumps(config))
        entries = [entry for page in pages(config) for entry in page]
        catalog = tmp_path / "catalog.json"  # as the benchmark passes it: the feed's key named
        catalog.write_text(
            subprocess.run(
                [sys.executable, "-m", PLAIN_SDK_TAP, "--config", str(path), "--discover"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout
        )
        assert json.loads(catalog.read_text())["streams"][0]["replication_key"] == "date"
        written = {}
        for side in ("plain", "floor"):
            flag = ["--floor"] if side == "floor" else []
            files = ["--config", str(path), "--catalog", str(catalog)]
            result = subprocess.run(
                [sys.executable, "-m", PLAIN_SDK_TAP, *flag, *files],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            )
            written[side] = [json.loads(line) for line in result.stdout.splitlines()]
    records = {
        side: [m["record"] for m in messages if m["type"] == "RECORD"]
        for side, messages in written.items()
    }
    bookmarks = {
        side: [m["value"] for m in messages if m["type"] == "STATE"]
        for side, messages in written.items()
    }
    assert len(entries) == len(emulator.dataset.feed_entries())
    assert records["floor"] == entries
    assert bookmarks["floor"][-1] == {"bookmarks": {"grant_feed": {}}}
    assert [(r["appId"], r["appUserId"], r["date"], r["feed"]) for r in records["plain"]] == [
        (e["feed"].get("appId"), e["feed"].get("appUserId"), e["feed"]["date"], e["feed"])
        for e in entries
    ]
    (stream,) = bookmarks["plain"][-1]["bookmarks"].values()
    assert stream["replication_key"] == "date"


def test_the_limit_reads_every_event_once_in_windows_of_equal_counts(tmp_path: Path) -> None:
    """The backfill benchmark's limit (raw_loop.py --dates, then --windows): the dates it
    cuts at are every event's, sorted, and the windows together read as many entries as the
    feed holds, with one token, each window ending on its last page."""
    with Emulator(Dataset(**SMALL_DATASET), credential=CREDENTIAL) as emulator:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(tap_config(emulator)))
        dates = tmp_path / "dates.json"
        run = functools.partial(subprocess.run, timeout=120, check=True, capture_output=True)
        run([sys.executable, str(RAW_LOOP), str(path), "--dates", str(dates)])
        entries = emulator.dataset.feed_entries()
        expected = sorted(ns(entry["feed"]["date"]) for entry in entries)
        assert [ns(date) for date in json.loads(dates.read_text())] == expected
        emulator.reset_stats()
        result = run([sys.executable, str(RAW_LOOP), str(path), "--windows", str(dates), "4"])
        assert int(result.stdout) == len(entries)
        assert emulator.stats["token_requests"] == 1
        # four windows of about equal counts, each read to its last page
        pages = -(-len(entries) // 4 // 100)
        assert emulator.stats["api_requests"] <= 4 * (pages + 1)


def test_the_raw_copy_loop_loads_every_event(postgres, warehouse_url: str, tmp_path: Path) -> None:
    connection, schema = postgres
    connection.execute(f'CREATE SCHEMA "{schema}"')
    with Emulator(Dataset(**SMALL_DATASET), credential=CREDENTIAL) as emulator:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(tap_config(emulator)))
        url = libpq_url(warehouse_url)
        subprocess.run(
            [sys.executable, str(RAW_LOOP), str(path), "--copy", url, f"{schema}.grant_feed"],
            timeout=120,
            check=True,
        )
        (rows,) = connection.execute(f"SELECT count(*) FROM {schema}.grant_feed").fetchone()
        assert rows == len(emulator.dataset.feed_entries())
