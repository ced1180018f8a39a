"""The two ways to read the grants a tenant holds now, measured side by side in one run: per
entitlement (``GET /api/v1/apps/{app_id}/entitlements/{app_entitlement_id}/users``, one request
series per entitlement of the catalog) versus per app (``POST /api/v1/search/grants`` with
``appIds: [app]``, one series per app), pages of 100, against an emulator process answering
each request after ``--latency`` seconds (default 50 ms).

Both ways need the catalog first (apps; for the first, each app's entitlements too); its
requests are counted apart, as a tap reads the catalog anyway. Each way runs with each
``--workers`` count (requests in flight at once; the tap's ``max_concurrency`` defaults to 8),
the ways alternating, ``--rounds`` times; the figures are the emulator's request counters and
the median wall time. Both ways must find the same grants, or the run fails.

Tenants: ``demo`` is the emulator's defaults; ``large`` has 200 apps, 2,000 app entitlements
and about 20,000 accounts (160 apps with grants, 125 users each, plus their service
accounts; 40 catalog-only apps, nobody holding their entitlements).

    .venv/bin/python -m benchmarks.grants_ways_benchmark [--tenants demo,large] [--workers 1,8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import typing as t
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from harness.support import EmulatorProcess

PAGE = 100
TENANTS: dict[str, list[str]] = {
    "demo": [],
    "large": [
        "--apps",
        "160",
        "--catalog-apps",
        "200",
        "--catalog-entitlements",
        "2000",
        "--users",
        "125",
        "--grants-before-feed",
        "60000",
    ],
}
Grant = tuple[str, str, str]


class Client:
    """A token for the tenant (``login`` before each measured side: a token lasts 10 minutes,
    a sequential side on the large tenant about 2), a requests session per worker thread."""

    def __init__(self, emulator: EmulatorProcess) -> None:
        self._tenant = emulator.tenant()
        self.url = self._tenant["url"]
        self._local = threading.local()
        self._lock = threading.Lock()
        self.received = 0  # bytes of the answers' bodies
        self.login()

    def login(self) -> None:
        token = requests.post(
            f"{self.url}/auth/v1/token",
            data={
                "grant_type": "client_credentials",
                "client_id": self._tenant["client_id"],
                "client_secret": self._tenant["client_secret"],
            },
            timeout=30,
        ).json()["access_token"]
        self._headers = {"Authorization": f"Bearer {token}"}
        self._local = threading.local()  # new sessions carry the new token

    def _count(self, response: requests.Response) -> dict[str, t.Any]:
        response.raise_for_status()
        with self._lock:
            self.received += len(response.content)
        return t.cast("dict[str, t.Any]", response.json())

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.headers.update(self._headers)
        return session

    def get_all(self, path: str) -> list[dict[str, t.Any]]:
        items: list[dict[str, t.Any]] = []
        token = ""
        while True:
            params = {"page_size": PAGE} | ({"page_token": token} if token else {})
            page = self._count(self._session().get(self.url + path, params=params, timeout=60))
            items += page.get("list") or []
            if not (token := page.get("nextPageToken") or ""):
                return items

    def search_all(self, path: str, body: dict[str, t.Any]) -> list[dict[str, t.Any]]:
        items: list[dict[str, t.Any]] = []
        token = ""
        while True:
            payload = body | {"pageSize": PAGE} | ({"pageToken": token} if token else {})
            page = self._count(self._session().post(self.url + path, json=payload, timeout=60))
            items += page.get("list") or []
            if not (token := page.get("nextPageToken") or ""):
                return items


def per_entitlement(
    client: Client, catalog: list[tuple[str, list[str]]], workers: int
) -> set[Grant]:
    def one(ref: tuple[str, str]) -> list[Grant]:
        views = client.get_all(f"/api/v1/apps/{ref[0]}/entitlements/{ref[1]}/users")
        return [(v["appId"], v["appEntitlementId"], v["appUserId"]) for v in views]

    refs = [(app_id, ent) for app_id, entitlements in catalog for ent in entitlements]
    with ThreadPoolExecutor(workers) as pool:
        return {grant for grants in pool.map(one, refs) for grant in grants}


def per_app(client: Client, catalog: list[tuple[str, list[str]]], workers: int) -> set[Grant]:
    def one(app_id: str) -> list[Grant]:
        items = client.search_all("/api/v1/search/grants", {"appIds": [app_id]})
        bindings = (item["appEntitlementUserBinding"] for item in items)
        return [(b["appId"], b["appEntitlementId"], b["appUserId"]) for b in bindings]

    with ThreadPoolExecutor(workers) as pool:
        return {grant for grants in pool.map(one, [app for app, _ in catalog]) for grant in grants}


WAYS: dict[str, t.Callable[[Client, list[tuple[str, list[str]]], int], set[Grant]]] = {
    "per entitlement (ListUsers)": per_entitlement,
    "per app (search/grants)": per_app,
}


def accounts(client: Client, catalog: list[tuple[str, list[str]]], workers: int) -> int:
    """How many accounts the tenant's apps list (GET .../app_users, every app)."""
    with ThreadPoolExecutor(workers) as pool:
        listed = pool.map(lambda app: client.get_all(f"/api/v1/apps/{app[0]}/app_users"), catalog)
        return sum(len(views) for views in listed)


def measure(name: str, args: argparse.Namespace, workdir: Path) -> list[str]:
    options = [*TENANTS[name], "--latency", str(args.latency)]
    lines = []
    with EmulatorProcess(workdir, name, *options) as emulator:
        client = Client(emulator)
        emulator.control("reset-stats", {})
        apps = client.get_all("/api/v1/apps")
        catalog_only_apps = emulator.control("stats")["api_requests"]
        catalog = [
            (
                app["id"],
                [
                    v["appEntitlement"]["id"]
                    for v in client.get_all(f"/api/v1/apps/{app['id']}/entitlements")
                ],
            )
            for app in apps
        ]
        catalog_requests = emulator.control("stats")["api_requests"]
        entitlements = sum(len(ents) for _, ents in catalog)
        emulator.control("reset-stats", {})
        start = time.perf_counter()
        account_count = accounts(client, catalog, max(args.workers))
        account_time = time.perf_counter() - start
        account_requests = emulator.control("stats")["api_requests"]
        # the first answer computes the tenant's grants held now: not part of either way
        client.search_all("/api/v1/search/grants", {"appIds": [catalog[0][0]]})
        lines.append(
            f"{name}: {len(apps):,} apps, {entitlements:,} app entitlements, "
            f"{account_count:,} accounts; catalog read first: {catalog_only_apps} "
            f"requests for the apps, {catalog_requests} with their entitlements; the accounts "
            f"(app_users of every app, {max(args.workers)} in flight): {account_requests:,} "
            f"requests, {account_time:.1f} s"
        )
        for workers in args.workers:
            times: dict[str, list[float]] = {way: [] for way in WAYS}
            requests_made: dict[str, int] = {}
            received: dict[str, int] = {}
            found: dict[str, set[Grant]] = {}
            for _ in range(args.rounds):
                for way, read in WAYS.items():
                    client.login()
                    emulator.control("reset-stats", {})
                    client.received = 0
                    start = time.perf_counter()
                    found[way] = read(client, catalog, workers)
                    times[way].append(time.perf_counter() - start)
                    received[way] = client.received
                    requests_made[way] = emulator.control("stats")["api_requests"]
            first, second = (found[way] for way in WAYS)
            if first != second:
                raise SystemExit(f"{name}: the two ways found different grants")
            a, b = (statistics.median(times[way]) for way in WAYS)
            ra, rb = (requests_made[way] for way in WAYS)
            ma, mb = (received[way] / 2**20 for way in WAYS)
            lines.append(
                f"  {workers} in flight, {len(first):,} grants: "
                f"per entitlement {ra:,} requests {a:.1f} s {ma:.0f} MB | "
                f"per app {rb:,} requests {b:.1f} s {mb:.0f} MB | per entitlement / per app: "
                f"requests {ra / rb:.2f}x, time {a / b:.2f}x, bytes {ma / mb:.2f}x"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", default="demo,large", help="demo, large or both")
    parser.add_argument("--workers", default="1,8", help="requests in flight, e.g. 1,8")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per request")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds (median)")
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",")]
    print(f"grants held now, two ways, {args.latency * 1000:.0f} ms per request, pages of {PAGE}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tenants.split(","):
            for line in measure(name, args, Path(tmp)):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
