"""The HTTP front: routing, latency and fault injection.

Standard library only (ThreadingHTTPServer, HTTP/1.1 keep-alive, Content-Length on every
answer) so the emulator runs wherever the tap's tests run.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import ssl
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from emulator import auth
from emulator.errors import (
    INTERNAL,
    NOT_FOUND,
    RESOURCE_EXHAUSTED,
    UNAVAILABLE,
    ApiError,
    bad_request,
    method_not_allowed,
)
from emulator.exclusions import list_automation_exclusions
from emulator.faults import TOKEN_PATH, Fault
from emulator.feed import search_grant_feed

if TYPE_CHECKING:
    from emulator.control import Emulator

HOST = "127.0.0.1"
FEED_PATH = "/api/v1/grants/feed"
EXCLUSIONS = re.compile(r"/api/v1/apps/([^/]+)/entitlements/([^/]+)/automation/exclusions")
MAX_BODY = 1 << 20
GATEWAY_ERRORS = {
    "429": (RESOURCE_EXHAUSTED, "rate limit exceeded"),
    "500": (INTERNAL, "internal error"),
    "502": (UNAVAILABLE, "unavailable"),
    "503": (UNAVAILABLE, "unavailable"),
    "504": (UNAVAILABLE, "unavailable"),
    # Answers the real service gives on its own: a token revoked server-side, a credential
    # whose scope or allowed IPs exclude the call, a request it rejects.
    "401": (16, "unauthenticated: access token revoked"),
    "403": (7, "permission denied: the API key's scope does not allow this call"),
    "400": (3, "invalid argument"),
}


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


class EmulatorServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, emulator: Emulator, port: int, tls: ssl.SSLContext | None = None) -> None:
        self.emulator = emulator
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__((HOST, port), _Handler)
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a killed tap) is not an emulator error: stay quiet."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        """Hang up on keep-alive clients so a stopped emulator really is gone."""
        with self.connections_lock:
            for conn in list(self.connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "accessgov-emulator/1"
    disable_nagle_algorithm = True  # headers and body go out in two writes; don't stall
    server: EmulatorServer

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and benchmarks read stats, not access logs."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    # ----- plumbing -------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                line = self.rfile.readline(1024).split(b";")[0].strip()
                try:
                    size = int(line, 16)
                except ValueError:
                    self.close_connection = True
                    raise bad_request("bad chunked encoding") from None
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(1024)
        length_text = self.headers.get("Content-Length") or "0"
        if not length_text.isdigit():
            self.close_connection = True
            raise bad_request("bad Content-Length")
        length = int(length_text)
        if length > MAX_BODY:
            self.close_connection = True
            raise ApiError(413, 3, "request body too large")
        return self.rfile.read(length)

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _dispatch(self, method: str) -> None:
        emu = self.server.emulator
        url = urlsplit(self.path)
        try:
            body = self._read_body()
            if url.path.startswith("/_emulator/"):
                self._send(200, _json(emu.control(method, url.path, body)))
            elif url.path == TOKEN_PATH:
                self._token(method, body)
            elif url.path.startswith("/api/"):
                self._api(method, url.path, parse_qs(url.query, keep_blank_values=True), body)
            else:
                raise ApiError(404, NOT_FOUND, "not found")
        except ApiError as err:
            self._send(err.status, _json(err.body()), headers=err.headers)
        except ConnectionError:  # the client hung up (e.g. its read timeout): nothing to say
            self.close_connection = True
        except Exception:  # an emulator bug: say so loudly, answer like a server would
            traceback.print_exc(file=sys.stderr)
            self._send(500, _json(ApiError(500, INTERNAL, "internal error").body()))

    def _inject(self, fault: Fault) -> bool:
        """Apply `fault`; True if the request is fully answered (or dropped)."""
        self.server.emulator.stats_counter.count("faults_injected", fault.kind)
        if fault.kind == "slow":
            time.sleep(fault.delay)
            return False
        self.close_connection = fault.kind in ("drop", "truncated")
        if fault.kind == "drop":
            return True
        if fault.kind in GATEWAY_ERRORS:
            code, message = GATEWAY_ERRORS[fault.kind]
            headers = {"Retry-After": fault.retry_after} if fault.kind == "429" else None
            body = _json({"code": code, "message": message, "details": []})
            self._send(int(fault.kind), body, headers=headers)
        elif fault.kind == "malformed":
            self._send(200, b"<html><body>upstream connect error</body></html>")
        else:  # truncated: promise more bytes than we send, then hang up
            partial = b'{"list":[{"feed":{"appEntitlementId":"'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(partial) + 4096))
            self.end_headers()
            self.wfile.write(partial)
        return True

    # ----- endpoints ------------------------------------------------------------------------

    def _token(self, method: str, body: bytes) -> None:
        emu = self.server.emulator
        emu.stats_counter.count("token_requests")
        fault = emu.faults.take(TOKEN_PATH)
        if fault and self._inject(fault):
            return
        try:
            if method != "POST":
                raise method_not_allowed("POST")
            form = auth.parse_form(self.headers.get("Content-Type"), body)
            login = auth.login_method(form)
            emu.stats_counter.count("token_method", login)
            auth.authenticate(form, login, emu.credential)
        except ApiError:
            emu.stats_counter.count("token_failures")
            raise
        self._send(200, _json(auth.token_response(emu.tokens, emu.token_lifetime)))

    def _api(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> None:
        emu = self.server.emulator
        emu.stats_counter.count("api_requests", path)
        if not emu.in_flight.enter(emu.max_in_flight):
            emu.stats_counter.count("throttled", path)
            code, message = GATEWAY_ERRORS["429"]
            raise ApiError(
                429, code, message, headers={"Retry-After": str(emu.throttle_retry_after)}
            )
        try:
            self._answer_api(emu, method, path, query, body)
        finally:
            emu.in_flight.leave()

    def _answer_api(
        self, emu: Emulator, method: str, path: str, query: dict[str, list[str]], body: bytes
    ) -> None:
        if emu.latency:
            time.sleep(emu.latency)
        fault = emu.faults.take(path)
        if fault and self._inject(fault):
            return
        try:
            auth.check_bearer(emu.tokens, self.headers.get("Authorization"))
        except ApiError:
            emu.stats_counter.count("unauthorized")
            raise
        match = EXCLUSIONS.fullmatch(path)
        if path == FEED_PATH:
            if method != "POST":
                raise method_not_allowed("POST")
            result = search_grant_feed(emu.dataset, emu.page_tokens, body)
        elif match:
            if method != "GET":
                raise method_not_allowed("GET")
            app_id, entitlement_id = unquote(match.group(1)), unquote(match.group(2))
            result = list_automation_exclusions(
                emu.dataset,
                emu.page_tokens,
                app_id,
                entitlement_id,
                query,
                ignore_paging=emu.exclusions_ignore_page_token,
            )
        else:
            raise ApiError(404, NOT_FOUND, "not found")
        self._send(200, _json(result))
