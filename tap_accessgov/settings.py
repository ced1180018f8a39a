"""The tap's settings: their schema (each default written once, here) and the checks a JSON
schema cannot express, every problem reported as ``<setting>: <what is wrong>``.

Why our own wording: ``meltano config test`` shows only the last line a plugin logs, so all
problems go on one line, each led by the setting it is about; and a secret's value, which a
JSON-schema message quotes, is never shown, nor is it in any repr of the config (``Settings``).
"""

from __future__ import annotations

import difflib
import ipaddress
import typing as t
from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

from singer_sdk import typing as th
from singer_sdk.typing import DEFAULT_JSONSCHEMA_VALIDATOR

from tap_accessgov.auth import (
    AUTH_METHODS,
    CLIENT_ASSERTION,
    CLIENT_SECRET,
    CredentialError,
    parse_client_id,
    parse_client_secret,
)
from tap_accessgov.timestamps import normalize_timestamp

if t.TYPE_CHECKING:
    from jsonschema import ValidationError


def _ref(id_description: str) -> th.ObjectType:
    return th.ObjectType(
        th.Property("app_id", th.StringType(min_length=1), required=True, description="App id."),
        th.Property("id", th.StringType(min_length=1), required=True, description=id_description),
        additional_properties=False,
    )


# An app entitlement, in every setting that names one: {app_id, app_entitlement_id}, the
# names of the warehouse's columns. app_entitlement_refs once took {app_id, id}: still read
# (as the current shape, see Settings), with one deprecation line (``deprecations``).
DEPRECATED_ENTITLEMENT_ID = "id"


def _entitlement(*, deprecated_id: bool = False) -> th.ObjectType:
    properties = [
        th.Property("app_id", th.StringType(min_length=1), required=True, description="App id."),
        th.Property(
            "app_entitlement_id",
            th.StringType(min_length=1),
            required=not deprecated_id,
            description="App entitlement id.",
        ),
    ]
    if deprecated_id:
        properties.append(
            th.Property(
                DEPRECATED_ENTITLEMENT_ID,
                th.StringType(min_length=1),
                description="Deprecated name of app_entitlement_id.",
            )
        )
    return th.ObjectType(*properties, additional_properties=False)


CONFIG_SCHEMA = th.PropertiesList(
    th.Property(
        "client_id",
        th.StringType(min_length=1),
        required=True,
        title="Client ID",
        description=(
            "API client id from the service's API settings, of the form "
            "<random-id>@<hostname>/<use-case>. The hostname names the tenant: the token "
            "endpoint is https://<hostname>/auth/v1/token and the API root "
            "https://<hostname>/api/v1 (unless api_url is set)."
        ),
    ),
    th.Property(
        "client_secret",
        th.StringType,
        required=True,
        secret=True,
        title="Client secret",
        description=(
            "API client secret, shown once when the credential is created: "
            "secret-token:<domain>:v1:<base64url JWK> holding an ed25519 private key. "
            "Never logged."
        ),
    ),
    th.Property(
        "auth_method",
        th.StringType(allowed_values=list(AUTH_METHODS)),
        default=CLIENT_ASSERTION,
        title="Token exchange method",
        description=(
            "client_assertion (default): sign a short-lived EdDSA JWT with the secret's key, so "
            "the secret itself never leaves this machine. client_secret: send the whole secret "
            "to the token endpoint."
        ),
    ),
    th.Property(
        "api_url",
        th.StringType,
        title="API URL override",
        description=(
            "Overrides https://<hostname> for token and API calls (proxies, private "
            "deployments, the local emulator). Must be https, except for loopback hosts. "
            "The assertion's aud still comes from the client id."
        ),
    ),
    th.Property(
        "start_date",
        th.DateTimeType,
        title="Start date",
        description=(
            "Lower bound of the grant feed ('after') and of the system log ('since') for the "
            "first run, when there is no state."
        ),
    ),
    th.Property(
        "end_date",
        th.DateTimeType,
        title="End date",
        description=(
            "Upper bound of the grant feed ('before') and of the system log ('until'), "
            "exclusive, on every run."
        ),
    ),
    th.Property(
        "page_size",
        th.IntegerType(minimum=10, maximum=100),
        default=100,
        title="Page size",
        description=(
            "Results per page on every list and search request (10-100). The grant feed's "
            "probes for where its events begin (one round of small requests at the start of "
            "a first sync) send pageSize 10."
        ),
    ),
    th.Property(
        "max_concurrency",
        th.IntegerType(minimum=1, maximum=16),
        default=8,
        title="Max concurrency",
        description=(
            "Requests in flight at most, for the whole run: the grant feed is read in "
            "concurrent time windows (as many as the run waits for: one after another from "
            "a service that answers at once), and the entitlement lists of several apps and "
            "the automation exclusions of several entitlements at once. Lowered "
            "automatically while the service answers 429. 1 = one request after another "
            "(the same windows, read one at a time). The records delivered do not depend on "
            "it."
        ),
    ),
    th.Property(
        "max_retries",
        th.IntegerType(minimum=0, maximum=20),
        default=5,
        title="Max retries",
        description=(
            "Retries of a request that failed transiently (429, 5xx, dropped connection, "
            "timeout, unreadable body) before the run fails. Waits grow exponentially "
            "(1, 2, 4 ... 30 s) or follow the service's Retry-After (at most 60 s)."
        ),
    ),
    th.Property(
        "request_timeout",
        th.IntegerType(minimum=1, maximum=3600),
        default=300,
        title="Request timeout",
        description="Seconds to wait for a response before retrying the request.",
    ),
    th.Property(
        "app_ids",
        th.ArrayType(th.StringType(min_length=1)),
        title="App filter",
        description="Grant feed: only events of these apps (appRefs).",
    ),
    th.Property(
        "app_entitlement_refs",
        th.ArrayType(_entitlement(deprecated_id=True)),
        title="App entitlement filter",
        description=(
            "Grant feed: only events of these app entitlements (appEntitlementRefs): a list of "
            "{app_id, app_entitlement_id}."
        ),
    ),
    th.Property(
        "app_user_refs",
        th.ArrayType(_ref("App user id.")),
        title="App user filter",
        description="Grant feed: only events of these app users (appUserRefs).",
    ),
    th.Property(
        "user_ids",
        th.ArrayType(th.StringType(min_length=1)),
        title="User filter",
        description="Grant feed: only events of these users (userRefs).",
    ),
    th.Property(
        "expand_mask",
        th.ArrayType(th.StringType(min_length=1)),
        title="Expand mask",
        description=(
            "Grant feed: related objects to expand (expandMask.paths). The service does not "
            'document its paths: ["*"] (everything) is the one value known to work '
            "everywhere; any other path is passed to the service unchecked, as the service's "
            "own field name (likely app_id, app_entitlement_id, app_user_id, ticket_id). Each "
            "expanded object is put into the record (app, entitlement, appUser, ticket)."
        ),
    ),
    th.Property(
        "exclusion_entitlements",
        th.ArrayType(_entitlement()),
        title="Entitlements with automation exclusions",
        description=(
            "Only these app entitlements' automation exclusions (and excluded users) are "
            "extracted: a list of {app_id, app_entitlement_id}. Not set (the usual case): "
            "those of every app entitlement of the catalog that exclusion_scope names."
        ),
    ),
    th.Property(
        "exclusion_scope",
        th.StringType(allowed_values=["automated", "all"]),
        default="automated",
        title="Exclusions of which entitlements",
        description=(
            "When exclusion_entitlements is not set, whose automation exclusions are read: "
            "automated (default), every app entitlement of the catalog with automation on "
            "(isAutomationEnabled; exclusions exempt users from automation); all, every app "
            "entitlement, which also finds stale exclusions of entitlements whose automation "
            "was switched off, at one request per entitlement."
        ),
    ),
    th.Property(
        "read_directory",
        th.BooleanType,
        default=True,
        title="Read the directory",
        description=(
            "users: every user of the directory (GET /api/v1/users) and the users of the "
            "automation exclusions (default, true); false keeps users to the users of the "
            "automation exclusions, for an API key whose roles may not list users."
        ),
    ),
).to_dict()

# What `meltano config` and Meltano Hub show for each choice of a setting with fixed choices
# (the plugin definition, scripts/plugin_definition.py, takes them from here).
OPTION_LABELS: dict[str, dict[str, str]] = {
    "auth_method": {CLIENT_ASSERTION: "Signed client assertion", CLIENT_SECRET: "Client secret"},
    "exclusion_scope": {"automated": "Entitlements with automation on", "all": "Every entitlement"},
}

# The tap's own settings, in order: the SDK adds its built-in ones to the schema's properties
# (the same dict) when a tap is made.
SETTING_NAMES = tuple(CONFIG_SCHEMA["properties"])

SECRET_SETTINGS = frozenset(
    name for name, spec in CONFIG_SCHEMA["properties"].items() if spec.get("secret")
)


class RedactedStr(str):
    """A secret setting's value: it still works as a string, but its ``repr`` hides it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'<redacted>'"


class Settings(Mapping[str, t.Any]):
    """The config as the SDK holds it, each secret setting's value (``secret: true`` in the
    schema) read as a RedactedStr: a repr of the config, or of a copy of it (each stream's
    config, the mapper's), in a log line or a traceback never carries the secret; and an app
    entitlement given in its deprecated shape read in the current one, so that the tap's code
    knows one shape.

    A read-only view, so the SDK's own config stays as it was given (the SDK offers no hook
    to wrap a value, and its dict is private)."""

    def __init__(self, config: Mapping[str, t.Any]) -> None:
        self.given = config

    def __getitem__(self, name: str) -> t.Any:
        value = self.given[name]
        if name in SECRET_SETTINGS and isinstance(value, str):
            return RedactedStr(value)
        if name == "app_entitlement_refs" and isinstance(value, list):
            return [_current_entitlement(entry) for entry in value]
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.given)

    def __len__(self) -> int:
        return len(self.given)

    def __repr__(self) -> str:
        return repr(dict(self))


def _current_entitlement(entry: t.Any) -> t.Any:
    """``{app_id, id}`` (deprecated) as ``{app_id, app_entitlement_id}``; anything else as it
    is (an entry with both names is an error: ``semantic_problems``)."""
    if (
        isinstance(entry, dict)
        and entry.get(DEPRECATED_ENTITLEMENT_ID) is not None
        and entry.get("app_entitlement_id") is None
    ):
        entry = dict(entry)
        entry["app_entitlement_id"] = entry.pop(DEPRECATED_ENTITLEMENT_ID)
    return entry


def deprecations(given: t.Mapping[str, t.Any]) -> list[str]:
    """One warning per setting given in a deprecated shape (the config as given)."""
    refs = given.get("app_entitlement_refs")
    if isinstance(refs, list) and any(
        isinstance(entry, dict) and DEPRECATED_ENTITLEMENT_ID in entry for entry in refs
    ):
        return [
            "app_entitlement_refs: entries of the form {app_id, id} are deprecated; write "
            "{app_id, app_entitlement_id}, as in exclusion_entitlements (read as such for now)"
        ]
    return []


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _schema_problem(error: ValidationError, secrets: t.Container[str]) -> list[str]:
    """One JSON-schema error as ``<setting path>: <what is wrong>`` lines."""
    path = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
    ).lstrip(".")
    if error.validator == "required":
        present = t.cast("dict[str, t.Any]", error.instance)
        required = t.cast("list[str]", error.validator_value)
        missing = [name for name in required if name not in present]
        return [
            f"{path}: {name!r} is a required property" if path else f"{name}: required, but not set"
            for name in missing
        ]
    if error.absolute_path and error.absolute_path[0] in secrets:
        if error.validator == "type":
            types = error.validator_value
            expected = " or ".join(types) if isinstance(types, list) else str(types)
        else:
            expected = "valid"
        return [f"{path}: must be a {expected} (its value is not shown)"]
    return [f"{path}: {error.message}"]


def schema_problems(config: t.Mapping[str, t.Any], schema: dict[str, t.Any]) -> list[str]:
    """The settings that do not match ``schema`` (the tap's and the SDK's built-in settings)."""
    secrets = {name for name, spec in schema["properties"].items() if spec.get("secret")}
    validator = DEFAULT_JSONSCHEMA_VALIDATOR(schema)
    return [
        line
        for error in sorted(validator.iter_errors(dict(config)), key=lambda e: list(e.path))
        for line in _schema_problem(error, secrets)
    ]


def semantic_problems(config: t.Mapping[str, t.Any]) -> list[str]:
    """Checks the JSON schema cannot express; each line names the setting, never the secret."""
    errors: list[str] = []
    for setting, parse in (("client_id", parse_client_id), ("client_secret", parse_client_secret)):
        if not isinstance(config.get(setting), str):
            continue  # missing or not a string: the schema check reports it
        try:
            parse(config[setting])
        except CredentialError as exc:
            errors.append(str(exc))
    if isinstance(api_url := config.get("api_url"), str):
        parts = urlsplit(api_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            errors.append("api_url: must be an absolute URL such as https://host[:port]")
        elif parts.scheme == "http" and not _is_loopback(parts.hostname):
            errors.append(
                "api_url: plain http is allowed only for loopback hosts "
                "(127.0.0.0/8, ::1, localhost), use https"
            )
        elif parts.query or parts.fragment:
            errors.append("api_url: must not carry a query or fragment")
    dates: dict[str, str] = {}
    for setting in ("start_date", "end_date"):
        if isinstance(value := config.get(setting), str):
            try:
                dates[setting] = normalize_timestamp(value)
            except ValueError:
                errors.append(f"{setting}: {value!r} is not an RFC 3339 date-time")
    if len(dates) == 2 and dates["end_date"] <= dates["start_date"]:
        errors.append("end_date: must be later than start_date")
    for index, entry in enumerate(config.get("app_entitlement_refs") or []):
        if not isinstance(entry, dict):
            continue
        given = [
            name
            for name in ("app_entitlement_id", DEPRECATED_ENTITLEMENT_ID)
            if entry.get(name) is not None
        ]
        if len(given) != 1:
            errors.append(
                f"app_entitlement_refs[{index}]: needs app_entitlement_id"
                + (
                    f" (not also {DEPRECATED_ENTITLEMENT_ID!r}, its deprecated name)"
                    if given
                    else ""
                )
            )
    seen: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(config.get("exclusion_entitlements") or []):
        if not isinstance(entry, dict):
            continue
        key = (entry.get("app_id", ""), entry.get("app_entitlement_id", ""))
        if key in seen:
            errors.append(
                f"exclusion_entitlements[{index}]: repeats entry [{seen[key]}] "
                f"(app_id {key[0]}, app_entitlement_id {key[1]})"
            )
        seen.setdefault(key, index)
    return errors


def unknown_settings(config: t.Mapping[str, t.Any], schema: dict[str, t.Any]) -> list[str]:
    """One warning per setting that ``schema`` (the tap's and the SDK's built-in settings) does
    not know, naming the closest known one: a warning, not an error, as Meltano and stream
    maps may pass extra keys."""
    known = list(schema["properties"])
    warnings = []
    for key in sorted(set(config) - set(known)):
        message = f"Unknown setting {key!r} is ignored"
        if close := difflib.get_close_matches(key, known, n=1):
            message += f"; did you mean {close[0]!r}?"
        warnings.append(message)
    return warnings
