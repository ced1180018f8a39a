"""Side-by-side benchmark of the tap against the emulator (ratios, not absolute times).

    python3 tasks.py benchmark            # or: .venv/bin/python -m benchmarks.benchmark

In one run, alternating the two sides of each comparison and reporting medians:

0. the two headline ratios side by side (``--only ratios``, benchmarks/ratios_benchmark.py): at
   50,000 and 200,000 events (``--ratio-events``), on a frozen emulator (each answer built
   once, in an untimed round), the tap alone with Meltano's catalog against the raw loop and
   the shipped ``meltano run`` against the raw fetch+COPY loop, in the same rounds;
   ``--baseline REV`` adds another revision's tap to the same rounds (before/after),
   ``--ratio-batch`` the tap with ``batch_config`` (BATCH files, gzipped and not);
1. grant_feed throughput: the tap (catalog selecting grant_feed, stdout to /dev/null) versus a
   plain loop over the same pages (benchmarks/raw_loop.py: requests.Session, pageSize 100, json
   parse, one json dump per record): the ratio tap/raw of records per second;
2. the tap's peak RSS on a 10k-event and on a 200k-event feed;
3. automation_exclusions over 200 entitlements with 50 ms added to every response: the tap
   (max_concurrency 8) versus the same tap one request after another (max_concurrency 1);
3b. entitlement_owners (``--only owners``) over the app entitlements of 60 apps
   (``--owner-apps``), 100 ms per response: the tap with max_concurrency 8 versus 1, the
   catalog read first as a user's run does (goal >= 6x);
4. token requests per tap run, from the emulator's counters;
5. discovery through the catalog (``--only discovery``), 50 ms added to every response, for the
   demo's tenant (the default ``python -m emulator`` catalog) and a tenant of 2,000 app
   entitlements: the requests and time of reading the catalog (``app_entitlements`` selected:
   the app list, then every app's entitlements) with max_concurrency 8 versus 1, then of a
   whole automatic exclusions run (catalog + the exclusions of every automated entitlement)
   and of ``exclusion_scope: all`` (the exclusions of every entitlement);
6. end to end (``--only e2e``): a raw fetch+COPY loop (``raw_loop.py --copy``: psycopg ``COPY``
   of each event into a table with grant_feed's primary key) versus the project's own
   ``meltano --environment emulator run tap-accessgov target-postgres`` as meltano.yml ships
   it (only the emulator's URL, the secret and ``select: grant_feed`` come from the
   environment), at 50,000 and 500,000 events: medians, ratio, rows loaded and the peak RSS
   of the tap and of the target. ``--candidates`` compares loader settings side by side.
7. a real tenant's backfill (``--only backfill``, benchmarks/backfill_benchmark.py): 20,000
   events at 100 ms per request, served in every order, with ``start_date`` at the data, two
   years before it and unset, at 8 and 16 requests in flight (``--backfill-in-flight``): the
   tap against a sequential raw loop, how busy its slots were (the emulator's occupancy:
   the ramp, the tail) and the re-read share after a kill (``--backfill-orders``,
   ``--backfill-starts`` for a subset; ``--baseline REV`` adds another revision's tap to the
   same rounds); then a
   2-in-flight service, end to end against the sequential tap, and the tap without latency
   against its single query.
8. the models at warehouse scale (``--only models``, benchmarks/model_benchmark.py): 100,000 and
   1,000,000 events loaded into fresh tables by the shipped loaders, then ``dbt build`` right
   away, load and build side by side per engine; then a nightly load and rebuild.
9. full-table snapshots (``--only snapshots``, benchmarks/benchmark_snapshots.py): the shipped
   snapshot markers against ACTIVATE_VERSION with the ``_sdc_*`` metadata it needs.

How each side is started and timed (and the peak RSS of Meltano's children measured) is
harness/bench_runs.py, shared with the sections in files of their own.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import typing as t
from pathlib import Path

from benchmarks.backfill_benchmark import ORDERS as BACKFILL_ORDERS
from benchmarks.backfill_benchmark import STARTS as BACKFILL_STARTS
from benchmarks.backfill_benchmark import backfill
from benchmarks.benchmark_snapshots import full_table_snapshots
from benchmarks.model_benchmark import ENGINES, models_section
from benchmarks.ratios_benchmark import ratios
from harness.bench_runs import (
    catalog_for,
    meltano_env,
    meltano_run,
    raw_loop,
    run,
    start_emulator,
    tap_command,
    with_settings,
)
from harness.support import (
    EmulatorProcess,
    Warehouse,
    install_plugins,
    libpq_url,
)

# Loader and message-format candidates for --candidates: every knob set explicitly, so a
# candidate does not depend on what meltano.yml ships. batch_config {} = RECORD messages.
BATCH_GZIP = json.dumps(
    {
        "encoding": {"format": "jsonl", "compression": "gzip"},
        "storage": {"root": "file://.meltano/run/tap-accessgov/batch"},
        "batch_size": 10000,
    }
)


def candidate(
    *, validate: bool, copy: bool, metadata: bool, rows: int = 10000, batch: bool = False
) -> dict[str, str]:
    return {
        "TAP_ACCESSGOV_BATCH_CONFIG": BATCH_GZIP if batch else "{}",
        "TARGET_POSTGRES_VALIDATE_RECORDS": str(validate).lower(),
        "TARGET_POSTGRES_USE_COPY": str(copy).lower(),
        "TARGET_POSTGRES_ADD_RECORD_METADATA": str(metadata).lower(),
        "TARGET_POSTGRES_BATCH_SIZE_ROWS": str(rows),
    }


CANDIDATES: dict[str, dict[str, str]] = {
    "RECORD, 0.8.1 defaults (validate, INSERT, _sdc)": candidate(
        validate=True, copy=False, metadata=True
    ),
    "RECORD, validate, COPY, _sdc": candidate(validate=True, copy=True, metadata=True),
    "RECORD, no validation, COPY, _sdc": candidate(validate=False, copy=True, metadata=True),
    "RECORD, no validation, COPY, no _sdc": candidate(validate=False, copy=True, metadata=False),
    "RECORD, no validation, COPY, _sdc, 50k rows": candidate(
        validate=False, copy=True, metadata=True, rows=50000
    ),
    "BATCH jsonl.gz, COPY (not shippable, README)": candidate(
        validate=False, copy=True, metadata=False, batch=True
    ),
}


def end_to_end(args: argparse.Namespace, workdir: Path, report: t.Callable[[str], None]) -> None:
    install_plugins()
    warehouse = Warehouse()
    try:
        if not args.candidates:
            # What every run pays before and after its data: Meltano's start, discovery, the
            # start of tap and target (target-postgres imports for seconds), state handling.
            tiny = start_emulator(workdir, "e2e-fixed", "--events", "100")
            try:
                fixed = []
                for _ in range(args.rounds):
                    schema = warehouse.new_schema("fixed")
                    fixed.append(
                        meltano_run(meltano_env(tiny, schema, workdir), workdir / "m.log")[0]
                    )
                    warehouse.drop(schema)
                report(
                    f"end to end, fixed cost: meltano run of 100 events, median "
                    f"{statistics.median(fixed):.2f} s ({args.rounds} runs)"
                )
            finally:
                tiny.stop()
        for events in args.e2e_events:
            emulator = start_emulator(
                workdir, f"e2e{events}", "--events", str(events), "--exclusion-entitlements", "1"
            )
            try:
                if args.candidates:
                    compare_candidates(emulator, events, args.rounds, warehouse, workdir, report)
                    continue
                report(
                    f"end to end, grant_feed: {events:,} events into PostgreSQL, "
                    f"{args.rounds} rounds alternating"
                )
                raw_times, run_times, tap_rss, target_rss = [], [], [], []
                for _ in range(args.rounds):
                    schema = warehouse.new_schema("raw")
                    raw_times.append(
                        run(
                            raw_loop(
                                emulator.config_path,
                                "--copy",
                                libpq_url(warehouse.url),
                                f"{schema}.grant_feed",
                            )
                        )[0]
                    )
                    raw_rows = warehouse.rows(f"{schema}.grant_feed")
                    warehouse.drop(schema)
                    schema = warehouse.new_schema("meltano")
                    elapsed, peak = meltano_run(
                        meltano_env(emulator, schema, workdir), workdir / "meltano.log"
                    )
                    run_times.append(elapsed)
                    tap_rss.append(peak["tap"])
                    target_rss.append(peak["target"])
                    run_rows = warehouse.rows(f"{schema}.grant_feed")
                    warehouse.drop(schema)
                    if not raw_rows == run_rows == events:
                        sys.exit(f"rows: raw {raw_rows}, meltano run {run_rows}, events {events}")
                raw_s, run_s = statistics.median(raw_times), statistics.median(run_times)
                report(f"  raw fetch+COPY  {events / raw_s:>9,.0f} rows/s (median {raw_s:.2f} s)")
                report(f"  meltano run     {events / run_s:>9,.0f} rows/s (median {run_s:.2f} s)")
                report(f"  ratio raw/meltano-run = {raw_s / run_s:.2f}   (target >= 0.25)")
                report(f"  rows in PostgreSQL = {events:,} each run (the emulator's events)")
                report(
                    f"  peak RSS: tap {statistics.median(tap_rss):.0f} MB, "
                    f"target {statistics.median(target_rss):.0f} MB"
                )
            finally:
                emulator.stop()
    finally:
        warehouse.close()


def models(args: argparse.Namespace, workdir: Path, report: t.Callable[[str], None]) -> None:
    """Load and build side by side at warehouse scale (benchmarks/model_benchmark.py)."""
    install_plugins()
    warehouse = Warehouse()
    try:
        models_section(
            args.model_engines,
            args.model_events,
            args.nightly_events,
            workdir,
            lambda name, events: start_emulator(workdir, name, "--events", str(events)),
            warehouse,
            report,
        )
    finally:
        warehouse.close()


def compare_candidates(
    emulator: EmulatorProcess,
    events: int,
    rounds: int,
    warehouse: Warehouse,
    workdir: Path,
    report: t.Callable[[str], None],
) -> None:
    report(f"loader candidates, grant_feed: {events:,} events, {rounds} rounds alternating")
    times: dict[str, list[float]] = {name: [] for name in CANDIDATES}
    peaks: dict[str, list[dict[str, int]]] = {name: [] for name in CANDIDATES}
    for _ in range(rounds):
        for name, settings in CANDIDATES.items():
            schema = warehouse.new_schema("candidate")
            env = {**meltano_env(emulator, schema, workdir), **settings}
            elapsed, peak = meltano_run(env, workdir / "meltano.log")
            rows = warehouse.rows(f"{schema}.grant_feed")
            warehouse.drop(schema)
            if rows != events:
                sys.exit(f"{name}: {rows} rows loaded, {events} events")
            times[name].append(elapsed)
            peaks[name].append(peak)
    for name in CANDIDATES:
        median = statistics.median(times[name])
        tap = statistics.median(p["tap"] for p in peaks[name])
        target = statistics.median(p["target"] for p in peaks[name])
        report(f"  {name:<52} {median:6.2f} s  (RSS tap {tap:.0f} MB, target {target:.0f} MB)")


def tap_sections(args: argparse.Namespace, workdir: Path, report: t.Callable[[str], None]) -> None:
    """The tap alone against the raw loop, its memory, concurrency, tokens."""
    emulators: list[EmulatorProcess] = []

    def start(name: str, *options: str) -> EmulatorProcess:
        emulators.append(start_emulator(workdir, name, *options))
        return emulators[-1]

    tokens: list[int] = []

    def tap_run(emulator: EmulatorProcess, config: Path, catalog: Path) -> tuple[float, int]:
        emulator.control("reset-stats", {})
        result = run(tap_command(config, catalog))
        tokens.append(emulator.control("stats")["token_requests"])
        return result

    try:
        if "feed" in args.only or "rss" in args.only:
            big = start("big", "--events", str(args.events), "--exclusion-entitlements", "1")
            feed_catalog = catalog_for(big.config_path, "grant_feed", workdir)
        if "feed" in args.only:
            mid = start("mid", "--events", str(args.mid_events), "--exclusion-entitlements", "1")
            for emulator, events in ((mid, args.mid_events), (big, args.events)):
                report(
                    f"grant_feed: {events:,} events, pages of 100, process start included, "
                    f"{args.rounds} rounds alternating"
                )
                tap_times, raw_times = [], []
                for _ in range(args.rounds):
                    tap_times.append(tap_run(emulator, emulator.config_path, feed_catalog)[0])
                    raw_times.append(run(raw_loop(emulator.config_path))[0])
                tap_s, raw_s = statistics.median(tap_times), statistics.median(raw_times)
                report(f"  tap  {events / tap_s:>9,.0f} records/s (median {tap_s:.2f} s)")
                report(f"  raw  {events / raw_s:>9,.0f} records/s (median {raw_s:.2f} s)")
                report(f"  throughput ratio tap/raw = {raw_s / tap_s:.2f}   (target >= 0.60)")

        if "rss" in args.only:
            small = start(
                "small", "--events", str(args.small_events), "--exclusion-entitlements", "1"
            )
            report(f"peak RSS of the tap, grant_feed, {args.rounds} rounds alternating")
            small_rss, big_rss = [], []
            for _ in range(args.rounds):
                small_rss.append(tap_run(small, small.config_path, feed_catalog)[1])
                big_rss.append(tap_run(big, big.config_path, feed_catalog)[1])
            small_mb, big_mb = statistics.median(small_rss), statistics.median(big_rss)
            report(f"  {args.small_events:>7,} events: {small_mb:.0f} MB")
            report(f"  {args.events:>7,} events: {big_mb:.0f} MB")
            report(f"  growth = {big_mb - small_mb:+.0f} MB   (target <= +25 MB)")

        if "exclusions" in args.only:
            slow = start(
                "slow",
                "--events",
                "100",
                "--exclusion-entitlements",
                str(args.entitlements),
                "--apps",
                "40",
                "--max-exclusions",
                "60",
                "--latency",
                "0.05",
            )
            exclusions_catalog = catalog_for(slow.config_path, "automation_exclusions", workdir)
            report(
                f"automation_exclusions: {args.entitlements} entitlements, 50 ms per response, "
                f"{args.rounds} rounds alternating"
            )
            concurrent = with_settings(slow, workdir, "concurrent", max_concurrency=8)
            sequential = with_settings(slow, workdir, "sequential", max_concurrency=1)
            seq_times, par_times = [], []
            for _ in range(args.rounds):
                seq_times.append(tap_run(slow, sequential, exclusions_catalog)[0])
                par_times.append(tap_run(slow, concurrent, exclusions_catalog)[0])
            requests_per_run = sum(
                n
                for path, n in slow.control("stats")["api_requests_by_path"].items()
                if path.endswith("/exclusions")
            )
            seq_s, par_s = statistics.median(seq_times), statistics.median(par_times)
            report(f"  {requests_per_run} requests a run")
            report(f"  one after another (max_concurrency 1): median {seq_s:.2f} s")
            report(f"  concurrent        (max_concurrency 8): median {par_s:.2f} s")
            report(f"  speed-up = {seq_s / par_s:.1f}x   (target >= 4x)")

        if "owners" in args.only:
            owners(args, start, tap_run, workdir, report)

        if "discovery" in args.only:
            discovery(args, workdir, start, tap_run, report)

        report(
            f"token requests per tap run: min {min(tokens)}, max {max(tokens)} "
            f"over {len(tokens)} runs"
        )
    finally:
        for emulator in emulators:
            emulator.stop()


def owners(
    args: argparse.Namespace,
    start: t.Callable[..., EmulatorProcess],
    tap_run: t.Callable[[EmulatorProcess, Path, Path], tuple[float, int]],
    workdir: Path,
    report: t.Callable[[str], None],
) -> None:
    """``entitlement_owners`` (one request per app entitlement: a tenant has hundreds) at
    100 ms per response, as a user runs it (the catalog read first), with ``max_concurrency``
    8 against 1: what the run's one owner of concurrency buys a per-entitlement stream."""
    slow = start("owners", "--events", "100", "--apps", str(args.owner_apps), "--latency", "0.1")
    catalog = catalog_for(slow.config_path, "entitlement_owners", workdir)
    concurrent = with_settings(slow, workdir, "owners-8", max_concurrency=8)
    sequential = with_settings(slow, workdir, "owners-1", max_concurrency=1)
    seq_times, par_times = [], []
    for _ in range(args.rounds):
        seq_times.append(tap_run(slow, sequential, catalog)[0])
        par_times.append(tap_run(slow, concurrent, catalog)[0])
    by_path = slow.control("stats")["api_requests_by_path"]
    owners_read = sum(n for path, n in by_path.items() if path.endswith("/owners"))
    seq_s, par_s = statistics.median(seq_times), statistics.median(par_times)
    report(
        f"entitlement_owners: {owners_read} entitlement owner lists and "
        f"{sum(by_path.values()) - owners_read} other requests a run, 100 ms per response, "
        f"{args.rounds} rounds alternating"
    )
    report(f"  one after another (max_concurrency 1): median {seq_s:.2f} s")
    report(f"  concurrent        (max_concurrency 8): median {par_s:.2f} s")
    report(f"  speed-up = {seq_s / par_s:.1f}x   (target >= 6x)")


def api_requests(emulator: EmulatorProcess) -> dict[str, int]:
    """This run's requests by kind, from the emulator's counters."""
    by_path = emulator.control("stats")["api_requests_by_path"]
    return {
        "catalog": sum(
            n
            for path, n in by_path.items()
            if path == "/api/v1/apps" or path.endswith("/entitlements")
        ),
        "exclusions": sum(n for path, n in by_path.items() if path.endswith("/exclusions")),
    }


def discovery(
    args: argparse.Namespace,
    workdir: Path,
    start: t.Callable[..., EmulatorProcess],
    tap_run: t.Callable[[EmulatorProcess, Path, Path], tuple[float, int]],
    report: t.Callable[[str], None],
) -> None:
    """Finding the automated entitlements through the catalog, no hand-made list."""
    tenants = (
        ("demo tenant (python -m emulator's catalog)", ()),
        ("2,000 app entitlements", ("--catalog-entitlements", "2000")),
    )
    report(f"discovery through the catalog, 50 ms per response, {args.rounds} rounds alternating")
    for n, (label, options) in enumerate(tenants):
        emulator = start(f"catalog{n}", "--events", "100", "--latency", "0.05", *options)
        # No exclusion_entitlements: the automatic case.
        automatic = {k: v for k, v in emulator.config.items() if k != "exclusion_entitlements"}
        configs = {}
        for name, settings in (
            ("catalog-1", {"max_concurrency": 1}),
            ("catalog-8", {"max_concurrency": 8}),
            ("automated", {"max_concurrency": 8}),
            ("all", {"max_concurrency": 8, "exclusion_scope": "all"}),
        ):
            configs[name] = workdir / f"catalog{n}-{name}.json"
            configs[name].write_text(json.dumps(automatic | settings))
        catalogs = {
            stream: catalog_for(configs["catalog-8"], stream, workdir)
            for stream in ("app_entitlements", "automation_exclusions")
        }
        runs = (
            ("catalog-1", "app_entitlements"),
            ("catalog-8", "app_entitlements"),
            ("automated", "automation_exclusions"),
            ("all", "automation_exclusions"),
        )
        times: dict[str, list[float]] = {name: [] for name, _ in runs}
        requests: dict[str, dict[str, int]] = {}
        for _ in range(args.rounds):
            for name, stream in runs:
                times[name].append(tap_run(emulator, configs[name], catalogs[stream])[0])
                requests[name] = api_requests(emulator)
        median = {name: statistics.median(values) for name, values in times.items()}
        catalog_requests = requests["catalog-8"]["catalog"]
        report(f"  {label}:")
        report(
            f"    catalog read: {catalog_requests} requests; max_concurrency 1: median "
            f"{median['catalog-1']:.2f} s, 8: median {median['catalog-8']:.2f} s "
            f"(speed-up {median['catalog-1'] / median['catalog-8']:.1f}x)"
        )
        for name, what in (("automated", "automated (default)"), ("all", "all")):
            report(
                f"    exclusion_scope {what}: {requests[name]['catalog']} + "
                f"{requests[name]['exclusions']} exclusion requests, median {median[name]:.2f} s"
            )


SECTIONS = (
    "ratios",
    "feed",
    "rss",
    "exclusions",
    "owners",
    "discovery",
    "e2e",
    "backfill",
    "models",
    "snapshots",
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=200_000, help="grant events (large feed)")
    parser.add_argument(
        "--small-events", type=int, default=10_000, help="grant events (small feed)"
    )
    parser.add_argument(
        "--mid-events",
        type=int,
        default=50_000,
        help="grant events (nightly-sized feed: start-up counts)",
    )
    parser.add_argument(
        "--ratio-events",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[50_000, 200_000],
        help="grant events of the headline ratios (comma-separated)",
    )
    parser.add_argument(
        "--ratio-batch",
        action="store_true",
        help="ratios: also this checkout with batch_config (BATCH files), in the same rounds",
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternations of each comparison")
    parser.add_argument("--entitlements", type=int, default=200)
    parser.add_argument(
        "--owner-apps", type=int, default=60, help="apps of the owners section's catalog"
    )
    parser.add_argument(
        "--only",
        type=lambda text: text.split(","),
        default=list(SECTIONS),
        help=f"comma-separated sections to run: {', '.join(SECTIONS)} (default: all)",
    )
    parser.add_argument(
        "--e2e-events",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[50_000, 500_000],
        help="grant events of the end-to-end runs (comma-separated)",
    )
    parser.add_argument(
        "--candidates",
        action="store_true",
        help="end to end: compare the loader/message-format candidates instead of raw vs shipped",
    )
    parser.add_argument(
        "--model-events",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[100_000, 1_000_000],
        help="grant events of the models section's loads and builds (comma-separated)",
    )
    parser.add_argument(
        "--model-engines",
        type=lambda text: text.split(","),
        default=["postgres", "duckdb"],
        help="models section: engines, comma-separated, of postgres, duckdb, spark "
        "(default: postgres,duckdb; Spark takes minutes at the demo's size)",
    )
    parser.add_argument(
        "--nightly-events",
        type=int,
        default=1_000,
        help="models section: new events of the nightly load after the largest (0 = none)",
    )
    parser.add_argument(
        "--backfill-events", type=int, default=20_000, help="grant events of the backfill section"
    )
    parser.add_argument(
        "--backfill-orders",
        type=lambda text: text.split(","),
        default=list(BACKFILL_ORDERS),
        help=f"backfill: the feed orders to run ({', '.join(BACKFILL_ORDERS)}; default: all)",
    )
    parser.add_argument(
        "--backfill-starts",
        type=lambda text: text.split(","),
        default=list(BACKFILL_STARTS),
        help="backfill: the start_date kinds to run (data: at the data, early: two years "
        "before it, unset; default: all)",
    )
    parser.add_argument(
        "--backfill-in-flight",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[8, 16],
        help="backfill: requests in flight, comma-separated (the tap's max_concurrency, the "
        "limit's windows; default: 8,16)",
    )
    parser.add_argument(
        "--no-backfill-e2e",
        dest="backfill_e2e",
        action="store_false",
        help="backfill: skip the meltano run comparison",
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="ratios, backfill: also run this git revision's tap in the same rounds (before/after)",
    )
    args = parser.parse_args()
    if unknown := set(args.only) - set(SECTIONS):
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    if unknown := set(args.model_engines) - set(ENGINES):
        parser.error(f"unknown engine(s): {', '.join(sorted(unknown))}")
    if unknown := set(args.backfill_orders) - set(BACKFILL_ORDERS):
        parser.error(f"unknown feed order(s): {', '.join(sorted(unknown))}")
    if unknown := set(args.backfill_starts) - set(BACKFILL_STARTS):
        parser.error(f"unknown start_date kind(s): {', '.join(sorted(unknown))}")
    if not all(1 <= n <= 16 for n in args.backfill_in_flight):  # max_concurrency's range
        parser.error("--backfill-in-flight: each between 1 and 16 (the tap's max_concurrency)")
    args.backfill_in_flight = sorted(set(args.backfill_in_flight))

    lines: list[str] = []

    def report(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if "ratios" in args.only:
            ratios(args, workdir, report)
        if set(args.only) & {"feed", "rss", "exclusions", "owners", "discovery"}:
            tap_sections(args, workdir, report)
        if "e2e" in args.only:
            end_to_end(args, workdir, report)
        if "backfill" in args.only:
            backfill(args, workdir, report)
        if "models" in args.only:
            models(args, workdir, report)
        if "snapshots" in args.only:
            full_table_snapshots(args, workdir, report)

    print("\nSummary (paste into the README):\n```\n" + "\n".join(lines) + "\n```")


if __name__ == "__main__":
    main()
