"""The tap: its settings, their validation, the shared authenticator and the streams."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import re
import sys
import typing as t
from functools import cached_property
from urllib.parse import urlsplit

from singer_sdk import Tap
from singer_sdk import typing as th
from singer_sdk.exceptions import ConfigValidationError, FatalAPIError
from typing_extensions import override

from tap_accessgov.auth import (
    AUTH_METHODS,
    CLIENT_ASSERTION,
    AccessGovAuthenticator,
    AuthenticationError,
    ClientId,
    CredentialError,
    RedactedStr,
    parse_client_id,
    parse_client_secret,
)
from tap_accessgov.output import BufferedMsgSpecWriter
from tap_accessgov.streams import AutomationExclusionsStream, GrantFeedStream, UsersStream

if t.TYPE_CHECKING:
    import click
    from singer_sdk.streams import Stream

DEFAULT_PAGE_SIZE = 100
DEFAULT_MAX_CONCURRENCY = 8
DEFAULT_MAX_RETRIES = 5
DEFAULT_REQUEST_TIMEOUT = 300


def _ref(id_description: str) -> th.ObjectType:
    return th.ObjectType(
        th.Property("app_id", th.StringType(min_length=1), required=True, description="App id."),
        th.Property("id", th.StringType(min_length=1), required=True, description=id_description),
        additional_properties=False,
    )


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
        description="Grant feed lower bound ('after') for the first run, when there is no state.",
    ),
    th.Property(
        "end_date",
        th.DateTimeType,
        title="End date",
        description="Grant feed upper bound ('before', exclusive) on every run.",
    ),
    th.Property(
        "page_size",
        th.IntegerType(minimum=10, maximum=100),
        default=DEFAULT_PAGE_SIZE,
        title="Page size",
        description="Results per page on every list and search request (10-100).",
    ),
    th.Property(
        "max_concurrency",
        th.IntegerType(minimum=1, maximum=16),
        default=DEFAULT_MAX_CONCURRENCY,
        title="Max concurrency",
        description=(
            "How many automation-exclusion entitlements are fetched at the same time "
            "(1 = one after another). Output order and content do not depend on it."
        ),
    ),
    th.Property(
        "max_retries",
        th.IntegerType(minimum=0, maximum=20),
        default=DEFAULT_MAX_RETRIES,
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
        default=DEFAULT_REQUEST_TIMEOUT,
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
        th.ArrayType(_ref("App entitlement id.")),
        title="App entitlement filter",
        description="Grant feed: only events of these app entitlements (appEntitlementRefs).",
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
            "Grant feed: related objects to expand (expandMask.paths, e.g. app, "
            "app_entitlement, app_user, ticket). Each expanded object is put into the record "
            "(app, entitlement, appUser, ticket)."
        ),
    ),
    th.Property(
        "exclusion_entitlements",
        th.ArrayType(
            th.ObjectType(
                th.Property("app_id", th.StringType(min_length=1), required=True),
                th.Property("app_entitlement_id", th.StringType(min_length=1), required=True),
                additional_properties=False,
            )
        ),
        title="Entitlements with automation exclusions",
        description=(
            "The app entitlements whose automation exclusions (and excluded users) are "
            "extracted: a list of {app_id, app_entitlement_id}."
        ),
    ),
).to_dict()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _parse_datetime(value: str) -> datetime.datetime:
    parsed = datetime.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


_SCHEMA_ERROR = re.compile(r"^(?P<what>.*) in config(?P<path>(?:\[[^\]]*\])+)$", re.DOTALL)
_REQUIRED = re.compile(r"^'(?P<name>[^']+)' is a required property$")
_PATH_PART = re.compile(r"\[(?:'([^']*)'|(\d+))\]")


def name_first(error: str, secret_settings: t.Container[str]) -> str:
    """An SDK schema error ("5 is less than ... in config['page_size']") in the form of ours
    ("page_size: 5 is less than ..."); a secret's value, which the SDK repeats, is dropped."""
    if match := _REQUIRED.match(error):
        return f"{match['name']}: required, but not set"
    if (match := _SCHEMA_ERROR.match(error)) is None:
        return error
    parts = _PATH_PART.findall(match["path"])
    path = "".join(f".{key}" if key else f"[{index}]" for key, index in parts).lstrip(".")
    if parts and parts[0][0] in secret_settings:
        return f"{path}: must be a string (its value is not shown)"
    return f"{path}: {match['what']}"


def settings_errors(config: t.Mapping[str, t.Any]) -> list[str]:
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
    dates: dict[str, datetime.datetime] = {}
    for setting in ("start_date", "end_date"):
        if isinstance(value := config.get(setting), str):
            try:
                dates[setting] = _parse_datetime(value)
            except (TypeError, ValueError):
                errors.append(f"{setting}: {value!r} is not an RFC 3339 date-time")
    if len(dates) == 2 and dates["end_date"] <= dates["start_date"]:
        errors.append("end_date: must be later than start_date")
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


class TapAccessGov(Tap):
    """Singer tap for the access-governance service's grant feed and automation exclusions."""

    name = "tap-accessgov"
    config_jsonschema = CONFIG_SCHEMA
    # msgspec serialises a record several times faster than the default simplejson writer;
    # records are flushed in chunks (output.py).
    message_writer_class = BufferedMsgSpecWriter

    def __init__(self, *args: t.Any, **kwargs: t.Any) -> None:
        super().__init__(*args, **kwargs)
        if isinstance(secret := self._config.get("client_secret"), str):
            self._config["client_secret"] = RedactedStr(secret)

    @override
    def _validate_config(self, *, raise_errors: bool = True) -> list[str]:
        """Schema validation by the SDK, then the checks a schema cannot express."""
        try:
            errors = super()._validate_config(raise_errors=raise_errors)
        except ConfigValidationError as exc:
            errors = list(exc.errors)
        secret = {n for n, p in self.config_jsonschema["properties"].items() if p.get("secret")}
        errors = [name_first(error, secret) for error in errors]
        if not raise_errors:
            return errors
        if errors := errors + settings_errors(self.config):
            raise ConfigValidationError(
                "Config validation failed", errors=errors, schema=self.config_jsonschema
            )
        return errors

    @classmethod
    @contextlib.contextmanager
    def _failing_in_one_line(cls) -> t.Iterator[None]:
        """A failure the tap explains (bad config, authentication, an API error after
        retries) ends in one line naming what is wrong, exit code 1; the traceback is at DEBUG."""
        try:
            yield
        except ConfigValidationError as exc:
            # One line, so that `meltano config test`, which shows the last one, shows all.
            cls.logger.error("Config validation failed: %s", "; ".join(exc.errors))
            sys.exit(1)
        except (AuthenticationError, FatalAPIError) as exc:
            cls.logger.debug("Run failed", exc_info=True)
            cls.logger.error("Run failed: %s", exc)
            sys.exit(1)

    @classmethod
    @override
    def invoke(cls, **kwargs: t.Any) -> None:
        with cls._failing_in_one_line():
            super().invoke(**kwargs)

    @classmethod
    @override
    def cb_test(cls, ctx: click.Context, param: click.Option, value: str) -> None:
        """``--test``: click runs it before the command, outside the SDK's error handling."""
        with cls._failing_in_one_line():
            super().cb_test(ctx, param, value)

    @cached_property
    def client_id(self) -> ClientId:
        """The parsed client id (validated at start-up)."""
        return parse_client_id(self.config["client_id"])

    @cached_property
    def api_url(self) -> str:
        """Root of token and API calls: the override, or https://<hostname> of the client id."""
        return str(self.config.get("api_url") or self.client_id.base_url).rstrip("/")

    @cached_property
    def authenticator(self) -> AccessGovAuthenticator:
        """One authenticator, so one token, for every stream of the run."""
        return AccessGovAuthenticator(
            client_id=self.client_id,
            client_secret=parse_client_secret(self.config["client_secret"]),
            auth_method=self.config.get("auth_method", CLIENT_ASSERTION),
            token_url=f"{self.api_url}/auth/v1/token",
        )

    @override
    def discover_streams(self) -> list[Stream]:
        return [GrantFeedStream(self), AutomationExclusionsStream(self), UsersStream(self)]


if __name__ == "__main__":
    TapAccessGov.cli()
