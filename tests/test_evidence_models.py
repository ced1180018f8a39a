"""The evidence models (issue 29: tasks, their approvals, access reviews, grants without
approval, each current grant's evidence, access review decisions) end to end on DuckDB and
PostgreSQL, compared row for row with the emulator's truth (``Dataset.tasks()``,
``approvals()``, ``access_reviews()``, ``grants_without_approval()``, its grant history).

The feed's ticket ids are mixed (a task's id or its numeric id). Between the two runs
approvers decide open tasks (the close-tasks control) and new grant events bring new tasks;
after the second run the warehouse holds every task's latest state, though JSONL appended
each version the tap delivered."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import shutil
import time
import typing as t
from collections import Counter
from pathlib import Path

import pytest

from emulator import Dataset, Emulator, lifecycle
from emulator.grants import CurrentGrant
from emulator.system_log import Kind, LogEvent
from emulator.timefmt import format_ns, parse_rfc3339
from tests import removals
from tests.conftest import E2E_DATASET, ROOT, meltano
from tests.team_project import builds_the_package_on_duckdb, builds_the_package_on_postgres
from tests.test_models import (
    NAMED,
    NEW_EVENTS,
    as_of_instant,
    before_the_feed,
    catalog_names,
    check_plans_stay_linear,
    compare_service_activity,
    duckdb_models,
    duckdb_query,
    postgres_epoch_us,
    postgres_models,
    truth,
    us,
)
from tests.test_models import QUERIES as MODEL_QUERIES
from tests.test_models import compare as compare_access_history

KINDS_ABOUT_A_GRANT = ("grant", "revoke", "certify")
OUTCOME_KINDS = (*KINDS_ABOUT_A_GRANT, "offboarding")


def at_us(value: str | None) -> int | None:
    return None if not value else us(parse_rfc3339(value))


def kind_of(task: dict[str, t.Any]) -> tuple[str, dict[str, t.Any]]:
    ((kind, body),) = task["type"].items()
    return kind, body or {}


def approval_steps(task: dict[str, t.Any]) -> list[tuple[str, str, int | None]]:
    """(verdict, user id, when in µs) of each approval step, oldest first."""
    steps = [
        (verdict, action["userId"], at_us(action[f"{verdict}At"]))
        for step in (task.get("policy") or {}).get("history", [])
        for verdict, action in step["approval"].items()
        if verdict in ("approved", "denied")
    ]
    return sorted(steps, key=lambda step: (step[2] or 0, step[1]))


def certified_grant(task: dict[str, t.Any]) -> tuple[str, str, str]:
    """(app, entitlement, app user) a certify task decides."""
    body = task["type"]["certify"]
    return body["appId"], body["appEntitlementId"], body["appUserId"]


class GrantsRead(t.NamedTuple):
    """The service's grants as the last run that read ``grants`` in full saw them, and an
    instant (ns) by which that snapshot was read: taken after the run, before anything
    changes on the service."""

    at: int
    grants: dict[tuple[str, str, str], CurrentGrant]


def grants_read(ds: Dataset) -> GrantsRead:
    """Right after a run that read ``grants``: what it read, and by when."""
    return GrantsRead(time.time_ns(), {grant[:3]: grant for grant in ds.current_grants()})


def decertified_and_held(
    ds: Dataset, task: dict[str, t.Any], read: GrantsRead
) -> tuple[int | None, CurrentGrant | None]:
    """For a certify task that decertified a grant in a review now closed: the close (ns)
    and the grant if the service's latest snapshot holds it and was read after the close;
    (None, None) for any other task."""
    body = task["type"]["certify"]
    review = next(r for r in ds.access_reviews() if r["id"] == body["accessReviewId"])
    if body.get("outcome") != "CERTIFY_OUTCOME_DECERTIFIED" or not review.get("closedAt"):
        return None, None
    closed = parse_rfc3339(review["closedAt"])
    return closed, read.grants.get(certified_grant(task)) if read.at > closed else None


def decertified_before_the_feed_still_held(ds: Dataset, read: GrantsRead) -> list[str]:
    """The certify tasks whose decertified grant, made before the feed began (the feed
    knows it not), the service's snapshot read after the review closed still holds."""
    found = []
    for task in ds.tasks():
        if kind_of(task)[0] == "certify":
            closed, held = decertified_and_held(ds, task, read)
            if closed is not None and held is not None and not held.feed_knows:
                found.append(task["id"])
    return found


def granted_by(ds: Dataset) -> dict[tuple[str, str], str]:
    """Who made each grant, by (entitlement, account) as the system log names them: the actor
    of the latest successful grant logged for it, unless a revocation came after it."""
    latest: dict[tuple[str, str], LogEvent] = {}
    for event in ds.system_log():
        kinds = [kind for kind, _ in event.resources[:2]]
        if event.ok and event.kind in (Kind.GRANT, Kind.REVOKE) and kinds == GRANT_RESOURCES:
            pair = (event.resources[0][1], event.resources[1][1])
            if pair not in latest or (event.time, event.uid) > (
                latest[pair].time,
                latest[pair].uid,
            ):
                latest[pair] = event
    return {pair: e.actor.uid for pair, e in latest.items() if e.kind == Kind.GRANT}


GRANT_RESOURCES = ["AppEntitlement", "AppUser"]


def evidence_truth(ds: Dataset, read: GrantsRead) -> dict[str, Counter]:
    tasks = ds.tasks()
    by_ref = {ref: task for task in tasks for ref in (task["id"], task["numericId"])}
    reviews = {review["id"]: review for review in ds.access_reviews()}
    intervals = ds.intervals()

    def task_row(task: dict[str, t.Any]) -> tuple:
        kind, body = kind_of(task)
        about = body if kind in KINDS_ABOUT_A_GRANT else {}
        decided = body if kind in OUTCOME_KINDS else {}
        refs = task.get("externalRefs") or [{}]
        return (
            task["id"],
            int(task["numericId"]),
            kind,
            task["state"],
            decided.get("outcome"),
            at_us(decided.get("outcomeTime")),
            task.get("createdByUserId"),
            task.get("userId"),
            task.get("description") or None,
            task.get("emergencyAccess", False),
            refs[0].get("url"),
            about.get("appId"),
            about.get("appEntitlementId"),
            about.get("appUserId"),
            about.get("identityUserId"),
            about.get("accessReviewId"),
        )

    # The grants held now are the service's (current_grants); the feed's ADDED opened those
    # the feed knows, the service's own start and originating ticket the others.
    held_per_feed = {interval[:3]: interval for interval in lifecycle.held_at(intervals)}
    made_by = granted_by(ds)

    def evidence(grant: CurrentGrant) -> tuple:
        if (interval := held_per_feed.get(grant[:3])) is not None:
            granted_at, ticket_id = interval.granted_at, interval.granted_ticket_id
        else:
            granted_at, ticket_id = grant.created_at, grant.originating_ticket_id
        task = by_ref.get(ticket_id or "")
        approved = [step for step in approval_steps(task or {}) if step[0] == "approved"]
        last = approved[-1] if approved else (None, None, None)
        refs = (task or {}).get("externalRefs") or [{}]
        return (
            *grant[:3],
            us(granted_at),
            ticket_id,
            task and task["id"],
            task and task.get("createdByUserId"),
            (task or {}).get("description") or None,
            last[1],
            last[2],
            task and task.get("emergencyAccess", False),
            refs[0].get("url"),
            made_by.get((f"{grant[0]}/{grant[1]}", f"{grant[0]}/{grant[2]}")),
        )

    def still_held(task: dict[str, t.Any]) -> bool:
        """Decertified, and held after the review closed: per the feed at the close, or per
        the service's snapshot read after the close, since a start by the close (or an
        unknown start, as the models read a missing one)."""
        closed, held = decertified_and_held(ds, task, read)
        if closed is None:
            return False
        if held is not None and (
            held.created_at is None or us(held.created_at) <= us(closed)  # type: ignore[operator]
        ):
            return True
        return any(
            i[:3] == certified_grant(task)
            and (i.granted_at is None or us(i.granted_at) <= us(closed))  # type: ignore[operator]
            and (i.revoked_at is None or us(i.revoked_at) > us(closed))  # type: ignore[operator]
            for i in intervals
        )

    def decision(task: dict[str, t.Any]) -> tuple:
        body = task["type"]["certify"]
        steps = approval_steps(task)
        return (
            body["accessReviewId"],
            task["id"],
            body["appId"],
            body["appEntitlementId"],
            body["appUserId"],
            body.get("identityUserId"),
            steps[-1][1] if steps else None,
            body.get("outcome"),
            at_us(body.get("outcomeTime")),
            still_held(task),
        )

    return {
        "stg_tasks": Counter(map(task_row, tasks)),
        "stg_task_approvals": Counter(
            (
                row["task_id"],
                int(row["numeric_id"]),
                row["verdict"],
                row["user_id"],
                at_us(row["at"]),
            )
            for row in ds.approvals()
        ),
        "stg_access_reviews": Counter(
            (review["id"], review["state"], at_us(review.get("closedAt")))
            for review in reviews.values()
        ),
        "grants_without_approval": Counter(
            (
                row["app_id"],
                row["app_entitlement_id"],
                row["app_user_id"],
                at_us(row["granted_at"]),
                row["ticket_id"] or None,
                row["reason"],
            )
            for row in ds.grants_without_approval()
        ),
        "grant_evidence": Counter(map(evidence, ds.current_grants())),
        "access_review_decisions": Counter(
            decision(task) for task in tasks if kind_of(task)[0] == "certify"
        ),
    }


QUERIES = {
    "stg_tasks": "SELECT task_id, numeric_id, task_type, state, outcome, {ts_outcome_at}, "
    "requested_by_user_id, subject_user_id, justification, emergency_access, "
    "external_reference, app_id, app_entitlement_id, app_user_id, identity_user_id, "
    "access_review_id FROM {schema}.stg_tasks",
    "stg_task_approvals": "SELECT task_id, numeric_id, verdict, user_id, {ts_decided_at} "
    "FROM {schema}.stg_task_approvals",
    "stg_access_reviews": "SELECT access_review_id, state, {ts_closed_at} "
    "FROM {schema}.stg_access_reviews",
    "grants_without_approval": "SELECT app_id, app_entitlement_id, app_user_id, "
    "{ts_granted_at}, ticket_id, reason FROM {schema}.grants_without_approval",
    "grant_evidence": "SELECT app_id, app_entitlement_id, app_user_id, {ts_granted_at}, "
    "ticket_id, task_id, requested_by_user_id, justification, approved_by_user_id, "
    "{ts_approved_at}, emergency_access, external_reference, granted_by_user_id "
    "FROM {schema}.grant_evidence",
    "access_review_decisions": "SELECT access_review_id, task_id, app_id, app_entitlement_id, "
    "app_user_id, subject_user_id, reviewer_user_id, outcome, {ts_decided_at}, "
    "decertified_still_held FROM {schema}.access_review_decisions",
}


# ``{ts_<column>}`` in a query: the column as epoch microseconds, in each engine's SQL.
ENGINES = {
    "duckdb": "epoch_us({column})",
    "postgres": postgres_epoch_us("{column}"),
}


def compare(
    query: t.Callable[[str], list[tuple]], engine: str, ds: Dataset, read: GrantsRead
) -> None:
    expected = evidence_truth(ds, read)
    reasons = Counter(row[-1] for row in expected["grants_without_approval"])
    assert set(reasons) == {"no_ticket", "ticket_not_found", "not_granted", "self_approved"}
    # Decertified grants older than the feed that the service still holds: only the service's
    # grants (current_grants) show them still held.
    older = decertified_before_the_feed_still_held(ds, read)
    assert older
    assert all(row[-1] for row in expected["access_review_decisions"] if row[1] in older)
    assert any(row[-1] for row in expected["grant_evidence"]), "the log names who granted"
    for model, sql in QUERIES.items():
        check(query, engine, model, sql, expected[model])


def check(
    query: t.Callable[[str], list[tuple[t.Any, ...]]],
    engine: str,
    model: str,
    sql: str,
    want: Counter[tuple[t.Any, ...]],
) -> None:
    """The model's rows equal ``want``, else the first differing columns and examples."""
    got = Counter(query(sql))
    extra, missing = got - want, want - got
    by_first = {row[0]: row for row in missing}
    differing = [
        [(n, a, b) for n, (a, b) in enumerate(zip(row, by_first[row[0]], strict=True)) if a != b]
        for row in list(extra)[:3]
        if row[0] in by_first
    ]
    assert got == want, (
        f"{differing} "
        f"{engine} {model}: {sum(extra.values())} rows too many, "
        f"{sum(missing.values())} missing; e.g. {list(extra)[:2]} / {list(missing)[:2]}"
    )


def between_runs(emulator: Emulator) -> None:
    """Approvers decide open tasks; new grant events (dated after the feed's last, and now)
    bring new tasks."""
    assert emulator.close_tasks(count=12)
    emulator.add_events(count=40)
    now = datetime.datetime.now(datetime.UTC)
    emulator.add_events(dates=[now + datetime.timedelta(milliseconds=n) for n in range(20)])


@pytest.fixture
def tenant(make_emulator: t.Callable[..., Emulator]) -> Emulator:
    return make_emulator(Dataset(**E2E_DATASET, ticket_ids="mixed"))


def engine_query(query: t.Callable[[str], list[tuple]], engine: str) -> t.Callable[[str], list]:
    """The models' query with ``{ts_<column>}`` written as the engine's epoch microseconds."""
    template = ENGINES[engine]

    def run(sql: str) -> list[tuple]:
        sql = re.sub(r"\{ts_(\w+)\}", lambda m: template.format(column=m[1]), sql)
        return query(sql)

    return run


def test_access_history_evidence_and_removals_on_duckdb_equal_the_emulators_truth(
    meltano_plugins: None, tenant: Emulator, tmp_path: Path
) -> None:
    """`meltano run tap-accessgov target-jsonl dbt-duckdb:build-and-prune` through the
    removals scenario (tests/removals.py: removals, a killed run, an entitlement back), every
    model of access history equal to the truth after each build, and of evidence after the
    first two: unset fields sent empty ("", false, 0, UNKNOWN) by the first run and omitted by
    the second, as a service release may change its marshalling (the same answers from files
    of one shape and then of both), new events and decided tasks between them
    (``between_runs``), the vendor's mix after. After the first, a team's own dbt project
    builds the package over the same files (tests/team_project.py). Then, on a copy of the
    files, builds as of before the feed with an app the catalog no longer lists, and without
    a complete snapshot of grants; last, on the files themselves, a ``grants`` snapshot read
    before a review closed (``a_review_closes_after_grants_were_read``)."""
    ds = tenant.dataset
    as_of = as_of_instant(ds)
    env, query = duckdb_models(tenant, tmp_path, as_of)
    evidence = engine_query(query, "duckdb")
    jsonl = tmp_path / "jsonl"

    def after_first() -> None:
        compare(evidence, "duckdb", ds, grants_read(ds))
        builds_the_package_on_duckdb(tmp_path / "package", jsonl, tmp_path / "models.duckdb", as_of)

    def after_second() -> None:
        # JSONL appended the bookmark instant's events again and each task as often as the
        # tap delivered it: the models must count none of them twice.
        lines = (jsonl / "grant_feed.jsonl").read_text().count("\n")
        assert lines > ds.total
        assert evidence("SELECT max(times_loaded) FROM {schema}.stg_tasks")[0][0] >= 2
        compare_service_activity(query, ds)  # the first run's reads among them
        compare(evidence, "duckdb", ds, grants_read(ds))
        tenant.emit_unpopulated = None  # the vendor's mix from here on

    tenant.emit_unpopulated = True
    removals.scenario(
        tenant,
        query,
        removals.jsonl_copies(jsonl),
        lambda: meltano(
            "run", "tap-accessgov", "target-jsonl", "dbt-duckdb:build-and-prune", env=env
        ),
        lambda: removals.killed_run(tenant, env, "tap-accessgov", "target-jsonl"),
        # the two commands the combined one stands for, each a task of its own
        lambda: meltano("run", "dbt-duckdb:build", "dbt-duckdb:prune", env=env),
        removals.Alongside(after_first, lambda: changes_between_runs(tenant), after_second),
    )

    builds_before_the_feed_and_without_grants(ds, env, tmp_path)

    a_review_closes_after_grants_were_read(
        ds,
        "duckdb",
        evidence,
        lambda: meltano(
            "run", "tap-accessgov", "target-jsonl", "dbt-duckdb:build", env=env | NOT_GRANTS
        ),
    )


def changes_between_runs(tenant: Emulator) -> None:
    """Before the second run: new events and decided tasks (``between_runs``), and unset
    fields omitted from here on."""
    tenant.add_events(count=NEW_EVENTS)
    between_runs(tenant)
    tenant.emit_unpopulated = False


def builds_before_the_feed_and_without_grants(
    ds: Dataset, env: dict[str, str], tmp_path: Path
) -> None:
    """On a copy of target-jsonl's files after the second run, into a database of its own:

    - an app the catalog no longer lists (deleted since, or not visible to the credential):
      its grants and exclusions still show, without names; built as of an instant before the
      feed began, access_as_of answers from the service's ended grants and grants held now;
    - then no complete snapshot of grants (every run that read it failed half-way):
      current_grants is the fold of the feed, every row says so, and there is nothing to
      disagree with; built as of the tenant's end, which its connectors synced hours and
      days before (or never), connector_freshness tells the stale from the fresh."""
    jsonl = tmp_path / "jsonl-copy"
    shutil.copytree(tmp_path / "jsonl", jsonl)
    database = tmp_path / "copy.duckdb"
    env = env | {
        "DBT_DUCKDB_JSONL_DIR": str(jsonl),
        "DBT_DUCKDB_DATABASE_PATH": str(database),
        # dbt parses in full when the database changes: a target of its own for the copy
        # keeps the worker's (and its saved parse) for the builds on the files themselves
        "DBT_DUCKDB_TARGET_PATH": str(tmp_path / "dbt-copy"),
    }
    query = duckdb_query(database)

    gone = ds.apps[1]
    for stream, key in (("apps", "id"), ("app_entitlements", "appId")):
        path = jsonl / f"{stream}.jsonl"
        kept = [line for line in path.read_text().splitlines() if json.loads(line)[key] != gone]
        path.write_text("\n".join(kept) + "\n")
    early = before_the_feed(ds)
    assert early < ds.feed.first_date
    meltano("run", "dbt-duckdb:build", env=env | {"ACCESSGOV_AS_OF": format_ns(early)})
    expected = truth(ds, early, unknown_apps=frozenset({gone}))
    assert len(expected["access_as_of"]) > 10
    compare_access_history(query, expected)

    path = jsonl / "full_table_snapshots.jsonl"
    kept = [
        line for line in path.read_text().splitlines() if json.loads(line)["stream"] != "grants"
    ]
    path.write_text("\n".join(kept) + "\n")
    meltano("run", "dbt-duckdb:build", env=env | {"ACCESSGOV_AS_OF": format_ns(ds.end_ns)})
    fresh = truth(ds, ds.end_ns, unknown_apps=frozenset({gone}))["connector_freshness"]
    assert {row[-1] for row in fresh} == {True, False}
    assert {row[-2] >= 0 for row in fresh if row[-2] is not None} == {True}
    assert Counter(query(MODEL_QUERIES["connector_freshness"])) == fresh
    named = catalog_names(ds, frozenset({gone}))
    folded = Counter(
        (
            *named(i.app_id, i.app_entitlement_id),
            i.app_user_id,
            us(i.granted_at),
            i.granted_ticket_id,
        )
        for i in lifecycle.held_at(ds.intervals())
    )
    folded_sql = (
        f"SELECT {NAMED}, app_user_id, {{granted_at}}, granted_ticket_id "
        "FROM {schema}.current_grants WHERE held_per = 'feed'"
    )
    assert Counter(query(folded_sql)) == folded
    assert query("SELECT count(*) FROM {schema}.current_grants WHERE held_per <> 'feed'") == [(0,)]
    assert query("SELECT count(*) FROM {schema}.feed_vs_service_grants") == [(0,)]


def test_evidence_access_history_and_removals_on_postgres_equal_the_emulators_truth(
    meltano_plugins: None, tenant: Emulator, postgres, warehouse_url: str, tmp_path: Path
) -> None:
    """The shipped job (load, build, prune) through the removals scenario
    (tests/removals.py): every model of access history equals the truth after each build, and
    of evidence after the first two (after the first, a team's own dbt project builds the
    package over the same tables: tests/team_project.py); then a ``grants`` snapshot read
    before a review closed. Unset fields sent empty (EmitUnpopulated) by the first run, then,
    after new events and decided tasks, omitted (as on DuckDB and in
    tests/test_production.py's second runner, on the tests' own server): the same answers.
    After the first, also the plan guard (``check_plans_stay_linear``, as the second runner
    on the other server). From the killed run on, the vendor's mix."""
    connection, schema = postgres
    ds = tenant.dataset
    as_of = as_of_instant(ds)
    env, query = postgres_models(tenant, tmp_path, as_of, connection, schema, warehouse_url)
    run = engine_query(query, "postgres")

    def after_first() -> None:
        compare(run, "postgres", ds, grants_read(ds))
        # dbt's target: a worker's own under pytest-xdist (conftest), else meltano.yml's
        target = env.get("DBT_POSTGRES_TARGET_PATH", str(ROOT / "transform/target/postgres"))
        check_plans_stay_linear(connection, Path(target))
        builds_the_package_on_postgres(tmp_path, connection, schema, warehouse_url, as_of)

    def after_second() -> None:
        compare(run, "postgres", ds, grants_read(ds))
        tenant.emit_unpopulated = None  # the vendor's mix from here on

    tenant.emit_unpopulated = True
    removals.scenario(
        tenant,
        query,
        removals.postgres_copies(connection, schema),
        lambda: meltano("run", "accessgov", env=env),  # the shipped job: load, build, prune
        lambda: removals.killed_run(tenant, env, "tap-accessgov", "target-postgres"),
        # the two commands the job's build-and-prune stands for, each a task of its own
        lambda: meltano("run", "dbt-postgres:build", "dbt-postgres:prune", env=env),
        removals.Alongside(after_first, lambda: changes_between_runs(tenant), after_second),
    )

    a_review_closes_after_grants_were_read(
        ds, "postgres", run, lambda: meltano("run", "accessgov", env=env | NOT_GRANTS)
    )


# A run that reads tasks and access reviews, not grants: the grants snapshot stays older.
NOT_GRANTS = {"TAP_ACCESSGOV__SELECT": '["tasks.*", "access_reviews.*", "full_table_snapshots.*"]'}


def close_a_review_after_grants_were_read(ds: Dataset, read: GrantsRead) -> str:
    """After a run read ``grants``: the open review's approvers decide what is left, then it
    closes (the emulator has no control for it: its reviews close as the tenant's history
    says), and the service drops the accounts of the grants older than the feed (the feed
    never names them) it decertified. The snapshot ``read`` holds them; the models must not
    show them still held after the close. Returns the review's id."""
    position, review = next((n, r) for n, r in enumerate(ds.reviews.reviews) if r.closed_at is None)
    decided = time.time_ns()
    assert decided > read.at
    assert ds.close_tasks(at=decided)
    ds.reviews.reviews[position] = dataclasses.replace(review, closed_at=decided + 10**9)
    gone = [
        certified_grant(task)
        for task in ds.tasks()
        if kind_of(task)[0] == "certify"
        and task["type"]["certify"]["accessReviewId"] == review.id
        and task["type"]["certify"].get("outcome") == "CERTIFY_OUTCOME_DECERTIFIED"
        and certified_grant(task) in read.grants
        and not read.grants[certified_grant(task)].feed_knows
    ]
    assert gone
    for app_id, _, app_user_id in gone:
        ds.remove(app_id=app_id, app_user_id=app_user_id)
    assert not {grant[:3] for grant in ds.current_grants()} & set(gone)
    return review.id


def decisions_of(ds: Dataset, read: GrantsRead, review_id: str) -> Counter[tuple[t.Any, ...]]:
    """The truth of access_review_decisions, with the closed review decertifying grants."""
    expected: Counter[tuple[t.Any, ...]] = evidence_truth(ds, read)["access_review_decisions"]
    assert any(
        row[0] == review_id and row[7] == "CERTIFY_OUTCOME_DECERTIFIED" and not row[-1]
        for row in expected
    )
    return expected


def a_review_closes_after_grants_were_read(
    ds: Dataset,
    engine: str,
    query: t.Callable[[str], list[tuple]],
    run_without_grants: t.Callable[[], None],
) -> None:
    """Right after a run that read ``grants``: a review closes, decertifying grants that
    snapshot holds (``close_a_review_after_grants_were_read``), and a run reads tasks and
    reviews but not ``grants``. The older snapshot shows none of the grants the review
    decertified as still held: the service may have revoked them since."""
    read = grants_read(ds)
    review_id = close_a_review_after_grants_were_read(ds, read)
    run_without_grants()
    expected = decisions_of(ds, read, review_id)
    check(query, engine, "access_review_decisions", QUERIES["access_review_decisions"], expected)
