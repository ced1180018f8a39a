"""Connectors: what syncs each app's accounts, entitlements and grants into the service, and
their endpoint ``GET /api/v1/apps/{app_id}/connectors``.

Each of the feed's apps has a connector of its kind (one in four a second; the first app's
second is a spreadsheet import), the catalog's other apps one (a spreadsheet import where the
app is managed by hand), or none (the first of them, and one in four of the rest). A
connector's sync state (``status``, ``syncDisabledAt``/``syncDisabledReason``) is one of:
synced hours ago, synced days ago, failed (``SYNC_STATUS_ERROR``, ``lastError`` set), first
sync still running, never synced (no ``status``), sync disabled. The feed's apps' first six
connectors take one each, in that order; the others draw them.

Secrets: ``config`` is the connector's configuration, credentials included (an API token, an
access token, a secret access key, a client secret, a private key: what a connector of that
kind is given; an OAuth connector holds none), and a spreadsheet import's ``downloadUrl`` is a
signed link (a signature and a token in its query). None of it belongs in a warehouse or a
log; ``Connectors.secrets()`` lists every such string so tests can look for them in a
client's output. Everything here draws from generators of its own (``{seed}-scoping:...``).
Shapes from the vendor's published OpenAPI (``ConnectorView``, ``Connector``,
``ConnectorStatus``); an unknown or removed app is 404.
"""

from __future__ import annotations

import random
import string
from typing import Any, NamedTuple

from emulator import unpopulated
from emulator.catalog import Catalog, app_object
from emulator.directory import Directory
from emulator.errors import NOT_FOUND, ApiError
from emulator.paging import PageTokens, digest_of, list_page, page_range
from emulator.resources import Resources
from emulator.seed import Seed
from emulator.timefmt import NS, format_ns, precise

MINUTE = 60 * NS
HOUR = 60 * MINUTE
DAY = 24 * HOUR
CONFIG_TYPE = "type.googleapis.com/c1.connector.config.v1."
SYNCED_HOURS_AGO = "synced_hours_ago"
SYNCED_DAYS_AGO = "synced_days_ago"
FAILED = "failed"
FIRST_SYNC_RUNNING = "first_sync_running"
NEVER_SYNCED = "never_synced"
SYNC_DISABLED = "sync_disabled"
STATES = (
    SYNCED_HOURS_AGO,
    SYNCED_DAYS_AGO,
    FAILED,
    FIRST_SYNC_RUNNING,
    NEVER_SYNCED,
    SYNC_DISABLED,
)
STATE_WEIGHTS = (50, 15, 12, 5, 5, 8)
ERRORS = (
    "rpc error: code = PermissionDenied desc = 403 Forbidden: the token lacks the read:org scope",
    "rpc error: code = Unauthenticated desc = invalid_client: the client credentials expired",
    "sync aborted: 429 Too Many Requests from the provider after 5 retries",
    "rpc error: code = DeadlineExceeded desc = context deadline exceeded",
)
CONFIG_NAMES = {"github": "GitHub", "aws": "AWS", "generic": "Http", "file": "File"}
# The fields of a configuration that hold a credential.
SECRET_FIELDS = (
    "apiToken",
    "accessToken",
    "secretAccessKey",
    "botToken",
    "apiKey",
    "privateKey",
    "clientSecret",
)
BASE62 = string.digits + string.ascii_letters
URLSAFE = BASE62 + "-_"


class Spec(NamedTuple):
    """One connector: its app, its number within the app, its kind and sync state."""

    position: int
    n: int
    kind: str
    state: str


def _text(rng: random.Random, alphabet: str, size: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(size))


def _config(kind: str, rng: random.Random, slug: str) -> dict[str, Any] | None:
    """A connector's configuration of ``kind``, with the credential such a connector holds."""
    fields: dict[str, Any]
    if kind == "okta":
        fields = {"domain": f"{slug}.okta.com", "apiToken": "00" + _text(rng, BASE62, 40)}
    elif kind == "github":
        fields = {"orgs": [f"{slug}-platform"], "accessToken": "ghp_" + _text(rng, BASE62, 36)}
    elif kind == "salesforce":  # OAuth: the connector holds no credential of its own
        fields = {"instanceUrl": f"https://{slug}.my.salesforce.com"}
    elif kind == "aws":
        fields = {
            "roleArn": f"arn:aws:iam::{rng.randrange(10**12):012d}:role/AccessGovSync",
            "accessKeyId": "AKIA" + _text(rng, string.ascii_uppercase + string.digits, 16),
            "secretAccessKey": _text(rng, BASE62 + "+/", 40),
        }
    elif kind == "slack":
        numbers = f"{rng.randrange(10**12)}-{rng.randrange(10**12)}"
        fields = {"botToken": f"xoxb-{numbers}-{_text(rng, BASE62, 24)}"}
    elif kind == "jira":
        fields = {
            "site": f"{slug}.atlassian.net",
            "email": f"svc-sync@{slug}.example",
            "apiKey": "ATATT3x" + _text(rng, URLSAFE, 48),
        }
    elif kind == "snowflake":
        fields = {
            "account": f"{slug}-{_text(rng, string.ascii_lowercase, 2)}{rng.randrange(10**5)}",
            "user": "ACCESSGOV_SYNC",
            "privateKey": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + _text(rng, BASE62 + "+/", 64),
        }
    elif kind == "zoom":
        fields = {
            "accountId": _text(rng, BASE62, 22),
            "clientId": _text(rng, BASE62, 22),
            "clientSecret": _text(rng, BASE62, 32),
        }
    elif kind == "file":
        fields = {"fileName": f"{slug}-access-export.xlsx"}
    elif rng.random() < 0.1:
        return None  # configured by hand, nothing kept
    else:
        fields = {
            "baseUrl": f"https://api.{slug}.example",
            "apiKey": "sk_live_" + _text(rng, BASE62, 32),
        }
    return {"@type": f"{CONFIG_TYPE}{CONFIG_NAMES.get(kind, kind.capitalize())}Config", **fields}


class Connectors:
    """Every app's connectors, planned per app on first use."""

    def __init__(
        self, seed: Seed, catalog: Catalog, resources: Resources, directory: Directory
    ) -> None:
        self.seed = seed
        self.catalog = catalog
        self.resources = resources
        self.directory = directory
        self._specs: dict[int, list[Spec]] = {}
        # The feed's apps' connector counts, so their first six take one state each.
        rng = random.Random(f"{seed.value}-scoping:connector-counts")
        self._feed_counts = [
            2 if a == 0 else 1 + (rng.random() < 0.25) for a in range(len(catalog.feed_apps))
        ]

    def specs(self, position: int) -> list[Spec]:
        """The connectors of the app at ``position``, in the order the service lists them."""
        if (found := self._specs.get(position)) is not None:
            return found
        rng = random.Random(f"{self.seed.value}-scoping:connectors:{position}")
        first_other = len(self.catalog.feed_apps)
        if position < first_other:
            noun = self.catalog.apps[position].display_name.split()[0].lower()
            before = sum(self._feed_counts[:position])
            specs = []
            for n in range(self._feed_counts[position]):
                kind = "file" if position == 0 and n == 1 else noun
                ordinal = before + n
                state = (
                    STATES[ordinal]
                    if ordinal < len(STATES)
                    else rng.choices(STATES, STATE_WEIGHTS)[0]
                )
                specs.append(Spec(position, n, kind, state))
        elif app_object(self.catalog, position)["isManuallyManaged"]:
            specs = [Spec(position, 0, "file", rng.choices(STATES, STATE_WEIGHTS)[0])]
        elif position == first_other or rng.random() < 0.25:
            specs = []
        else:
            specs = [Spec(position, 0, "generic", rng.choices(STATES, STATE_WEIGHTS)[0])]
        self._specs[position] = specs
        return specs

    def _when(self, rng: random.Random, ns: int) -> str:
        return format_ns(precise(ns, rng.choice((0, 3, 6, 9))))

    def record(self, spec: Spec) -> tuple[dict[str, Any], list[str]]:
        """The Connector of ``spec``, every field present, and the secrets it holds."""
        position, n, kind, state = spec
        app = self.catalog.apps[position]
        rng = random.Random(f"{self.seed.value}-scoping:connector:{position}:{n}")
        end = self.catalog.end_ns
        connector_id = self.seed.id("connector", position, n)
        slug = app.display_name.lower().replace(" ", "-")
        config = _config(kind, rng, slug)
        secrets = [config[name] for name in SECRET_FIELDS if config and name in config]
        created = end - rng.randrange(60 * DAY, 900 * DAY)
        status: dict[str, Any] | None = None
        disabled_at: int | None = None
        reason = category = ""
        if state == NEVER_SYNCED:
            created = end - rng.randrange(HOUR, 10 * DAY)
        elif state == FIRST_SYNC_RUNNING:
            created = end - rng.randrange(HOUR, 3 * HOUR)
            started = end - rng.randrange(5 * MINUTE, 50 * MINUTE)
            status = self._status("SYNC_STATUS_RUNNING", rng, started, None, started)
        else:
            back = {
                SYNCED_HOURS_AGO: (HOUR, 6 * HOUR),
                SYNCED_DAYS_AGO: (2 * DAY, 20 * DAY),
                FAILED: (HOUR, 3 * DAY),
                SYNC_DISABLED: (10 * DAY, 60 * DAY),
            }[state]
            completed = end - rng.randrange(*back)
            started = completed - rng.randrange(2 * MINUTE, 40 * MINUTE)
            if state == SYNC_DISABLED:
                disabled_at = completed + rng.randrange(DAY, 5 * DAY)
                reason, category = rng.choice(
                    (
                        ("disabled by an administrator while credentials are rotated", "manual"),
                        ("three syncs in a row removed more than half the grants", "bad_sync"),
                    )
                )
                status = self._status("SYNC_STATUS_DISABLED", rng, started, completed, disabled_at)
            elif state == FAILED:
                status = self._status("SYNC_STATUS_ERROR", rng, started, completed, completed)
                status["lastError"] = rng.choice(ERRORS)
            else:
                status = self._status("SYNC_STATUS_DONE", rng, started, completed, completed)
        download_url = ""
        if kind == "file" and state != NEVER_SYNCED:
            signature, token = _text(rng, "0123456789abcdef", 64), _text(rng, URLSAFE, 43)
            download_url = (
                f"https://downloads.accessgov.test/v1/connectors/{connector_id}/sync.xlsx"
                f"?X-Amz-Expires=900&X-Amz-Signature={signature}&token={token}"
            )
            secrets += [signature, token]
        type_ids = self.resources.layout(position).type_ids
        owners = rng.sample(range(self.directory.people), rng.randint(0, 2))
        oauth = None
        if kind == "salesforce" and owners:
            authorized = created + rng.randrange(DAY)
            oauth = {
                "authEmail": self.directory.record(owners[0]).get("email", ""),
                "authorizedAt": self._when(rng, authorized),
            }
        cron = None
        if rng.random() < 0.3:
            cron = {
                "cronSpec": rng.choice(("0 */6 * * *", "30 2 * * *", "*/30 * * * *")),
                "start": self._when(rng, created),
                "timezone": rng.choice(("UTC", "America/New_York", "Europe/Berlin")),
            }
        updated = max(created, disabled_at or 0, end - rng.randrange(30 * DAY))
        connector = {
            "appId": app.id,
            "canResumeSync": state == FAILED or rng.random() < 0.2,
            "catalogId": self.seed.id("connector-catalog", kind),
            "config": config,
            "configUpdatedAt": None if config is None else self._when(rng, created + HOUR),
            "connectorApiVersion": rng.choice((1, 2)),
            "connectorSyncCronSchedule": cron,
            "createdAt": self._when(rng, created),
            "deletedAt": None,
            "disableCheckBadSync": rng.random() < 0.1,
            "displayName": (
                f"{app.display_name} spreadsheet import"
                if kind == "file"
                else app.display_name + ("" if n == 0 else f" ({n + 1})")
            ),
            "downloadUrl": download_url,
            "id": connector_id,
            "oauthAuthorizedAs": oauth,
            "parallelSyncWorkerCount": rng.randint(1, 8) if rng.random() < 0.3 else None,
            "profileAllowList": ["department", "title"] if rng.random() < 0.2 else [],
            "profileIgnoreList": ["phoneNumber"] if rng.random() < 0.2 else [],
            "status": status,
            "syncConfig": (
                {"syncResourceTypeIds": rng.sample(type_ids, rng.randint(1, len(type_ids)))}
                if type_ids and rng.random() < 0.4
                else None
            ),
            "syncDisabledAt": None if disabled_at is None else self._when(rng, disabled_at),
            "syncDisabledCategory": category,
            "syncDisabledReason": reason,
            "updatedAt": self._when(rng, updated),
            "userIds": [self.directory.record(u)["id"] for u in owners],
        }
        return connector, secrets

    def _status(
        self,
        status: str,
        rng: random.Random,
        started: int,
        completed: int | None,
        updated: int,
    ) -> dict[str, Any]:
        return {
            "completedAt": None if completed is None else self._when(rng, completed),
            "lastError": "",
            "startedAt": self._when(rng, started),
            "status": status,
            "updatedAt": self._when(rng, updated),
        }

    def object(self, spec: Spec) -> dict[str, Any]:
        return self.record(spec)[0]

    # ----- ground truth -------------------------------------------------------------------------

    def truth(self) -> list[dict[str, Any]]:
        """Every connector of the apps listed now, app by app in catalog order."""
        return [self.object(spec) for p in self.catalog.current_apps() for spec in self.specs(p)]

    def secrets(self) -> list[str]:
        """Every secret string a connector holds (its configuration's credentials, its
        download link's signature and token), of every app, removed ones included."""
        return [
            secret
            for p in range(len(self.catalog.apps))
            for spec in self.specs(p)
            for secret in self.record(spec)[1]
        ]


NESTED = ("status", "oauthAuthorizedAs", "connectorSyncCronSchedule", "syncConfig")


def list_connectors(
    connectors: Connectors,
    tokens: PageTokens,
    app_id: str,
    query: dict[str, list[str]],
    emit_unpopulated: bool,
) -> dict[str, Any]:
    """One page of ``GET /api/v1/apps/{app_id}/connectors``: ConnectorViews (nothing
    expanded, so the paths are empty)."""
    position = connectors.catalog.current_position(app_id)
    if position is None:
        raise ApiError(404, NOT_FOUND, "app not found")
    specs = connectors.specs(position)
    digest = digest_of(["connectors", app_id])
    positions, next_token = page_range(tokens, digest, query, len(specs))
    views = []
    for n in positions:
        connector = connectors.object(specs[n])
        view: dict[str, Any] = {
            "appPath": "",
            "capabilitiesPath": "",
            "connector": connector,
            "usersPath": "",
        }
        if not emit_unpopulated:
            # protobuf omits unset fields at every depth; ``config`` (an Any) is sent as set
            for name in NESTED:
                if connector[name] is not None:
                    connector[name] = unpopulated.stripped(connector[name])
            view = unpopulated.stripped(view)
            view["connector"] = unpopulated.stripped(connector)
        views.append(view)
    return list_page(views, next_token, emit_unpopulated)
