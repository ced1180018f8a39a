"""The tap: settings checked before anything runs, one authenticator, the streams in sync
order, the run's final STATE, and the command line's additions to the SDK's (input files and
failures in one line).

Where the tap bends singer-sdk (0.54, and 0.55's pre-releases), each in one place:

1. ``TapAccessGov.sync_all``, final in the SDK, is overridden: after the SDK's sync of every
   stream, a STATE holding the whole state ends a successful run, and the run says how the
   service slowed it down. Why: the SDK writes a STATE only when the state changed, so a run
   with nothing new ended on a RECORD, and a target that echoes the last STATE it saw
   (target-jsonl) kept none; the SDK has no hook at the end of a successful run. Would go
   with such a hook, or with the SDK writing the whole state at the end of every run.
2. ``TapStream.sync`` (engine/stream.py), final in the SDK, is overridden: however a stream's sync
   ends, the worker threads it drives end with it (engine/concurrency.py), the records it wrote leave
   the writer's chunk (output.py), and a failed run still says how the service slowed it
   down. Why: the SDK has no hook at the end of a stream's sync, and
   a failure outside ``get_records`` (a stream map, a closed output) leaves the records
   generator suspended in the traceback, its workers still fetching. Would go with a hook
   that runs when a stream's sync ends however it ends, or with concurrency in the SDK
   (sdk#183, sdk#2121), which would own the threads.
3. A ``paging.Page`` travels where the SDK declares a ``requests.Response``: the request path
   (``AccessGovStream.request_decorator``) answers it, and the SDK hands it on untouched to
   ``parse_response``, the paginator and ``update_sync_costs``. Why: the body is parsed once,
   inside the retried attempt, so a malformed 200 is retried like a dropped connection; the
   SDK would parse it again in ``parse_response`` and in the paginator, after the retries.
   Would go with an SDK hook that parses a response once, inside the retried call, and hands
   the parsed body to the hooks that read it.
4. ``TapStream._generate_record_messages`` (engine/stream.py), a private of the SDK, is
   overridden: where the catalog selects every property, a record's messages are made
   without the SDK's selection pass, which copies and walks every record to remove nothing
   (``output.record_messages``, which reads the stream's private ``_stream_version``);
   otherwise it is the SDK's own. Why: the SDK has no hook between ``post_process`` and the
   message. Would go with an SDK that skips the pass when nothing is deselected.
5. The tap's state writer, the SDK's private ``Tap._state_writer``, is the tap's own
   (output.StateWriter, set in ``TapAccessGov.__init__``): the same STATEs, the last one
   kept as its JSON instead of a deep copy of the whole state after every STATE. Why: the
   SDK builds its writer in its ``__init__`` and reads the attribute itself; a public
   ``state_writer`` property alone would leave the SDK's writes on its own. Would go with a
   writer class the SDK lets a tap name, as it does its message writer, or an SDK that
   compares states without copying them.
6. ``BatchFilesStream.batch_files`` (engine/batch_files.py) reads a stream's records for its
   BATCH files through the SDK's private ``Stream._sync_records``, as the SDK's own
   ``get_batches`` does: the files' records get their instants cut to microseconds, and JSON
   lines without compression are written as the setting says (the SDK gzips them all). Why:
   the SDK has no public way to a stream's synced records without their RECORD messages.
   Would go with an SDK batcher that honours ``compression`` and a target that parses a
   file's instants as it does a RECORD message's.
"""

from __future__ import annotations

import copy
import typing as t
from functools import cached_property

import click
from singer_sdk import Tap
from singer_sdk.exceptions import ConfigValidationError
from singer_sdk.singerlib import StateMessage
from singer_sdk.tap_base import CliTestOptionValue
from typing_extensions import override

from tap_accessgov import cli, settings
from tap_accessgov.auth import (
    AccessGovAuthenticator,
    ClientId,
    parse_client_id,
    parse_client_secret,
)
from tap_accessgov.engine.concurrency import Concurrency
from tap_accessgov.engine.partitions import ConcurrentPartitionsStream
from tap_accessgov.output import OutputWriter, StateWriter
from tap_accessgov.request_budget import RequestBudget
from tap_accessgov.streams import STREAM_TYPES, discover
from tap_accessgov.streams.full_table_snapshots import FullTableSnapshotsStream

if t.TYPE_CHECKING:
    from singer_sdk.streams import Stream


class TapAccessGov(Tap):
    """Singer tap for the access-governance service: grant feed, catalog, automation exclusions."""

    name = "tap-accessgov"
    config_jsonschema = settings.CONFIG_SCHEMA
    message_writer_class = OutputWriter

    def __init__(self, *args: t.Any, validate_config: bool = True, **kwargs: t.Any) -> None:
        """Every bad setting is reported before anything runs, in our words (settings.py)."""
        try:
            super().__init__(*args, validate_config=validate_config, **kwargs)
            schema_failure = None
        except ConfigValidationError as exc:
            schema_failure = exc
        # Before any error: a mistyped setting often explains the error that follows.
        for warning in settings.unknown_settings(self.config, self.settings_schema()):
            self.logger.warning(warning)
        for warning in settings.deprecations(self.config.given):
            self.logger.warning(warning)
        if schema_failure is not None:
            problems = settings.schema_problems(self.config, self.config_jsonschema)
            raise ConfigValidationError(
                "Config validation failed",
                errors=(problems or list(schema_failure.errors))
                + settings.semantic_problems(self.config),
                schema=self.config_jsonschema,
            ) from None
        if validate_config and (problems := settings.semantic_problems(self.config)):
            raise ConfigValidationError(
                "Config validation failed", errors=problems, schema=self.config_jsonschema
            )
        self._state_writer = StateWriter(self.message_writer)  # the fifth bend (above)

    @cached_property
    @override
    def config(self) -> settings.Settings:
        """The SDK's read-only config, the secret's value hidden from any repr, a deprecated
        shape read in the current one (settings.py)."""
        return settings.Settings(super().config)

    @classmethod
    def settings_schema(cls) -> dict[str, t.Any]:
        """The tap's settings and those the SDK adds (stream maps, flattening, batch...)."""
        schema = copy.deepcopy(cls.config_jsonschema)
        cls.append_builtin_config(schema)
        return schema

    @classmethod
    @override
    def invoke(  # type: ignore[override]
        cls,
        *,
        about: bool = False,
        about_format: str | None = None,
        config: t.Any = None,
        state: t.IO[str] | None = None,
        catalog: t.IO[str] | None = None,
    ) -> None:
        """The SDK's run, plus: ``--state`` and ``--catalog`` files that are not JSON objects
        fail in one line naming the file (the SDK prints a traceback), and so does every
        failure the tap explains (cli.py). The files are read here once and handed on as the
        SDK reads them; the final STATE is the run's own (``sync_all``)."""
        with cli.failing_in_one_line(cls.logger):
            if not about:
                state = cli.checked_json_file(state, "state")
                catalog = cli.checked_json_file(catalog, "catalog")
            super().invoke(
                about=about,
                about_format=about_format,
                config=config,
                state=state,
                catalog=catalog,
            )

    @classmethod
    @override
    def cb_config(cls, ctx: click.Context, param: click.Option, value: tuple[str, ...]) -> t.Any:
        """``--config FILE``: a missing file or one that is not a JSON object fails in one line
        naming it (the SDK prints a traceback)."""
        with cli.failing_in_one_line(cls.logger):
            for path in value:
                if path != "ENV":
                    cli.read_json_file(path, "config")
        return super().cb_config(ctx, param, value)

    @classmethod
    @override
    def cb_test(cls, ctx: click.Context, param: click.Option, value: str) -> None:
        """``--test``: click runs it before the command, outside the SDK's error handling.
        On success it says so in one line."""
        with cli.failing_in_one_line(cls.logger):
            try:
                super().cb_test(ctx, param, value)
            except click.exceptions.Exit as done:
                if done.exit_code == 0 and value == CliTestOptionValue.All.value:
                    cls.logger.info(
                        "Connection test passed: an access token was obtained and each stream "
                        "answered (%s)",
                        ", ".join(stream.name for stream in STREAM_TYPES),  # type: ignore[misc]
                    )
                raise

    @override  # type: ignore[misc]  # final in the SDK: the first bend of the docstring
    def sync_all(self) -> None:
        """The SDK's sync of every stream (it stops at the first that fails); then the end of
        a successful run: how often the service asked the tap to slow down, and a STATE
        holding the whole state, the last message of the run."""
        super().sync_all()
        self.request_budget.report()
        self.write_message(StateMessage(value=self.state))

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

    @property
    @override
    def streams(self) -> dict[str, Stream]:
        """The streams in the order ``sync_all`` syncs them (see ``streams_in_sync_order``)."""
        return self.streams_in_sync_order

    @cached_property
    def streams_in_sync_order(self) -> dict[str, Stream]:
        """The SDK's streams (built once and kept by the SDK, sorted by name: ``load_streams``
        is final), in a dict of the tap's own, made once, with ``full_table_snapshots`` moved
        last: it says which full-table streams were synced in full, so it comes after all of
        them. The SDK's own dict is left as it is."""
        streams = dict(super().streams)
        last = FullTableSnapshotsStream.name
        streams[last] = streams.pop(last)
        return streams

    @cached_property
    def concurrency(self) -> Concurrency:
        """The run's one owner of concurrency: ``max_concurrency``, read here alone."""
        return Concurrency(int(self.config["max_concurrency"]))

    @cached_property
    def request_budget(self) -> RequestBudget:
        """One budget of requests in flight for every stream and worker of the run, from the
        same limit (a 429 lowers it for a while: request_budget.py)."""
        return RequestBudget(self.concurrency.limit, self.logger)

    @override
    def discover_streams(self) -> list[Stream]:
        """The streams of ``streams.STREAM_TYPES``, each handed the streams it reads. The SDK
        syncs them by name (see ``streams``), so none relies on another having synced first:
        ``app_entitlements`` reads the apps, the exclusions the entitlements, ``users`` the
        exclusions, each on demand and once per run; only ``full_table_snapshots`` must come
        last. Each stream that starts worker threads ends them when its sync ends."""
        return discover(self, self)

    @override
    def load_state(self, state: dict[str, t.Any]) -> None:
        """The SDK's, then the one backward-compatibility patch: a state written before the
        streams read per partition kept one state each holds an entry per partition (its
        context, nothing to resume), which every STATE message would carry on."""
        super().load_state(state)
        bookmarks = self.state.get("bookmarks", {})
        for stream in STREAM_TYPES:
            if issubclass(stream, ConcurrentPartitionsStream):
                bookmarks.get(stream.name, {}).pop("partitions", None)  # type: ignore[misc]


if __name__ == "__main__":
    TapAccessGov.cli()
