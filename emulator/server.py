"""The HTTP front: reading requests, writing answers, fault injection on the wire.

Standard library only (ThreadingHTTPServer, HTTP/1.1 keep-alive, Content-Length on every
answer) so the emulator runs wherever the tap's tests run. The front talks to the rest of the
emulator through what it is handed: a ``Control`` for /_emulator/ and a ``Backend`` for
everything else (which paths exist is the backend's business); it imports nothing that holds
data.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import msgspec

from emulator.errors import CANNED, INVALID_ARGUMENT, ApiError, bad_request, canned
from emulator.faults import Fault

HOST = "127.0.0.1"
MAX_BODY = 1 << 20


@dataclass(frozen=True)
class Request:
    """What the service reads of a request."""

    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    content_type: str | None
    authorization: str | None
    user_agent: str | None = None
    client_ip: str = "127.0.0.1"


class Backend(Protocol):
    """The service behind the front (emulator/service.py)."""

    def admit(self, path: str) -> AbstractContextManager[Fault | None]:
        """Hold the request's place while it is answered; the fault to inject, if any."""
        ...

    def answer(self, request: Request) -> bytes:
        """The encoded body of a 200 answer (``json_body``); raises ApiError for any other
        answer."""
        ...


# The /_emulator/ controls: (method, path, body) -> the JSON body of a 200 answer.
Control = Callable[[str, str, bytes], dict[str, Any]]


def json_body(obj: Any) -> bytes:
    """A JSON body as the service encodes it: compact, UTF-8. msgspec (singer-sdk's
    encoder, installed with it) writes the bytes ``json.dumps(obj, separators=(",", ":"),
    ensure_ascii=False).encode()`` writes (emulator/tests/test_shapes.py), about ten times
    faster: with the standard library, encoding was 4.5% of the offline tests' CPU."""
    return _ENCODE(obj)


_ENCODE = msgspec.json.Encoder().encode


class EmulatorServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, backend: Backend, control: Control, port: int, tls: ssl.SSLContext | None = None
    ) -> None:
        self.backend = backend
        self.control = control
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
            raise ApiError(413, INVALID_ARGUMENT, "request body too large")
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
        url = urlsplit(self.path)
        try:
            body = self._read_body()
            if url.path.startswith("/_emulator/"):
                self._send(200, json_body(self.server.control(method, url.path, body)))
            else:
                self._serve(method, url.path, parse_qs(url.query, keep_blank_values=True), body)
        except ApiError as err:
            self._send(err.status, json_body(err.body()), headers=err.headers)
        except ConnectionError:  # the client hung up (e.g. its read timeout): nothing to say
            self.close_connection = True
        except Exception:  # an emulator bug: say so loudly, answer like a server would
            traceback.print_exc(file=sys.stderr)
            self._send(500, json_body(canned(500).body()))

    def _serve(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> None:
        backend = self.server.backend
        request = Request(
            method,
            path,
            query,
            body,
            self.headers.get("Content-Type"),
            self.headers.get("Authorization"),
            self.headers.get("User-Agent"),
            self.client_address[0],
        )
        with backend.admit(path) as fault:
            if fault and fault.kind == "slow":
                time.sleep(fault.delay)
                fault = None
            answer = b"" if fault else backend.answer(request)
        # Written once the request has left the gateway's count: a client that reads this
        # answer and sends its next request at once (on another connection) must find its
        # place free, as it would at a real gateway, not a 429 under a limit of one nor a
        # peak of two for a client that never had two requests out.
        if fault:
            self._inject(fault)
        else:
            self._send(200, answer)

    def _inject(self, fault: Fault) -> None:
        """Answer with `fault` (any kind but "slow", which only delays the real answer)."""
        self.close_connection = fault.kind in ("drop", "truncated")
        if fault.kind == "drop":
            return
        if fault.kind.isdigit() and int(fault.kind) in CANNED:
            headers = {"Retry-After": fault.retry_after} if fault.kind == "429" else None
            err = canned(int(fault.kind), headers)
            self._send(err.status, json_body(err.body()), headers=err.headers)
        elif fault.kind == "malformed":
            self._send(200, b"<html><body>upstream connect error</body></html>")
        else:  # truncated: promise more bytes than we send, then hang up
            partial = b'{"list":[{"feed":{"appEntitlementId":"'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(partial) + 4096))
            self.end_headers()
            self.wfile.write(partial)
