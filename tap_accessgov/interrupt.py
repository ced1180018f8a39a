"""HTTP calls in flight that a stopping sync ends at once.

A worker thread inside an HTTP call waits for the answer up to ``request_timeout`` (300 s by
default), and neither requests nor urllib3 can cancel a call from another thread, so a failed
run that joined its workers sat that long before it exited. Shutting the call's socket down
ends it at once: the blocked read sees the connection closed, the call fails with a
connection error, and the stopping sync does not retry it (request_budget.SyncStopped).

urllib3 does not keep the connections it has lent out, so the adapter here has its pools'
connections note themselves as they are made (a subclass of the pool's own connection class,
so TLS, proxies and every other setting stay urllib3's). Until the sync resumes, a connection
that connects after the hang-up (its thread was between the budget and the socket) is hung
up as soon as it is connected.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import typing as t
import weakref

from requests.adapters import HTTPAdapter
from typing_extensions import override
from urllib3.connectionpool import HTTPConnectionPool

if t.TYPE_CHECKING:
    import requests
    from urllib3.connection import HTTPConnection
    from urllib3.connectionpool import ConnectionPool


class InterruptibleAdapter(HTTPAdapter):
    """requests' adapter (same pools, same settings), whose connections can all be hung up
    from another thread (``hang_up``)."""

    def __init__(self) -> None:
        self._connections: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._hung_up = False
        super().__init__()

    @override
    def get_connection_with_tls_context(
        self,
        request: requests.PreparedRequest,
        verify: bool | str | None,
        proxies: t.Mapping[str, str] | None = None,
        cert: tuple[str, str] | str | None = None,
    ) -> ConnectionPool:
        """The pool requests would use, its connection class made to note each connection."""
        pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
        if (
            isinstance(pool, HTTPConnectionPool)  # HTTPS pools too
            and getattr(pool.ConnectionCls, "noted_by", None) is not self
        ):
            pool.ConnectionCls = self._noting(pool.ConnectionCls)
        return pool

    def _noting(self, base: type[t.Any]) -> type[t.Any]:
        adapter = self

        def __init__(connection: HTTPConnection, *args: t.Any, **kwargs: t.Any) -> None:
            base.__init__(connection, *args, **kwargs)
            with adapter._lock:
                adapter._connections.add(connection)

        def connect(connection: HTTPConnection) -> None:
            base.connect(connection)
            with adapter._lock:
                hung_up = adapter._hung_up
            if hung_up:
                _shut_down(connection)

        members = {"__init__": __init__, "connect": connect, "noted_by": self}
        return type(base.__name__, (base,), members)

    def hang_up(self) -> None:
        """Shut down every open connection, and every one that connects until ``resume``:
        calls in flight fail at once, idle connections are replaced on their next use
        (urllib3 checks a pooled connection before it reuses it)."""
        with self._lock:
            self._hung_up = True
            connections = list(self._connections)
        for connection in connections:
            _shut_down(connection)

    def resume(self) -> None:
        """New connections work again (the stopped sync's threads are gone)."""
        with self._lock:
            self._hung_up = False


def _shut_down(connection: HTTPConnection) -> None:
    if (sock := connection.sock) is not None:
        with contextlib.suppress(OSError):
            # The plain socket's shutdown, also under TLS: it wakes a blocked read without
            # touching the TLS state the reading thread is using.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


def interruptible(session: requests.Session) -> InterruptibleAdapter:
    """Mount one InterruptibleAdapter for every URL of ``session``; returns it."""
    adapter = InterruptibleAdapter()
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return adapter
