"""Dagster definitions: the Meltano job `accessgov` as one asset (`accessgov_warehouse`), on
the schedule meltano.yml gives it (`accessgov-nightly`), retried the Dagster way.

Meltano keeps the state, the run records and the "already running" guard in its system
database (MELTANO_DATABASE_URI, docs/deployment.md), so this file only starts `meltano run` and
reports: a run Dagster starts on any host continues where the last one stopped.

One run of the job at a time: Meltano's "already running" guard covers the extract-load only,
so a second run could start while the first one's dbt build still runs, and two builds would
work on the same schema. So the schedule skips a tick while a run of the job is in progress,
and a run started while an earlier one is in progress (by hand, or by another schedule) stops
before it starts `meltano run` and is retried later, the Dagster way.

The secret and the system database come from Dagster's `EnvVar`s, read when a run starts (never
stored in the run's config or shown in its logs); set them in the code location's environment
or secret store. Loaded with the Meltano orchestrator plugin `dagster` (meltano.yml), e.g.
`meltano invoke dagster:run` (the job once, in process) or `meltano invoke dagster:daemon`.
"""

import os
from pathlib import Path

import dagster as dg
import yaml

PROJECT_ROOT = Path(os.environ.get("MELTANO_PROJECT_ROOT") or Path(__file__).resolve().parents[1])
SCHEDULE = "accessgov-nightly"


def meltano_schedule(name: str) -> dict[str, str]:
    """The schedule as meltano.yml declares it (its `job` and `interval`): one place to change it."""
    project = yaml.safe_load((PROJECT_ROOT / "meltano.yml").read_text())
    for schedule in project.get("schedules", []):
        if schedule["name"] == name:
            return dict(schedule)
    raise ValueError(f"meltano.yml has no schedule named {name!r}")


class MeltanoProject(dg.ConfigurableResource):
    """Where and how to run Meltano: the project, its environment, and the two secrets a run
    needs from outside (the tap's client secret and the system database's URI)."""

    project_dir: str = str(PROJECT_ROOT)
    environment: str = "prod"
    executable: str = "meltano"
    client_secret: str
    database_uri: str

    def env(self) -> dict[str, str]:
        """What `meltano run` needs on top of this process's environment (which the pipes
        client passes on itself)."""
        return {
            "MELTANO_ENVIRONMENT": self.environment,
            "MELTANO_DATABASE_URI": self.database_uri,
            "TAP_ACCESSGOV_CLIENT_SECRET": self.client_secret,
        }


PLAN = meltano_schedule(SCHEDULE)
IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def runs_in_progress(instance: dg.DagsterInstance, than: str | None = None) -> list[str]:
    """The ids of the job's runs in progress (only those created before run ``than``)."""
    records = instance.get_run_records(dg.RunsFilter(job_name=PLAN["job"], statuses=IN_PROGRESS))
    mine = next((r for r in records if r.dagster_run.run_id == than), None)
    return [
        record.dagster_run.run_id
        for record in records
        if than is None or (mine is not None and record.create_timestamp < mine.create_timestamp)
    ]


# A failed attempt (the service or the warehouse down, or another run of the job still going)
# is tried again 5, 15 and 35 minutes later (Dagster's exponential backoff: (2^n - 1) x delay).
# No jitter, which would start some first retries sooner: 5 minutes is how long Meltano refuses
# the next run after one was killed without a word (docs/deployment.md).
RETRY_DELAY = float(os.environ.get("ACCESSGOV_RETRY_DELAY_SECONDS", "300"))


@dg.asset(
    description=f"`meltano run {PLAN['job']}`: the warehouse tables, then the models built on "
    "them, then the loaded full-table copies their history holds deleted (dbt-postgres:"
    "build-and-prune).",
    retry_policy=dg.RetryPolicy(
        max_retries=3,
        delay=RETRY_DELAY,
        backoff=dg.Backoff.EXPONENTIAL,
    ),
)
def accessgov_warehouse(
    context: dg.AssetExecutionContext,
    meltano: MeltanoProject,
    pipes_subprocess_client: dg.PipesSubprocessClient,
) -> dg.MaterializeResult:
    if earlier := runs_in_progress(context.instance, than=context.run_id):
        # Only the later run yields, so two runs started together never both wait.
        raise dg.Failure(
            description=f"run {earlier[0]} of the job {PLAN['job']} is still in progress; "
            "this one starts when it has ended (the retry policy tries again)"
        )
    return pipes_subprocess_client.run(
        context=context,
        command=[meltano.executable, "run", PLAN["job"]],
        cwd=meltano.project_dir,
        env=meltano.env(),
    ).get_materialize_result()


accessgov_job = dg.define_asset_job(PLAN["job"], selection=[accessgov_warehouse])


@dg.schedule(
    name=SCHEDULE.replace("-", "_"),
    job=accessgov_job,
    cron_schedule=PLAN["interval"],
    execution_timezone="UTC",
)
def accessgov_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    """A run per tick, or none while the last one is still in progress."""
    if running := runs_in_progress(context.instance):
        return dg.SkipReason(f"run {running[0]} of the job {PLAN['job']} is still in progress")
    return dg.RunRequest()


defs = dg.Definitions(
    assets=[accessgov_warehouse],
    jobs=[accessgov_job],
    schedules=[accessgov_schedule],
    resources={
        "meltano": MeltanoProject(
            client_secret=dg.EnvVar("TAP_ACCESSGOV_CLIENT_SECRET"),
            database_uri=dg.EnvVar("MELTANO_DATABASE_URI"),
        ),
        "pipes_subprocess_client": dg.PipesSubprocessClient(),
    },
    executor=dg.in_process_executor,
)
