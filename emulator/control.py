"""`Emulator`: the controller tests, the demo and benchmarks drive.

It owns the dataset, credential, issued tokens, faults and counters, runs the HTTP server in a
background thread, and exposes its controls both in Python and under `/_emulator/` (for the
demo and benchmarks, which run it as a subprocess).
"""

from __future__ import annotations

import json
import ssl
import threading
from types import TracebackType
from typing import Any

from emulator import auth
from emulator.credentials import Credential, make_credential
from emulator.dataset import Dataset
from emulator.errors import NOT_FOUND, ApiError, bad_request, method_not_allowed
from emulator.faults import Faults
from emulator.paging import PageTokens
from emulator.server import HOST, EmulatorServer
from emulator.stats import Stats
from emulator.timefmt import NS, format_ns


class InFlight:
    """How many /api/ requests are being answered now, and the most at once since a reset."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def enter(self, limit: int) -> bool:
        """Count one more request in; False (and not counted) if `limit` (> 0) is reached."""
        with self._lock:
            if limit and self.now >= limit:
                return False
            self.now += 1
            self.peak = max(self.peak, self.now)
            return True

    def leave(self) -> None:
        with self._lock:
            self.now -= 1

    def reset_peak(self) -> None:
        with self._lock:
            self.peak = self.now


class Emulator:
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
    ) -> None:
        self.dataset = dataset if dataset is not None else Dataset()
        self.credential = credential if credential is not None else make_credential()
        self.faults = Faults()
        self.tokens = auth.TokenStore()
        self.page_tokens = PageTokens()
        self.stats_counter = Stats()
        self.token_lifetime = token_lifetime
        self.latency = latency
        self._port = port
        self._tls = tls  # serve https with this context (see emulator/tls.py)
        # Answer every exclusions request with the first page and the same token, like a
        # gateway ignoring query parameters the operation does not declare.
        self.exclusions_ignore_page_token = exclusions_ignore_page_token
        # Unset fields: True sends them empty ("", false, 0, [], null) on every endpoint, False
        # omits them on every endpoint, None (default) sends them empty on the catalog only
        # (see emulator/unpopulated.py).
        self.emit_unpopulated = emit_unpopulated
        # A tenant's rate limit: beyond this many /api/ requests being answered at once, a
        # request is answered 429 with Retry-After (0: no limit).
        self.max_in_flight = max_in_flight
        self.throttle_retry_after = throttle_retry_after
        self.in_flight = InFlight()
        self._server: EmulatorServer | None = None
        self._thread: threading.Thread | None = None

    # Plain attributes are enough for these two: a single assignment is atomic and each
    # request reads them once. The setters only validate.
    @property
    def token_lifetime(self) -> int:
        return self._token_lifetime

    @token_lifetime.setter
    def token_lifetime(self, seconds: int) -> None:
        if int(seconds) < 1:
            raise ValueError("token_lifetime must be at least 1 second")
        self._token_lifetime = int(seconds)

    @property
    def latency(self) -> float:
        return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("latency must be >= 0")
        self._latency = float(seconds)

    @property
    def max_in_flight(self) -> int:
        return self._max_in_flight

    @max_in_flight.setter
    def max_in_flight(self, requests: int) -> None:
        if isinstance(requests, bool) or int(requests) < 0:
            raise ValueError("max_in_flight must be >= 0 (0: no limit)")
        self._max_in_flight = int(requests)

    @property
    def throttle_retry_after(self) -> int:
        return self._throttle_retry_after

    @throttle_retry_after.setter
    def throttle_retry_after(self, seconds: int) -> None:
        if isinstance(seconds, bool) or int(seconds) < 0:
            raise ValueError("throttle_retry_after must be >= 0 seconds")
        self._throttle_retry_after = int(seconds)

    # ----- lifecycle ------------------------------------------------------------------------

    def start(self) -> Emulator:
        if self._server is not None:
            raise RuntimeError("emulator already started")
        self._server = EmulatorServer(self, self._port, self._tls)
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
        return self.stats_counter.snapshot() | {"peak_in_flight": self.in_flight.peak}

    def reset_stats(self) -> None:
        self.stats_counter.reset()
        self.in_flight.reset_peak()

    def revoke_tokens(self) -> None:
        self.tokens.revoke_all()

    def add_events(self, count: int = 0, dates: list[Any] | None = None) -> int:
        """Append feed events (see Dataset.add_events); returns the new event total."""
        return self.dataset.add_events(count=count, dates=dates)

    def remove(self, **ids: str) -> None:
        """Delete an exclusion, a user, an app entitlement or an app (see Dataset.remove)."""
        self.dataset.remove(**ids)

    def restore(self, **ids: str) -> None:
        """Bring back what remove() deleted (see Dataset.restore)."""
        self.dataset.restore(**ids)

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
        elif action == "settings":
            if "latency" in args:
                self.latency = float(args["latency"])
            if "token_lifetime" in args:
                self.token_lifetime = int(args["token_lifetime"])
            if "exclusions_ignore_page_token" in args:
                if not isinstance(flag := args["exclusions_ignore_page_token"], bool):
                    raise ValueError("exclusions_ignore_page_token must be true or false")
                self.exclusions_ignore_page_token = flag
            if "emit_unpopulated" in args:
                if not isinstance(flag := args["emit_unpopulated"], bool | None):
                    raise ValueError("emit_unpopulated must be true, false or null")
                self.emit_unpopulated = flag
            if "max_in_flight" in args:
                self.max_in_flight = int(args["max_in_flight"])
            if "throttle_retry_after" in args:
                self.throttle_retry_after = int(args["throttle_retry_after"])
            return {
                "latency": self.latency,
                "token_lifetime": self.token_lifetime,
                "exclusions_ignore_page_token": self.exclusions_ignore_page_token,
                "emit_unpopulated": self.emit_unpopulated,
                "max_in_flight": self.max_in_flight,
                "throttle_retry_after": self.throttle_retry_after,
            }
        elif args.get("clear"):
            self.faults.clear()
        elif "random" in args:
            self.faults.random(**args["random"])
        else:
            self.faults.add(**args)
        return {"ok": True}
