"""`Emulator`: the controller tests, the demo and benchmarks drive.

It builds the service (emulator/service.py) for a dataset and credential, runs the HTTP front
(emulator/server.py) in a background thread and hands it the service and the controls, and
exposes those controls both in Python and under `/_emulator/` (for the demo and benchmarks,
which run it as a subprocess). It is its own ``Settings``: ``emu.latency = 0.2`` applies to
the next request.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from emulator.auth import Credential, TokenStore, make_credential
from emulator.dataset import Dataset
from emulator.errors import NOT_FOUND, ApiError, bad_request, method_not_allowed
from emulator.faults import Faults
from emulator.server import HOST, EmulatorServer
from emulator.service import Service, Settings
from emulator.timefmt import NS, format_ns


class Emulator(Settings):
    """A local, strict stand-in for the access-governance service (see package docs)."""

    def __init__(
        self,
        dataset: Dataset | None = None,
        credential: Credential | None = None,
        token_lifetime: int = 600,
        port: int = 0,
        latency: float = 0.0,
        tls: ssl.SSLContext | None = None,
        exclusions_ignore_page_token: bool = False,
        emit_unpopulated: bool | None = None,
        max_in_flight: int = 0,
        throttle_retry_after: int = 1,
        shapes: str = "newest",
        log_order: str = "asked",
        log_retention_days: int = 0,
        log_calls: bool = True,
        frozen: bool = False,
        forbidden_operations: Iterable[str] = (),
        absent_operations: Iterable[str] = (),
        inline_app_owners: bool = False,
    ) -> None:
        """``frozen``: the data never changes (the controls that change it refuse) and no
        call is logged (``log_calls`` must be False), so each answer is built once and kept
        (service.FrozenAnswers): for an emulator that many runs only read.
        ``forbidden_operations``: operations a client may not call (403), ``absent_operations``
        operations the release lacks (404), by name or path (service.Operations).
        ``inline_app_owners``: an App's ``appOwners`` carries its owners (default ``[]``)."""
        super().__init__(
            frozen=frozen,
            token_lifetime=token_lifetime,
            latency=latency,
            exclusions_ignore_page_token=exclusions_ignore_page_token,
            emit_unpopulated=emit_unpopulated,
            max_in_flight=max_in_flight,
            throttle_retry_after=throttle_retry_after,
            shapes=shapes,
            log_order=log_order,
            log_retention_days=log_retention_days,
            log_calls=log_calls,
            forbidden_operations=forbidden_operations,
            absent_operations=absent_operations,
            inline_app_owners=inline_app_owners,
        )
        self.service = Service(
            dataset if dataset is not None else Dataset(),
            credential if credential is not None else make_credential(),
            self,
        )
        self._port = port
        self._tls = tls  # serve https with this context (see emulator/tls.py)
        self._server: EmulatorServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def dataset(self) -> Dataset:
        return self.service.dataset

    @property
    def credential(self) -> Credential:
        return self.service.credential

    @property
    def faults(self) -> Faults:
        """The failures planned for the next requests (see emulator/faults.py)."""
        return self.service.faults

    @property
    def tokens(self) -> TokenStore:
        """The access tokens issued so far."""
        return self.service.tokens

    # ----- lifecycle ------------------------------------------------------------------------

    def start(self) -> Emulator:
        if self._server is not None:
            raise RuntimeError("emulator already started")
        self._server = EmulatorServer(self.service, self.control, self._port, self._tls)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Emulator:
        return self.start() if self._server is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("emulator not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://{HOST}:{self.port}"

    # ----- controls -------------------------------------------------------------------------

    @property
    def stats(self) -> dict[str, Any]:
        return self.service.stats()

    def reset_stats(self) -> None:
        self.service.reset_stats()

    def revoke_tokens(self) -> None:
        self.service.tokens.revoke_all()

    def add_events(self, count: int = 0, dates: list[Any] | None = None) -> int:
        """Append feed events (see Dataset.add_events); returns the new event total."""
        self._changing("add events")
        return self.dataset.add_events(count=count, dates=dates)

    def close_tasks(self, count: int | None = None, at: Any = None) -> list[str]:
        """Decide open tasks between two runs (see Dataset.close_tasks); returns their ids."""
        self._changing("close tasks")
        return self.dataset.close_tasks(count=count, at=at)

    def remove(self, **ids: str) -> None:
        """Delete an exclusion, a user, an app entitlement or an app (see Dataset.remove)."""
        self._changing("remove")
        self.dataset.remove(**ids)

    def restore(self, **ids: str) -> None:
        """Bring back what remove() deleted (see Dataset.restore)."""
        self._changing("restore")
        self.dataset.restore(**ids)

    def _changing(self, what: str) -> None:
        if self.frozen:
            raise ValueError(f"cannot {what}: this emulator is frozen (its answers are kept)")

    def tenant(self) -> dict[str, Any]:
        """What a client of this tenant is told, in the service's terms: where it answers, the
        API credential, an instant before every grant event, and the app entitlements that
        have automation exclusions. (How a client turns that into its settings is its own
        business: the emulator knows nothing of the tap.)"""
        before = (self.dataset.first_date - 3600 * NS) // NS * NS
        return {
            "url": self.url,
            "client_id": self.credential.client_id,
            "client_secret": self.credential.client_secret,
            "before_first_event": format_ns(before),
            "exclusion_entitlements": [
                {"app_id": app_id, "app_entitlement_id": ent_id}
                for app_id, ent_id in self.dataset.exclusion_entitlements
            ],
        }

    def control(self, method: str, path: str, body: bytes) -> dict[str, Any]:
        """The `/_emulator/` endpoints: the Python controls, over HTTP."""
        action = path.removeprefix("/_emulator/")
        readers = {"stats": lambda: self.stats, "tenant": self.tenant}
        if action in readers:
            if method != "GET":
                raise method_not_allowed("GET")
            return readers[action]()
        if action not in (
            "reset-stats",
            "events",
            "faults",
            "settings",
            "revoke-tokens",
            "remove",
            "restore",
            "close-tasks",
        ):
            raise ApiError(404, NOT_FOUND, "no such emulator control")
        if method != "POST":
            raise method_not_allowed("POST")
        try:
            args = json.loads(body) if body.strip() else {}
        except ValueError:
            raise bad_request("control body is not valid JSON") from None
        if not isinstance(args, dict):
            raise bad_request("control body must be a JSON object")
        try:
            return self._apply_control(action, args)
        except (ValueError, TypeError) as err:
            raise bad_request(f"bad control request: {err}") from None

    def _apply_control(self, action: str, args: dict[str, Any]) -> dict[str, Any]:
        if action == "reset-stats":
            self.reset_stats()
        elif action == "revoke-tokens":
            self.revoke_tokens()
        elif action in ("remove", "restore"):
            if not all(isinstance(value, str) for value in args.values()):
                raise ValueError("ids must be strings")
            (self.remove if action == "remove" else self.restore)(**args)
        elif action == "events":
            total = self.add_events(count=int(args.get("count", 0)), dates=args.get("dates"))
            return {"total": total}
        elif action == "close-tasks":
            count = args.get("count")
            closed = self.close_tasks(None if count is None else int(count), args.get("at"))
            return {"closed": closed}
        elif action == "settings":
            return self.update_settings(args)
        elif args.get("clear"):
            self.faults.clear()
        elif "random" in args:
            self.faults.random(**args["random"])
        else:
            self.faults.add(**args)
        return {"ok": True}
