"""The access-history models (transform/) end to end, on both engines: the emulator, Meltano
loading it, dbt building the models, and every model compared row for row with the
emulator's own ground truth (emulator/lifecycle.py applied to its history); then new events,
an incremental run, a second build, and the same comparisons again.

- DuckDB: `meltano run tap-accessgov target-jsonl dbt-duckdb:build` (the embedded default);
- PostgreSQL: `meltano run accessgov`, the shipped job (target-postgres, then dbt-postgres).
"""

from __future__ import annotations

import os
import typing as t
from collections import Counter
from pathlib import Path

import pytest

from emulator import Dataset, Emulator, lifecycle
from emulator.timefmt import format_ns
from tests.conftest import (
    CREDENTIAL,
    E2E_DATASET,
    POSTGRES_URL,
    libpq_env,
    meltano,
    tap_env,
)

NEW_EVENTS = 150


@pytest.fixture
def emulator() -> t.Iterator[Emulator]:
    with Emulator(Dataset(**E2E_DATASET), credential=CREDENTIAL) as emu:
        yield emu


def us(ns: int | None) -> int | None:
    """The engines keep microseconds: the tap's nanoseconds are truncated on the way in."""
    return None if ns is None else ns // 1000


def as_of_instant(ds: Dataset) -> int:
    """An instant on which a grant is revoked and re-granted: the boundary case of as-of."""
    intervals = ds.intervals()
    starts = {(i[:3], i.granted_at) for i in intervals}
    return next(
        i.revoked_at
        for i in intervals
        if i.revoked_at is not None and (i[:3], i.revoked_at) in starts
    )


def truth(ds: Dataset, as_of: int) -> dict[str, Counter]:
    """What each model must hold, from the emulator's own history."""
    intervals = ds.intervals()
    opened = {(i[:3], i.granted_at) for i in intervals}
    events = lifecycle.distinct_events(ds.feed_object(ds.event(n)) for n in range(ds.total))
    return {
        "grant_intervals": Counter(
            (*i[:3], us(i.granted_at), us(i.revoked_at), i.granted_ticket_id, i.revoked_ticket_id)
            for i in intervals
        ),
        "current_grants": Counter(
            (*i[:3], us(i.granted_at), i.granted_ticket_id) for i in lifecycle.held_at(intervals)
        ),
        "grants_without_ticket": Counter(
            (app, entitlement, user, us(date), ((app, entitlement, user), date) in opened)
            for (app, entitlement, user, kind, date), ticket in events.items()
            if kind == lifecycle.ADDED and ticket is None
        ),
        "excluded_users": Counter(tuple(row.values()) for row in ds.excluded_users()),
        "access_as_of": Counter(
            (*i[:3], us(i.granted_at), i.granted_ticket_id)
            for i in lifecycle.held_at(intervals, as_of)
        ),
    }


QUERIES = {
    "grant_intervals": "SELECT app_id, app_entitlement_id, app_user_id, {granted_at}, "
    "{revoked_at}, granted_ticket_id, revoked_ticket_id FROM {schema}.grant_intervals",
    "current_grants": "SELECT app_id, app_entitlement_id, app_user_id, {granted_at}, "
    "granted_ticket_id FROM {schema}.current_grants",
    "grants_without_ticket": "SELECT app_id, app_entitlement_id, app_user_id, {granted_at}, "
    "opened_access FROM {schema}.grants_without_ticket",
    "excluded_users": "SELECT app_id, app_entitlement_id, app_user_id, user_id, display_name, "
    "email, status, directory_status, holds_entitlement FROM {schema}.excluded_users",
    "access_as_of": "SELECT app_id, app_entitlement_id, app_user_id, {granted_at}, "
    "granted_ticket_id FROM {schema}.access_as_of",
}


def compare(query: t.Callable[[str], list[tuple]], expected: dict[str, Counter]) -> None:
    for model, sql in QUERIES.items():
        got = Counter(query(sql))
        assert got == expected[model], (
            f"{model}: {sum((got - expected[model]).values())} rows too many, "
            f"{sum((expected[model] - got).values())} missing; e.g. "
            f"{list(got - expected[model])[:2]} / {list(expected[model] - got)[:2]}"
        )
    assert expected["grant_intervals"]
    assert expected["excluded_users"]


def base_env(emulator: Emulator, tmp_path: Path, as_of: int) -> dict[str, str]:
    return {
        **os.environ,
        **tap_env(emulator),
        "MELTANO_SEND_ANONYMOUS_USAGE_STATS": "false",
        "MELTANO_ENVIRONMENT": "emulator",
        "MELTANO_DATABASE_URI": f"sqlite:///{tmp_path / 'meltano.db'}",
        "ACCESSGOV_AS_OF": format_ns(as_of),
    }


def duckdb_models(
    emulator: Emulator, tmp_path: Path, as_of: int
) -> tuple[dict[str, str], t.Callable[[str], list[tuple]]]:
    """Meltano's environment for target-jsonl and dbt-duckdb in ``tmp_path``, and a query on
    the built models (``{schema}``, ``{granted_at}``, ``{revoked_at}`` filled in)."""
    import duckdb

    database = tmp_path / "models.duckdb"
    env = base_env(emulator, tmp_path, as_of) | {
        "TARGET_JSONL_DESTINATION_PATH": str(tmp_path / "jsonl"),
        # the dbt-duckdb utility's settings (meltano.yml)
        "DBT_DUCKDB_JSONL_DIR": str(tmp_path / "jsonl"),
        "DBT_DUCKDB_DATABASE_PATH": str(database),
        "DBT_DUCKDB_SCHEMA": "access",
    }
    (tmp_path / "jsonl").mkdir()

    def query(sql: str) -> list[tuple]:
        with duckdb.connect(str(database), read_only=True) as db:
            return db.execute(
                sql.format(
                    schema="access",
                    granted_at="epoch_us(granted_at)",
                    revoked_at="epoch_us(revoked_at)",
                )
            ).fetchall()

    return env, query


def postgres_models(
    emulator: Emulator, tmp_path: Path, as_of: int, connection: t.Any, schema: str
) -> tuple[dict[str, str], t.Callable[[str], list[tuple]]]:
    """Meltano's environment for target-postgres into ``schema`` and dbt-postgres into
    ``<schema>_models``, and a query on the built models."""
    env = (
        base_env(emulator, tmp_path, as_of)
        | libpq_env(POSTGRES_URL)
        | {
            "TARGET_POSTGRES_SQLALCHEMY_URL": POSTGRES_URL,
            "TARGET_POSTGRES_DEFAULT_TARGET_SCHEMA": schema,
            # the dbt-postgres utility's settings (meltano.yml)
            "DBT_POSTGRES_SOURCE_SCHEMA": schema,
            "DBT_POSTGRES_SCHEMA": schema + "_models",
        }
    )

    def query(sql: str) -> list[tuple]:
        def epoch(column: str) -> str:
            return f"(extract(epoch FROM {column}) * 1000000)::bigint"

        return connection.execute(
            sql.format(
                schema=schema + "_models",
                granted_at=epoch("granted_at"),
                revoked_at=epoch("revoked_at"),
            )
        ).fetchall()

    return env, query


def test_models_on_duckdb_equal_the_emulators_truth(
    meltano_plugins: None, emulator: Emulator, tmp_path: Path
) -> None:
    ds = emulator.dataset
    as_of = as_of_instant(ds)
    env, query = duckdb_models(emulator, tmp_path, as_of)

    meltano("run", "tap-accessgov", "target-jsonl", "dbt-duckdb:build", env=env)
    compare(query, truth(ds, as_of))

    emulator.add_events(count=NEW_EVENTS)
    meltano("run", "tap-accessgov", "target-jsonl", "dbt-duckdb:build", env=env)
    # JSONL appended the bookmark instant's events again and every exclusion and user: the
    # models must not count them twice.
    lines = (tmp_path / "jsonl" / "grant_feed.jsonl").read_text().count("\n")
    assert lines > ds.total
    compare(query, truth(ds, as_of))


def test_models_on_postgres_equal_the_emulators_truth(
    meltano_plugins: None, emulator: Emulator, postgres, tmp_path: Path
) -> None:
    connection, schema = postgres
    ds = emulator.dataset
    as_of = as_of_instant(ds)
    env, query = postgres_models(emulator, tmp_path, as_of, connection, schema)

    meltano("run", "accessgov", env=env)  # the shipped job: load, then build
    compare(query, truth(ds, as_of))

    emulator.add_events(count=NEW_EVENTS)
    meltano("run", "accessgov", env=env)
    compare(query, truth(ds, as_of))
