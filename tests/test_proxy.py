"""The proxy of the environment (HTTP(S)_PROXY, NO_PROXY) carries every API call, also now
that the tap resolves it once per run instead of on every request (client.pin_proxies)."""

from __future__ import annotations

import http.client
import http.server
import os
import threading
import typing as t
import urllib.parse
from collections import Counter
from pathlib import Path

import pytest

from emulator import Dataset, Emulator
from tests.conftest import CREDENTIAL, SMALL_DATASET, config_file, parse_singer, run_cli, tap_config

PROXY_VARIABLES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


class RecordingProxy(http.server.ThreadingHTTPServer):
    """A forward proxy for plain http that counts the paths it carried."""

    def __init__(self) -> None:
        self.paths: Counter[str] = Counter()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> RecordingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    server: RecordingProxy
    protocol_version = "HTTP/1.1"

    def forward(self) -> None:
        target = urllib.parse.urlsplit(self.path)  # a proxy gets the absolute URL
        with self.server.lock:
            self.server.paths[target.path] += 1
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() != "proxy-connection"}
        upstream = http.client.HTTPConnection(target.hostname or "", target.port, timeout=60)
        path = target.path + (f"?{target.query}" if target.query else "")
        upstream.request(self.command, path, body=body or None, headers=headers)
        response = upstream.getresponse()
        payload = response.read()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        upstream.close()

    do_GET = do_POST = forward

    def log_message(self, format: str, *args: t.Any) -> None:
        pass


@pytest.mark.cli
def test_the_environment_proxy_carries_every_api_call_and_no_proxy_bypasses_it(
    tmp_path: Path,
) -> None:
    clean = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARIABLES}
    with (
        Emulator(Dataset(**SMALL_DATASET), credential=CREDENTIAL) as emu,
        RecordingProxy() as proxy,
    ):
        path = config_file(tap_config(emu), tmp_path)

        proxied = run_cli("--config", path, env={**clean, "HTTP_PROXY": proxy.url})
        assert proxied.returncode == 0, proxied.stderr[-2000:]
        records = parse_singer(proxied.stdout).counts()
        assert records["grant_feed"] == SMALL_DATASET["events"]
        assert records["automation_exclusions"] > 0
        served = emu.stats["api_requests_by_path"]
        carried = {p: n for p, n in proxy.paths.items() if p.startswith("/api/")}
        assert carried == served  # every API call, of every stream, went through the proxy
        assert sum(carried.values()) > 10

        proxy.paths.clear()
        emu.reset_stats()
        bypassed = run_cli(
            "--config", path, env={**clean, "HTTP_PROXY": proxy.url, "NO_PROXY": "127.0.0.1"}
        )
        assert bypassed.returncode == 0, bypassed.stderr[-2000:]
        # The same records, and a longer system log: the proxied run's calls are in it.
        again = parse_singer(bypassed.stdout).counts()
        assert again - Counter({"system_log": again["system_log"]}) == records - Counter(
            {"system_log": records["system_log"]}
        )
        assert again["system_log"] > records["system_log"] > 0
        assert emu.stats["api_requests"] > 10
        assert not proxy.paths
