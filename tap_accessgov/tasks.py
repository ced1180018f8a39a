"""Tasks (the service's tickets): ``POST /api/v1/search/tasks``, every task type, incremental
on what changed since the last run.

The search has no "updated since" filter, and a task changes after it is created (approved,
provisioned, closed), so a run that asks only for tasks created since the last one never sees
the outcome of a task that was open then. A run whose bookmark is ``W`` reads two disjoint
sets whose union is every task created or decided since ``W``:

- ``createdAfter W``: the tasks created since (whatever their state now), in time windows of
  ``createdAfter``/``createdBefore`` read concurrently like the grant feed's
  (grant_feed_windows.py: the same cut, reader and record of completed windows);
- ``outcomeAfter W`` with ``createdBefore W``: the older tasks that got an outcome since.

Nothing older is read again. The bookmark (``updatedAt``, the SDK's replication key) is the
latest ``updatedAt`` seen, but never later than the instant the run started (the SDK caps it
at its signpost, ``get_replication_key_signpost``): a task decided while the run was paging
past it has an outcome time after the start, so the next run reads it, even when a task
seen later in the run changed later still. The tasks at the bookmark instant are read again
(the searches' ``after`` bounds are inclusive), as the grant feed's events are. What a task
gains without an outcome (a first approval of an open task) is seen when it gets its outcome.
A first sync reads every task (``start_date`` bounds the grant feed, not the tasks a feed
event may name).

An interrupted run resumes from its last STATE: completed windows, whether the outcome query
completed and the latest ``updatedAt`` delivered sit beside the bookmark (``backfill``), with
the instant the interrupted run started, which stays the run's cap (what changed while it was
down is read next time). The warehouse keeps each task's latest version (the models dedupe on ``id``).
"""

from __future__ import annotations

import datetime
import typing as t
from functools import cached_property

from singer_sdk import typing as th
from typing_extensions import override

from tap_accessgov.client import AccessGovStream
from tap_accessgov.grant_feed_windows import (
    BACKFILL,
    Backfill,
    Window,
    WindowReader,
    initial_windows,
)
from tap_accessgov.paging import page_body
from tap_accessgov.prefetch import Workers
from tap_accessgov.schemas import FREE_FORM, INT64, OBJECTS, STRING, STRINGS
from tap_accessgov.timestamps import normalize_timestamp, to_ns

if t.TYPE_CHECKING:
    import requests
    from singer_sdk.helpers.types import Context

Record = dict[str, t.Any]

# The completed windows of a run are valid only for the same query (see Backfill.filters).
WINDOWS_OF = "tasks created"
SINCE = "since"  # the interrupted run's start, in the backfill state
OUTCOMES_READ = "outcomesRead"  # whether its outcome query completed


def _subject(*extra: th.Property[t.Any]) -> th.ObjectType:
    """A task type about a grant (grant, revoke, certify): what it is about, its outcome."""
    return th.ObjectType(
        th.Property("appId", STRING),
        th.Property("appEntitlementId", STRING),
        th.Property("appUserId", STRING),
        th.Property("identityUserId", STRING, description="The user the task is about."),
        th.Property("outcome", STRING, description="Absent while the task is open."),
        th.Property("outcomeTime", th.DateTimeType),
        *extra,
        additional_properties=True,
    )


def _action(at: str) -> th.ObjectType:
    return th.ObjectType(
        th.Property("userId", STRING), th.Property(at, th.DateTimeType), additional_properties=True
    )


POLICY_STEP = th.ObjectType(
    th.Property("id", STRING),
    th.Property("state", STRING),
    th.Property("policyGenerationId", STRING),
    th.Property(
        "approval",
        th.ObjectType(
            th.Property("state", STRING),
            th.Property("assignedAt", th.DateTimeType),
            th.Property("approved", _action("approvedAt"), description="Who approved, when."),
            th.Property("denied", _action("deniedAt"), description="Who denied, when."),
            additional_properties=True,
        ),
    ),
    additional_properties=True,
)

TASK = th.PropertiesList(
    th.Property("id", STRING, required=True),
    th.Property("numericId", INT64, description="The ticket number (int64, sent as a string)."),
    th.Property("displayName", STRING),
    th.Property("description", STRING, description="The requester's justification."),
    th.Property("state", STRING, description="TASK_STATE_OPEN, _CLOSED, ... (passed through)"),
    th.Property("processing", STRING),
    th.Property("origin", STRING, description="TASK_ORIGIN_WEBAPP, _JIRA, ... (passed through)"),
    th.Property("createdAt", th.DateTimeType),
    th.Property(
        "updatedAt",
        th.DateTimeType,
        description="As sent. Replication key: the bookmark is the instant a run started.",
    ),
    th.Property("deletedAt", th.DateTimeType),
    th.Property("createdByUserId", STRING, description="Who opened the task."),
    th.Property("userId", STRING, description="The user the task is about."),
    th.Property("approverIds", STRINGS),
    th.Property("stepApproverIds", STRINGS),
    th.Property("emergencyAccess", th.BooleanType),
    th.Property(
        "externalRefs",
        th.ArrayType(
            th.ObjectType(
                th.Property("externalRefSource", STRING),
                th.Property("name", STRING),
                th.Property("url", STRING),
            )
        ),
        description="External references, e.g. a Jira issue.",
    ),
    th.Property(
        "type",
        th.ObjectType(
            th.Property("grant", _subject(th.Property("grantDuration", STRING))),
            th.Property("revoke", _subject()),
            th.Property(
                "certify",
                _subject(
                    th.Property("accessReviewId", STRING),
                    th.Property("accessReviewSelection", STRING),
                ),
            ),
            th.Property(
                "offboarding",
                th.ObjectType(
                    th.Property("subjectUserId", STRING),
                    th.Property("outcome", STRING),
                    th.Property("outcomeTime", th.DateTimeType),
                ),
            ),
            th.Property("action", FREE_FORM),
            th.Property("finding", FREE_FORM),
            additional_properties=True,
        ),
        description="One member, named after the task's type; unknown types pass through.",
    ),
    th.Property(
        "policy",
        th.ObjectType(
            th.Property("history", th.ArrayType(POLICY_STEP), description="Steps done."),
            additional_properties=True,
        ),
    ),
    th.Property("actions", STRINGS),
    th.Property("analysisId", STRING),
    th.Property("annotations", OBJECTS),
    th.Property("commentCount", th.IntegerType),
    th.Property("data", FREE_FORM),
    th.Property("form", FREE_FORM),
    th.Property("insightIds", STRINGS),
    th.Property("policyGenerationId", STRING),
    th.Property("recommendation", STRING),
    th.Property("revocationTargets", OBJECTS),
).to_dict()


class TasksStream(AccessGovStream):
    """Every task of the tenant, created or decided since the last run (module docstring)."""

    name = "tasks"
    path = "/api/v1/search/tasks"
    http_method = "POST"
    replication_key = "updatedAt"
    is_sorted = False
    primary_keys = ("id",)
    schema = TASK

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, **kwargs)
        self._workers: Workers | None = None

    @cached_property
    def run_start(self) -> str:
        """The cap of this run's bookmark: when it started, or when the run it resumes did."""
        saved = self.stream_state.get(BACKFILL)
        if isinstance(saved, dict) and saved.get(SINCE):
            return normalize_timestamp(saved[SINCE])
        return normalize_timestamp(datetime.datetime.now(datetime.UTC).isoformat())

    @override
    def get_replication_key_signpost(self, context: Context | None = None) -> str:
        return self.run_start

    @override
    def get_records(self, context: Context | None) -> t.Iterable[Record]:
        return self.dry_run_limit.apply(self._changed_tasks())

    @override
    def stop_workers(self) -> None:
        if self._workers is not None:
            self._workers.close()

    def _changed_tasks(self) -> t.Iterator[Record]:
        state = self.stream_state
        bookmark = state.get("replication_key_value")
        since = to_ns(self.run_start)
        resumed = Backfill.from_state(state, WINDOWS_OF)  # None unless a valid backfill
        backfill = resumed or Backfill(WINDOWS_OF)
        outcomes_read = resumed is not None and bool(state[BACKFILL].get(OUTCOMES_READ))

        def save() -> None:
            state[BACKFILL] = {
                **backfill.to_state(),
                SINCE: self.run_start,
                OUTCOMES_READ: outcomes_read,
            }
            self.connection.state_writer.write_state(self.tap_state)

        if backfill.completed:
            self.logger.info(
                "Resuming an interrupted tasks sync: %d completed time range(s) from its state "
                "are not read again",
                len(backfill.completed),
            )
        if bookmark and not outcomes_read:
            after = normalize_timestamp(bookmark)
            yield from self._seen(
                self.request_records({"outcomeAfter": after, "createdBefore": after}), backfill
            )
            outcomes_read = True
            save()
        low = to_ns(bookmark) if bookmark else self._earliest_created()
        if low is not None:
            workers = int(self.config["max_concurrency"])
            start = low if bookmark else None
            windows = backfill.remaining(
                initial_windows(start, None, low, max(since, low + 1), workers)
            )

            def completed(window: Window) -> None:
                backfill.complete(window)
                save()

            yield from self._seen(self._windows(windows, workers, completed), backfill)
        if backfill.latest is not None:  # tasks delivered by the interrupted run count too
            self.state_manager.increment_state(
                {"updatedAt": backfill.latest}, context=None, replication_key="updatedAt"
            )
        state.pop(BACKFILL, None)

    @staticmethod
    def _seen(records: t.Iterable[Record], backfill: Backfill) -> t.Iterator[Record]:
        """``records``, each one's ``updatedAt`` (or ``createdAt``) noted as delivered."""
        for record in records:
            if changed := record.get("updatedAt") or record.get("createdAt"):
                backfill.saw(normalize_timestamp(changed))
            yield record

    def _windows(
        self, windows: list[Window], workers: int, completed: t.Callable[[Window], None]
    ) -> t.Iterator[Record]:
        """The tasks created in each window, ``workers`` windows at once (one after another
        with a single worker: a nightly run's one or two windows need no threads)."""
        if workers < 2 or len(windows) < 2:
            for window in windows:
                yield from self.request_records(_created_in(window))
                completed(window)
            return
        self.pin_proxies()  # before the threads: it changes the shared session
        self._workers = Workers(workers, self.stopping, "tasks")
        reader = WindowReader(
            read=lambda window: self.request_records(_created_in(window)),
            split=lambda _window, _pages, _typical: [],
            page_size=self.page_size,
            workers=self._workers,
            count=workers,
        )
        yield from reader.records(windows, completed)

    def _earliest_created(self) -> int | None:
        """When the tenant's first task was created (one request, sorted by creation); None
        when it has none. The windows of a first sync are cut from there."""
        context = {"sortBy": "TASK_SEARCH_SORT_BY_CREATED_AT", "pageSize": 10}
        records = iter(self.request_records(context))
        try:
            first = next(records, None)
        finally:
            if isinstance(records, t.Generator):
                records.close()
        created = (first or {}).get("createdAt")
        return to_ns(created) if created else None

    @override
    def prepare_request_payload(
        self, context: Context | None, next_page_token: str | None
    ) -> dict[str, t.Any]:
        """The context's filters (time bounds as sent), a page size, the page token."""
        body: dict[str, t.Any] = {"pageSize": self.page_size, **(context or {})}
        if next_page_token:
            body["pageToken"] = next_page_token
        return body

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``task`` of each view; one without an id is skipped, with a warning."""
        for view in page_body(response).get("list") or []:
            task = (view or {}).get("task") or {}
            if task.get("id"):
                yield task
            else:
                self.logger.warning("Skipping a task without an id (%s)", task.get("displayName"))


def _created_in(window: Window) -> dict[str, str]:
    """The search filters of a window of creation times."""
    after, before = window.bounds()
    return {
        **({"createdAfter": after} if after else {}),
        **({"createdBefore": before} if before else {}),
    }
