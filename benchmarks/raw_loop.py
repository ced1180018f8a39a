"""The benchmarks' baseline: the grant feed read by the plainest client there is, one page after
another (requests, pages of 100, one token), no SDK.

    python benchmarks/raw_loop.py CONFIG                  # each entry as a JSON line to /dev/null
    python benchmarks/raw_loop.py CONFIG --copy URL TABLE  # psycopg COPY of each entry into TABLE
    python benchmarks/raw_loop.py CONFIG --dates FILE      # the entries' dates, sorted, into FILE
    python benchmarks/raw_loop.py CONFIG --windows FILE N  # N windows of equal counts at once

CONFIG is the tap's config file (client_id, client_secret, api_url, start_date if any). The first form
prints the entries read; the second creates TABLE with grant_feed's columns and primary key (as
target-postgres would) and loads every page with COPY. The last two measure what any client
could do with N requests in flight (the backfill benchmark's limit): the third writes the
dates of the feed's events, the fourth reads the feed as N windows of equal counts cut at
those dates (what a client that knew every date in advance would ask for), one thread each,
each entry as a JSON line to /dev/null. It imports only what its form needs: the process start
is part of what the benchmarks time.
"""

from __future__ import annotations

import argparse
import json
import typing as t
from pathlib import Path

import requests

if t.TYPE_CHECKING:
    from collections.abc import Iterator

COLUMNS = (
    '"appId", "appEntitlementId", "appUserId", "eventType", date, feed, '
    '"appPath", "appUserPath", "entitlementPath", "ticketPath"'
)
CREATE = (
    '"appId" text, "appEntitlementId" text, "appUserId" text, "eventType" text, '
    'date timestamptz, feed jsonb, "appPath" text, "appUserPath" text, '
    '"entitlementPath" text, "ticketPath" text, '
    'PRIMARY KEY ("appId", "appEntitlementId", "appUserId", "eventType", date)'
)


def token(config: dict[str, t.Any]) -> str:
    """An access token for the client_secret."""
    return str(
        requests.post(
            config["api_url"] + "/auth/v1/token",
            data={
                "grant_type": "client_credentials",
                "client_id": config["client_id"],
                "client_secret": config["client_secret"],
            },
            timeout=60,
        ).json()["access_token"]
    )


def pages(
    config: dict[str, t.Any], window: tuple[str | None, str | None] | None = None, bearer: str = ""
) -> Iterator[list[dict[str, t.Any]]]:
    """The feed's pages in order, each a list of entries, with one token (``bearer``, else a
    new one); ``window``: ``after`` and ``before`` instead of the whole feed."""
    session = requests.Session()
    session.headers["Authorization"] = "Bearer " + (bearer or token(config))
    body: dict[str, t.Any] = {"pageSize": 100}
    after, before = window or (config.get("start_date"), None)  # no start_date: the whole feed
    if after:
        body["after"] = after
    if before:
        body["before"] = before
    while True:
        page = session.post(config["api_url"] + "/api/v1/grants/feed", json=body).json()
        yield page.get("list") or []
        if not page.get("nextPageToken"):
            return
        body["pageToken"] = page["nextPageToken"]


def to_devnull(
    config: dict[str, t.Any], window: tuple[str | None, str | None] | None = None, bearer: str = ""
) -> int:
    """One ``json.dumps`` per entry, written to /dev/null; returns the entries read."""
    records = 0
    with open("/dev/null", "w") as out:
        for entries in pages(config, window, bearer):
            for entry in entries:
                out.write(json.dumps(entry) + "\n")
                records += 1
    return records


def dates(config: dict[str, t.Any]) -> list[str]:
    """The dates of the feed's events, sorted (as datetimes: the feed may mix fractions)."""
    import datetime

    def instant(text: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))

    read = [entry["feed"]["date"] for entries in pages(config) for entry in entries]
    return sorted(read, key=instant)


def windows_at_once(config: dict[str, t.Any], sorted_dates: list[str], count: int) -> int:
    """The feed as ``count`` windows of equal counts cut at ``sorted_dates``, all at once."""
    import concurrent.futures

    edges = [sorted_dates[len(sorted_dates) * n // count] for n in range(1, count)]
    bounds = list(zip([config.get("start_date"), *edges], [*edges, None], strict=True))
    bearer = token(config)
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return sum(pool.map(lambda window: to_devnull(config, window, bearer), bounds))


def copy_into(config: dict[str, t.Any], url: str, table: str) -> None:
    """Each page's entries into ``table`` (created here) with one COPY per page."""
    import psycopg

    with psycopg.connect(url) as connection:
        connection.execute(f"CREATE TABLE {table} ({CREATE})")
        with connection.cursor() as cursor:
            for entries in pages(config):
                with cursor.copy(f"COPY {table} ({COLUMNS}) FROM STDIN") as copy:
                    for entry in entries:
                        feed = entry["feed"]
                        copy.write_row(
                            (
                                feed.get("appId"),
                                feed.get("appEntitlementId"),
                                feed.get("appUserId"),
                                feed.get("eventType") or "GRANT_EVENT_TYPE_UNSPECIFIED",
                                feed["date"],
                                json.dumps(feed),
                                entry.get("appPath"),
                                entry.get("appUserPath"),
                                entry.get("entitlementPath"),
                                entry.get("ticketPath"),
                            )
                        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("config", type=Path, help="the tap's config file")
    parser.add_argument(
        "--copy", nargs=2, metavar=("URL", "TABLE"), help="load into PostgreSQL instead"
    )
    parser.add_argument("--dates", type=Path, help="write the events' dates, sorted, here")
    parser.add_argument(
        "--windows", nargs=2, metavar=("FILE", "N"), help="N windows cut at FILE's dates"
    )
    args = parser.parse_args()
    config = json.loads(args.config.read_text())
    if args.copy:
        copy_into(config, *args.copy)
    elif args.dates:
        args.dates.write_text(json.dumps(dates(config)))
    elif args.windows:
        file, count = args.windows
        print(windows_at_once(config, json.loads(Path(file).read_text()), int(count)))
    else:
        print(to_devnull(config))


if __name__ == "__main__":
    main()
