"""The tap: settings checked before anything runs, one authenticator, the streams, and failures
on the command line in one line."""

from __future__ import annotations

import contextlib
import sys
import typing as t
from functools import cached_property

from singer_sdk import Tap
from singer_sdk.contrib.msgspec import MsgSpecWriter
from singer_sdk.exceptions import ConfigValidationError, FatalAPIError
from typing_extensions import override

from tap_accessgov import settings
from tap_accessgov.auth import AccessGovAuthenticator, AuthenticationError
from tap_accessgov.credentials import ClientId, RedactedStr, parse_client_id, parse_client_secret
from tap_accessgov.streams import AutomationExclusionsStream, GrantFeedStream, UsersStream

if t.TYPE_CHECKING:
    import click
    from singer_sdk.streams import Stream


class TapAccessGov(Tap):
    """Singer tap for the access-governance service's grant feed and automation exclusions."""

    name = "tap-accessgov"
    config_jsonschema = settings.CONFIG_SCHEMA
    # msgspec serialises a record several times faster than the default simplejson writer.
    message_writer_class = MsgSpecWriter

    def __init__(self, *args: t.Any, validate_config: bool = True, **kwargs: t.Any) -> None:
        """Every bad setting is reported before anything runs, in our words (settings.py)."""
        try:
            super().__init__(*args, validate_config=validate_config, **kwargs)
        except ConfigValidationError as exc:
            problems = settings.schema_problems(self.config, self.config_jsonschema)
            raise ConfigValidationError(
                "Config validation failed",
                errors=(problems or list(exc.errors)) + settings.semantic_problems(self.config),
                schema=self.config_jsonschema,
            ) from None
        if validate_config and (problems := settings.semantic_problems(self.config)):
            raise ConfigValidationError(
                "Config validation failed", errors=problems, schema=self.config_jsonschema
            )
        if isinstance(secret := self.config.get("client_secret"), str):
            # The SDK keeps the config in a private dict behind a read-only view and offers no
            # hook to wrap a value (singer-sdk 0.54): this one write keeps the secret out of
            # any repr of the config (log lines, tracebacks).
            self._config["client_secret"] = RedactedStr(secret)

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
            auth_method=self.config["auth_method"],
            token_url=f"{self.api_url}/auth/v1/token",
        )

    @override
    def discover_streams(self) -> list[Stream]:
        return [
            GrantFeedStream(self, connection=self),
            AutomationExclusionsStream(self, connection=self),
            UsersStream(self),
        ]


if __name__ == "__main__":
    TapAccessGov.cli()
