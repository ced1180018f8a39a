"""``app_users``: the accounts of every app of the catalog, each with its owner
(``identityUserId``, a user of the directory; empty for accounts nobody owns), the only link
from a grant's ``appUserId`` to a person. One partition per app, fetched ahead within
``max_concurrency`` like ``app_entitlements`` (prefetch.py); a full-table stream (snapshots.py).
"""

from __future__ import annotations

import typing as t

from typing_extensions import override

from tap_accessgov import schemas
from tap_accessgov.catalog import QueryPaging
from tap_accessgov.paging import page_body
from tap_accessgov.prefetch import ConcurrentPartitionsStream

if t.TYPE_CHECKING:
    import requests
    from singer_sdk import Tap
    from singer_sdk.helpers.types import Context

    from tap_accessgov.catalog import AppsStream
    from tap_accessgov.client import ApiConnection

Record = dict[str, t.Any]


class PerAppStream(ConcurrentPartitionsStream):
    """A stream read app by app: one context per app of the catalog (named like the record
    field ``appId``), the catalog read once per run (catalog.py)."""

    def __init__(self, tap: Tap, *, connection: ApiConnection, apps: AppsStream) -> None:
        super().__init__(tap, connection=connection)
        self.apps = apps
        self._partitions: list[dict[str, t.Any]] | None = None

    @property
    @override
    def partitions(self) -> list[dict[str, t.Any]] | None:
        if self._partitions is None:
            self._partitions = [{"appId": app_id} for app_id in self.apps.app_ids()]
        return self._partitions

    @override
    def describe(self, context: Context) -> str:
        return f"app {context['appId']}"

    @override
    def get_records(self, context: Context | None) -> t.Iterable[Record]:
        return self.dry_run_limit.apply(self.partition_records(context)) if context else ()


class AppUsersStream(QueryPaging, PerAppStream):
    """``GET /api/v1/apps/{app_id}/app_users`` for every app: the ``appUser`` of each view,
    its fields at the top level (the view's paths point into an expansion nobody asked for)."""

    name = "app_users"
    path = "/api/v1/apps/{appId}/app_users"
    primary_keys = ("appId", "id")
    schema = schemas.APP_USER

    @override
    def parse_response(self, response: requests.Response) -> t.Iterable[Record]:
        """The ``appUser`` of each view; one without an id is skipped, with a warning naming
        the call (never the account's names: personal data)."""
        for view in page_body(response).get("list") or []:
            app_user = (view or {}).get("appUser") or {}
            if app_user.get("id"):
                yield app_user
            else:
                self.logger.warning(
                    "Skipping an app user without an id (%s)", response.request.path_url
                )
