"""Property-based tests: the credential parsers never fail in an unexpected way nor echo the
secret, and any valid feed page is normalised into records that keep its meaning."""

from __future__ import annotations

import datetime
import inspect
import json
import string

import requests
from hypothesis import example, given, settings
from hypothesis import strategies as st

from emulator.timefmt import parse_rfc3339
from tap_accessgov.auth import CredentialError, parse_client_id, parse_client_secret
from tap_accessgov.paging import Page
from tap_accessgov.tap import TapAccessGov
from tap_accessgov.timestamps import normalize_timestamp
from tests.conftest import CREDENTIAL, ns

# The credential parsing's own wording: every message of it is written in these three.
CREDENTIALS_SOURCE = "".join(
    inspect.getsource(part) for part in (CredentialError, parse_client_id, parse_client_secret)
)

LABEL = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=12)
HOST = st.lists(LABEL, min_size=1, max_size=4).map(".".join)
IDS = st.text(string.ascii_letters + string.digits, min_size=1, max_size=27)


@given(
    random_id=st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=30),
    host=HOST,
    upper=st.booleans(),
    port=st.none() | st.integers(1, 65535),
    use_case=st.text(string.ascii_letters + "-/", min_size=0, max_size=20),
)
def test_valid_client_ids_parse(
    random_id: str, host: str, upper: bool, port: int | None, use_case: str
) -> None:
    written = host.upper() if upper else host
    authority = written if port is None else f"{written}:{port}"
    parsed = parse_client_id(f"{random_id}@{authority}/{use_case}")
    assert parsed.audience == host
    assert parsed.host == (host if port is None else f"{host}:{port}")


@given(st.text())
def test_any_client_id_either_parses_or_is_a_clear_error(text: str) -> None:
    try:
        parse_client_id(text)
    except CredentialError as exc:
        assert str(exc).startswith("client_id: ")


@given(st.text(min_size=0, max_size=300) | st.builds(lambda s: "secret-token:x:v1:" + s, st.text()))
@example("client_secre")  # found by Hypothesis: part of our own wording, not an echo
def test_any_secret_either_parses_or_is_a_clear_error_without_it(text: str) -> None:
    try:
        parse_client_secret(text)
    except CredentialError as exc:
        message = str(exc)
        assert message.startswith("client_secret: ")
        # Hypothesis also tries the module's own string constants: a text that is part of our
        # fixed wording ("client_secre...") is in the message without being an echo of it.
        if len(text) >= 12 and text not in CREDENTIALS_SOURCE:
            assert text not in message


def timestamps() -> st.SearchStrategy[tuple[str, int]]:
    """An RFC 3339 string as the service may write it, with the instant it means in ns."""

    @st.composite
    def build(draw: st.DrawFn) -> tuple[str, int]:
        moment = draw(st.datetimes(datetime.datetime(2000, 1, 1), datetime.datetime(2099, 1, 1)))
        nanos = draw(st.integers(0, 999_999_999))
        digits = draw(st.sampled_from([0, 3, 6, 9]))
        fraction = f"{nanos:09d}"[:digits]
        offset_minutes = draw(st.sampled_from([0, 0, 60, -300, 330]))
        offset = (
            "Z"
            if offset_minutes == 0
            else f"{'+' if offset_minutes > 0 else '-'}{abs(offset_minutes) // 60:02d}:{abs(offset_minutes) % 60:02d}"
        )
        text = f"{moment:%Y-%m-%dT%H:%M:%S}" + (f".{fraction}" if digits else "") + offset
        utc = moment.replace(tzinfo=datetime.UTC) - datetime.timedelta(minutes=offset_minutes)
        instant = int(utc.timestamp()) * 1_000_000_000 + int(fraction.ljust(9, "0") or 0)
        return text, instant

    return build()


@given(timestamps())
def test_normalised_timestamps_keep_the_instant_and_sort_as_text(value: tuple[str, int]) -> None:
    text, instant = value
    normalised = normalize_timestamp(text)
    assert ns(normalised) == instant
    assert len(normalised) == 30


@given(st.lists(timestamps(), min_size=2, max_size=20))
def test_normalised_text_order_is_time_order(values: list[tuple[str, int]]) -> None:
    by_text = sorted(values, key=lambda v: normalize_timestamp(v[0]))
    assert [v[1] for v in by_text] == sorted(v[1] for v in values)


EVENT_TYPES = st.sampled_from(
    ["GRANT_EVENT_TYPE_ADDED", "GRANT_EVENT_TYPE_REMOVED", "GRANT_EVENT_TYPE_SOMETHING_NEW"]
)


@st.composite
def feed_pages(draw: st.DrawFn) -> dict:
    expanded = draw(
        st.lists(
            st.fixed_dictionaries(
                {"@type": st.just("type.googleapis.com/c1.api.app.v1.App"), "id": IDS}
            ),
            max_size=5,
        )
    )
    entries = []
    for _ in range(draw(st.integers(0, 12))):
        feed = {
            "appId": draw(IDS),
            "appEntitlementId": draw(IDS),
            "appUserId": draw(IDS),
            "date": draw(timestamps())[0],
        }
        if draw(st.booleans()):
            feed["eventType"] = draw(EVENT_TYPES)
        if draw(st.booleans()):
            feed["ticketId"] = draw(IDS)
        if draw(st.booleans()):
            feed["someFutureField"] = draw(IDS)  # unknown fields are kept as sent
        entry: dict = {"feed": feed}
        if expanded and draw(st.booleans()):
            entry["appPath"] = f"$.expanded[{draw(st.integers(0, len(expanded) - 1))}]"
        entries.append(entry)
    page: dict = {"list": entries or draw(st.sampled_from([None, []]))}
    if expanded:
        page["expanded"] = expanded
    if draw(st.booleans()):
        page["nextPageToken"] = draw(st.sampled_from(["", "abc"]))
    return page


# Pages with expanded objects answer a mask: without one, the stream resolves none
# (test_streams.py).
STREAM = TapAccessGov(
    config={
        "client_id": CREDENTIAL.client_id,
        "client_secret": CREDENTIAL.client_secret,
        "expand_mask": ["*"],
    },
    parse_env_config=False,
).streams["grant_feed"]


@settings(max_examples=150)
@given(feed_pages())
def test_any_valid_page_is_normalised_without_losing_meaning(page: dict) -> None:
    response = requests.Response()
    response.status_code = 200
    response._content = json.dumps(page).encode()
    records = list(STREAM.parse_response(Page.read(response)))
    entries = page["list"] or []
    assert len(records) == len(entries)
    for record, entry in zip(records, entries, strict=True):
        feed = entry["feed"]
        assert record["feed"] == feed
        # the instant the service wrote, by the emulator's parser (not the tap's), in the
        # tap's one form (RFC 3339, UTC, nine digits)
        assert ns(record["date"]) == parse_rfc3339(feed["date"])
        assert len(record["date"]) == 30
        assert (record["appId"], record["appEntitlementId"], record["appUserId"]) == (
            feed["appId"],
            feed["appEntitlementId"],
            feed["appUserId"],
        )
        assert record["eventType"] == feed.get("eventType", "GRANT_EVENT_TYPE_UNSPECIFIED")
        if "appPath" in entry:
            index = int(entry["appPath"][len("$.expanded[") : -1])
            assert record["app"] == page["expanded"][index]
        else:
            assert "app" not in record
