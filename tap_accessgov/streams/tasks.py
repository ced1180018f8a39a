"""Tasks (the service's tickets): ``POST /api/v1/search/tasks``, every task type, incremental
on what changed since the last run.

The search has no "updated since" filter, and a task changes after it is created (approved,
provisioned, closed), so a run that asks only for tasks created since the last one never sees
the outcome of a task that was open then. A run whose bookmark is ``W`` reads two disjoint
sets whose union is every task created or decided since ``W``:

- ``createdAfter W``: the tasks created since (whatever their state now), in time windows of
  ``createdAfter``/``createdBefore``: the engine's one range reader, as for the grant feed
  (``WindowedStream.read_range``: the same cut, split, reader and record of completed
  windows);
- ``outcomeAfter W`` with ``createdBefore W``: the older tasks that got an outcome since.

Nothing older is read again. The bookmark (``updatedAt``, the SDK's replication key) is the
latest ``updatedAt`` seen, but never later than the instant the run started (the SDK caps it
at its signpost, ``get_replication_key_signpost``): a task decided while the run was paging
past it has an outcome time after the start, so the next run reads it, even when a task
seen later in the run changed later still. The tasks at the bookmark instant are read again
(the searches' ``after`` bounds are inclusive), as the grant feed's events are. What a task
gains without an outcome (a first approval of an open task) is seen when it gets its outcome.
A first sync reads every task, from the earliest created (one request sorted by creation),
to the run's start and past it: ``start_date`` and ``end_date`` bound the grant feed, not the
tasks a feed event may name.

An interrupted run resumes from its last STATE: completed windows, whether the outcome query
completed and the latest ``updatedAt`` delivered sit beside the bookmark (``backfill``), with
the instant the interrupted run started, which stays the run's cap (what changed while it was
down is read next time). The warehouse keeps each task's latest version (the models dedupe on ``id``).
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.engine.windowed import SINCE, ResumableRun, WindowedStream
from tap_accessgov.paging import BodyPaging, viewed_objects
from tap_accessgov.timestamps import normalize_timestamp, to_ns

if t.TYPE_CHECKING:
    from collections.abc import Iterator

    import requests
    from singer_sdk.helpers.types import Context

    from tap_accessgov.engine.time_ranges import Key

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
    bound_names = ("createdAfter", "createdBefore")

    @override
    def windows_of(self) -> str:
        return WINDOWS_OF

    @override
    def window_key(self, record: Record) -> Key:
        """A task's id, its creation (or None) last: windows hold tasks by creation."""
        return (record["id"], record.get("createdAt"))

    @override
    def range_start(self) -> str | None:
        """The bookmark; none on a first sync, whatever ``start_date`` says."""
        bookmark = self.stream_state.get("replication_key_value")
        return normalize_timestamp(bookmark) if bookmark else None

    @override
    def range_end(self) -> int | None:
        """Open: the last window reaches past the run's start, ``end_date`` or not."""
        return None

    @override
    def where_records_begin(
        self, lower: int | None, upper: int | None, high: int, slots: int
    ) -> tuple[int, None] | None:
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
        return (to_ns(created), None) if created else None

    @override
    def changed_at(self, record: Record) -> str | None:
        """When a task last changed (``updatedAt``, else ``createdAt``), in the bookmark's
        format."""
        changed = record.get("updatedAt") or record.get("createdAt")
        return normalize_timestamp(changed) if changed else None

    @override
    def before_windows(self, run: ResumableRun) -> Iterator[Record]:
        """After a bookmark, the older tasks that got an outcome since (once per run: an
        interrupted run that completed it does not read it again)."""
        bookmark = self.range_start()
        if bookmark is None or run.extra[OUTCOMES_READ]:
            return
        outcomes = self.request_records({"outcomeAfter": bookmark, "createdBefore": bookmark})
        yield from run.delivered(outcomes, self.changed_at)
        run.extra[OUTCOMES_READ] = True
        run.save()

    @override
    def backfill_extra(self, run: ResumableRun) -> dict[str, t.Any]:
        """The run's start (a resumed run keeps its cap), and whether the outcome query
        completed."""
        return {SINCE: self.run_start, OUTCOMES_READ: bool(run.saved.get(OUTCOMES_READ))}

    @override
    def search_filters(self, context: Context | None) -> dict[str, t.Any]:
        """A window's bounds in the search's words (``createdAfter``, ``createdBefore``),
        the other queries' filters as they are (a page size of their own, if any)."""
        others = {k: v for k, v in (context or {}).items() if k not in ("after", "before")}
        return {**others, **self.window_filters(context)}

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``task`` of each view; one without an id is skipped, with a warning."""
        return viewed_objects(response, "task", self.logger)
