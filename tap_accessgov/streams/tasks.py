"""Tasks (the service's tickets): ``POST /api/v1/search/tasks``, every task type, incremental
on what changed since the last run.

The search has no "updated since" filter, and a task changes after it is created (approved,
provisioned, closed), so a run that asks only for tasks created since the last one never sees
the outcome of a task that was open then. A run whose bookmark is ``W`` reads two disjoint
sets whose union is every task created or decided since ``W``:

- ``createdAfter W``: the tasks created since (whatever their state now), in time windows of
  ``createdAfter``/``createdBefore`` read concurrently like the grant feed's
  (engine/time_ranges.py: the same cut, reader and record of completed windows);
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

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.time_ranges import (
    Key,
    Window,
    WindowReader,
    initial_windows,
)
from tap_accessgov.engine.windowed import SINCE, WindowedStream
from tap_accessgov.paging import BodyPaging, viewed_objects
from tap_accessgov.timestamps import normalize_timestamp, to_ns

if t.TYPE_CHECKING:
    import requests
    from singer_sdk.helpers.types import Context

Record = dict[str, t.Any]

# The completed windows of a run are valid only for the same query (see Backfill.filters).
WINDOWS_OF = "tasks created"
OUTCOMES_READ = "outcomesRead"  # whether its outcome query completed


class TasksStream(BodyPaging, WindowedStream):
    """Every task of the tenant, created or decided since the last run (module docstring)."""

    name = "tasks"
    path = "/api/v1/search/tasks"
    http_method = "POST"
    replication_key = "updatedAt"
    is_sorted = False
    primary_keys = ("id",)
    schema = schemas.TASK

    @override
    def records(self, context: Context | None) -> t.Iterable[Record]:
        return self._changed_tasks()

    def _changed_tasks(self) -> t.Iterator[Record]:
        bookmark = self.stream_state.get("replication_key_value")
        since = to_ns(self.run_start)
        run = self.resumable_run(WINDOWS_OF)
        run.extra = {SINCE: self.run_start, OUTCOMES_READ: bool(run.saved.get(OUTCOMES_READ))}
        if bookmark and not run.extra[OUTCOMES_READ]:
            after = normalize_timestamp(bookmark)
            outcomes = self.request_records({"outcomeAfter": after, "createdBefore": after})
            yield from run.delivered(outcomes, _changed_at)
            run.extra[OUTCOMES_READ] = True
            run.save()
        low = to_ns(bookmark) if bookmark else self._earliest_created()
        if low is not None:
            start = low if bookmark else None
            windows = run.remaining(
                initial_windows(start, None, low, max(since, low + 1), self.concurrency.limit)
            )
            yield from run.delivered(self._windows(windows, run.complete), _changed_at)
        run.finish()

    def _windows(
        self, windows: list[Window], completed: t.Callable[[Window], None]
    ) -> t.Iterator[Record]:
        """The tasks created in each window, as many windows at once as the run's concurrency
        allows and the run waits for (the first in the main thread: time_ranges.py's reader)."""
        reader = WindowReader(
            read=lambda window: self.request_records(_created_in(window)),
            split=lambda _window, _pages, _dates, _typical: [],
            page_size=self.page_size,
            workers=self.concurrency.workers(self, "tasks"),
            count=self.concurrency.limit,
            key_of=_key,
            wall_clock=self.time_not_writing,
        )
        yield from reader.records(windows, completed)

    def _earliest_created(self) -> int | None:
        """When the tenant's first task was created (one request, sorted by creation); None
        when it has none. The windows of a first sync are cut from there; the oldest is
        unbounded below, so a service that ignored the order would still lose no task."""
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
    def search_filters(self, context: Context | None) -> dict[str, t.Any]:
        """The context's filters (time bounds as sent; a page size of its own, if any)."""
        return dict(context or {})

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``task`` of each view; one without an id is skipped, with a warning."""
        return viewed_objects(response, "task", self.logger)


def _key(task: Record) -> Key:
    """A task's key for a window's split, its creation (or None) last."""
    return (task["id"], task.get("createdAt"))


def _changed_at(task: Record) -> str | None:
    """When a task last changed (``updatedAt``, else ``createdAt``), in the bookmark's format."""
    changed = task.get("updatedAt") or task.get("createdAt")
    return normalize_timestamp(changed) if changed else None


def _created_in(window: Window) -> dict[str, str]:
    """The search filters of a window of creation times."""
    after, before = window.bounds()
    return {
        **({"createdAfter": after} if after else {}),
        **({"createdBefore": before} if before else {}),
    }
