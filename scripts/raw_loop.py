"""The benchmarks' baseline: the grant feed read by the plainest client there is, one page after
another (requests, pages of 100, one token), no SDK.

    python scripts/raw_loop.py CONFIG                  # each entry as a JSON line to /dev/null
    python scripts/raw_loop.py CONFIG --copy URL TABLE  # psycopg COPY of each entry into TABLE

CONFIG is the tap's config file (client_id, client_secret, api_url, start_date if any). The first form
prints the entries read; the second creates TABLE with grant_feed's columns and primary key (as
target-postgres would) and loads every page with COPY. It imports only what its form needs:
the process start is part of what the benchmarks time.
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


def pages(config: dict[str, t.Any]) -> Iterator[list[dict[str, t.Any]]]:
    """The feed's pages in order, each a list of entries, with one token (client_secret)."""
    session = requests.Session()
    token = session.post(
        config["api_url"] + "/auth/v1/token",
        data={
            "grant_type": "client_credentials",
            "client_id": config["client_id"],
            "client_secret": config["client_secret"],
        },
    ).json()["access_token"]
    session.headers["Authorization"] = "Bearer " + token
    body = {"pageSize": 100}
    if config.get("start_date"):  # none: the whole feed
        body["after"] = config["start_date"]
    while True:
        page = session.post(config["api_url"] + "/api/v1/grants/feed", json=body).json()
        yield page.get("list") or []
        if not page.get("nextPageToken"):
            return
        body["pageToken"] = page["nextPageToken"]


def to_devnull(config: dict[str, t.Any]) -> int:
    """One ``json.dumps`` per entry, written to /dev/null; returns the entries read."""
    records = 0
    with open("/dev/null", "w") as out:
        for entries in pages(config):
            for entry in entries:
                out.write(json.dumps(entry) + "\n")
                records += 1
    return records


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
    args = parser.parse_args()
    config = json.loads(args.config.read_text())
    if args.copy:
        copy_into(config, *args.copy)
    else:
        print(to_devnull(config))


if __name__ == "__main__":
    main()
