"""`python -m emulator`: run the emulator as a process for the demo and benchmarks.

Prints one line with the URL, optionally writes the tenant's facts and a ready file, and
serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from emulator import Dataset, Emulator, make_credential
from emulator.feed import DISTRIBUTIONS, ORDERS


def _write_atomically(path: str, text: str) -> None:
    """Readers polling for the file never see it half written."""
    tmp = Path(f"{path}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m emulator", description=__doc__)
    p.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    p.add_argument("--seed", type=int, default=1, help="dataset seed")
    p.add_argument("--events", type=int, default=20_000, help="initial grant feed events")
    p.add_argument("--apps", type=int, default=8)
    p.add_argument("--users", type=int, default=2_000)
    p.add_argument("--exclusion-entitlements", type=int, default=40)
    p.add_argument("--max-exclusions", type=int, default=300)
    p.add_argument("--end", default=None, help="RFC 3339 anchor of the data (default: this hour)")
    p.add_argument("--span-days", type=int, default=180, help="days covered by the initial feed")
    p.add_argument(
        "--distribution",
        choices=tuple(DISTRIBUTIONS),
        default="uniform",
        help="how the initial events' dates spread: evenly, skewed like a real tenant's "
        "(a sparse past, one dense burst, most events recent), or recent (70%% of them in the "
        "last tenth of the span)",
    )
    p.add_argument(
        "--feed-order",
        choices=ORDERS,
        default="near",
        help="the order a feed search returns its events in: near-chronological (default), "
        "ascending or descending by date, or none (by a random id)",
    )
    p.add_argument(
        "--ticket-ids",
        choices=("id", "mixed"),
        default="id",
        help="what a grant event's ticketId carries: the task's id, or for a third of the "
        "tickets its numericId",
    )
    p.add_argument(
        "--max-in-flight",
        type=int,
        default=0,
        help="answer /api/ requests beyond this many at once with 429 + Retry-After (0: no limit)",
    )
    p.add_argument(
        "--throttle-retry-after",
        type=int,
        default=1,
        help="the Retry-After seconds of those 429 answers",
    )
    p.add_argument("--token-lifetime", type=int, default=600, help="access token seconds")
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to /api/ answers")
    p.add_argument(
        "--exclusions-ignore-page-token",
        action="store_true",
        help="answer every exclusions request with the first page and the same token, like a "
        "gateway ignoring undeclared query parameters",
    )
    unset = p.add_mutually_exclusive_group()
    unset.add_argument(
        "--emit-unpopulated",
        dest="emit_unpopulated",
        action="store_const",
        const=True,
        help='send unset fields empty ("", false, 0, [], null) on every endpoint, as the '
        "service's EmitUnpopulated marshalling does (default: on the catalog endpoints only)",
    )
    unset.add_argument(
        "--omit-unpopulated",
        dest="emit_unpopulated",
        action="store_const",
        const=False,
        help="omit unset fields on every endpoint, the catalog's too",
    )
    p.add_argument(
        "--shapes",
        choices=("newest", "older", "changed"),
        default="newest",
        help="field shapes of which release every endpoint answers in: the newest published "
        "ones, a 2024-2025 release's, or a release that changed a field's type on every "
        "endpoint (see emulator/shapes.py)",
    )
    p.add_argument(
        "--catalog-apps", type=int, default=120, help="apps in the catalog (at least --apps)"
    )
    p.add_argument(
        "--catalog-entitlements",
        type=int,
        default=None,
        help="app entitlements in the whole catalog (default: a few per catalog-only app)",
    )
    p.add_argument(
        "--grants-before-feed",
        type=int,
        default=None,
        help="grants held now that were made before the feed began, which it never names "
        "(default: one for every eight events)",
    )
    p.add_argument(
        "--ended-before-feed",
        type=int,
        default=None,
        help="grant periods that began and ended before the feed, which search/past-grants "
        "lists (default: one for every sixteen events)",
    )
    p.add_argument(
        "--log-background",
        type=int,
        default=None,
        help="sign-ins and integrations' reads in the system log beside what the other "
        "endpoints did (default: one for every four events)",
    )
    p.add_argument(
        "--log-order",
        choices=("asked", "ascending", "descending", "unsorted"),
        default="asked",
        help="the order the system log answers in: as the request's sortDirection asks (an "
        "unset one: no time order), or one order whatever is asked (emulator/system_log.py)",
    )
    p.add_argument(
        "--log-retention-days",
        type=int,
        default=0,
        help="days of the system log served (0: every event); an earlier since is answered "
        "from the retention's start",
    )
    p.add_argument(
        "--frozen",
        action="store_true",
        help="the data never changes and no call is logged, so each answer is built once and "
        "kept: a server that costs next to nothing to read again (the benchmarks' baseline)",
    )
    p.add_argument(
        "--forbid-operation",
        dest="forbidden_operations",
        action="append",
        default=[],
        metavar="OPERATION",
        help="answer this operation 403 permission_denied, as to a key whose role may not call "
        "it: its name as the system log gives it (c1.api.iam.v1.Roles/List), its path "
        "(/api/v1/iam/roles) or a path template (/api/v1/apps/{app_id}/owners); repeatable",
    )
    p.add_argument(
        "--absent-operation",
        dest="absent_operations",
        action="append",
        default=[],
        metavar="OPERATION",
        help="answer this operation 404 as an unknown route, as a release that lacks it (named "
        "as for --forbid-operation; --shapes older lacks the v2 owner list anyway); repeatable",
    )
    p.add_argument(
        "--inline-app-owners",
        action="store_true",
        help="send each App's owners in its appOwners (the Users of its owners endpoint) "
        "instead of an empty list",
    )
    p.add_argument("--credential-seed", type=int, default=7)
    p.add_argument("--tenant", default="acme.accessgov.test")
    p.add_argument(
        "--write-tenant",
        metavar="PATH",
        help="write the tenant's facts here (URL, credential, exclusion entitlements), as JSON",
    )
    p.add_argument("--ready-file", metavar="PATH", help="write the URL here once listening")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    dataset = Dataset(
        seed=args.seed,
        events=args.events,
        apps=args.apps,
        users=args.users,
        exclusion_entitlements=args.exclusion_entitlements,
        max_exclusions=args.max_exclusions,
        end=args.end,
        span_days=args.span_days,
        catalog_apps=args.catalog_apps,
        catalog_entitlements=args.catalog_entitlements,
        distribution=args.distribution,
        grants_before_feed=args.grants_before_feed,
        ended_before_feed=args.ended_before_feed,
        order=args.feed_order,
        ticket_ids=args.ticket_ids,
        log_background=args.log_background,
    )
    credential = make_credential(seed=args.credential_seed, tenant=args.tenant)
    emulator = Emulator(
        dataset,
        credential=credential,
        token_lifetime=args.token_lifetime,
        port=args.port,
        latency=args.latency,
        exclusions_ignore_page_token=args.exclusions_ignore_page_token,
        emit_unpopulated=args.emit_unpopulated,
        max_in_flight=args.max_in_flight,
        throttle_retry_after=args.throttle_retry_after,
        shapes=args.shapes,
        log_order=args.log_order,
        log_retention_days=args.log_retention_days,
        log_calls=not args.frozen,
        frozen=args.frozen,
        forbidden_operations=args.forbidden_operations,
        absent_operations=args.absent_operations,
        inline_app_owners=args.inline_app_owners,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        emulator.start()
    except OSError as err:
        print(f"emulator: cannot listen on 127.0.0.1:{args.port}: {err.strerror}", file=sys.stderr)
        return 1
    with emulator:
        if args.write_tenant:
            _write_atomically(args.write_tenant, json.dumps(emulator.tenant(), indent=2) + "\n")
        if args.ready_file:
            _write_atomically(args.ready_file, emulator.url + "\n")
        print(f"emulator listening on {emulator.url}", flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
