"""The tap's streams, listed once: ``STREAM_TYPES``, each built by ``discover`` and handed
the streams listed before it that it reads (``TapStream.reads``), and ``full_table_snapshots``
after them all. A new stream is its module here, its schema (schemas.py), its line below and
its tests."""

from __future__ import annotations

import typing as t

from tap_accessgov.engine.stream import Discovered
from tap_accessgov.streams.access_reviews import AccessReviewsStream
from tap_accessgov.streams.app_entitlements import AppEntitlementsStream
from tap_accessgov.streams.app_users import AppUsersStream
from tap_accessgov.streams.apps import AppsStream
from tap_accessgov.streams.attributes import AttributeValuesStream
from tap_accessgov.streams.automation_exclusions import AutomationExclusionsStream
from tap_accessgov.streams.connectors import ConnectorsStream
from tap_accessgov.streams.full_table_snapshots import FullTableSnapshotsStream
from tap_accessgov.streams.grant_feed import GrantFeedStream
from tap_accessgov.streams.grants import GrantsStream
from tap_accessgov.streams.iam_roles import IamRolesStream
from tap_accessgov.streams.owners import AppOwnersStream, EntitlementOwnersStream
from tap_accessgov.streams.past_grants import PastGrantsStream
from tap_accessgov.streams.resources import AppResourcesStream, AppResourceTypesStream
from tap_accessgov.streams.system_log import SystemLogStream
from tap_accessgov.streams.tasks import TasksStream
from tap_accessgov.streams.users import UsersStream

if t.TYPE_CHECKING:
    from singer_sdk import Tap
    from singer_sdk.streams import Stream

    from tap_accessgov.engine.stream import AccessGovStream, ApiConnection

# A stream reads only streams listed before it (the SDK still syncs them by name).
STREAM_TYPES: tuple[type[AccessGovStream], ...] = (
    GrantFeedStream,
    AppsStream,
    AppEntitlementsStream,
    AutomationExclusionsStream,
    UsersStream,
    AppUsersStream,
    GrantsStream,
    PastGrantsStream,
    TasksStream,
    AccessReviewsStream,
    SystemLogStream,
    # what an audit is scoped by
    AppResourceTypesStream,
    AppResourcesStream,
    AppOwnersStream,
    EntitlementOwnersStream,
    AttributeValuesStream,
    IamRolesStream,
    ConnectorsStream,
)


def discover(tap: Tap, connection: ApiConnection) -> list[Stream]:
    """Every stream of ``STREAM_TYPES``, then ``full_table_snapshots``, which says which of
    them were synced in full."""
    found = Discovered()
    for stream_type in STREAM_TYPES:
        found.add(stream_type.discovered(tap, connection, found))
    streams = found.all()
    return [*streams, FullTableSnapshotsStream(tap, snapshot_streams=streams)]
