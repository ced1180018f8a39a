"""Pages: each parsed once and handed along; the paginator over ``nextPageToken``: empty or
missing ends, empty pages with a token go on, and a token seen before anywhere in the
traversal stops the run instead of looping."""

from __future__ import annotations

import json
import logging
import typing as t
from collections import Counter

import pytest
import requests
import simplejson
from singer_sdk.exceptions import FatalAPIError
from singer_sdk.streams import RESTStream

from emulator import Emulator
from tap_accessgov.paging import (
    BodyPaging,
    MalformedPageError,
    NextPageTokenPaginator,
    Page,
    QueryPaging,
    page_body,
    viewed_objects,
)
from tap_accessgov.tap import TapAccessGov
from tests.conftest import CREDENTIAL, sync, tap_config


def response(body: object, raw: bytes | None = None) -> requests.Response:
    answer = requests.Response()
    answer.status_code = 200
    answer._content = raw if raw is not None else json.dumps(body).encode()
    answer.request = requests.Request("POST", "http://127.0.0.1/api/v1/grants/feed").prepare()
    return answer


def page(body: object) -> Page:
    """A page as the request path hands it to the hooks: the answer, parsed once."""
    return Page.read(response(body))


@pytest.mark.parametrize(
    "last", [{"list": None, "nextPageToken": ""}, {"list": [{}]}, {"nextPageToken": None}]
)
def test_empty_or_missing_token_ends(last: dict) -> None:
    paginator = NextPageTokenPaginator()
    paginator.advance(page({"list": [{}], "nextPageToken": "a"}))
    assert paginator.current_value == "a"
    paginator.advance(page(last))
    assert paginator.finished


def test_an_empty_page_with_a_token_is_not_the_end() -> None:
    paginator = NextPageTokenPaginator()
    assert paginator.continue_if_empty(page({"list": None, "nextPageToken": "more"}))
    assert not paginator.continue_if_empty(page({"list": None, "nextPageToken": ""}))
    assert not paginator.continue_if_empty(page({"list": None}))


def test_a_token_cycle_is_refused() -> None:
    paginator = NextPageTokenPaginator()
    for token in ("a", "b", "c"):
        paginator.advance(page({"list": [{}], "nextPageToken": token}))
    loop = (
        r"^POST /api/v1/grants/feed returned a page token it had already returned; "
        r"stopping instead of looping forever$"
    )
    with pytest.raises(FatalAPIError, match=loop):
        paginator.advance(page({"list": [{}], "nextPageToken": "a"}))


@pytest.mark.parametrize("raw", [b"<html>bad gateway</html>", b'{"list": [', b"[1, 2]", b""])
def test_a_body_that_is_not_a_json_object_is_retriable(raw: bytes) -> None:
    answer = response(None, raw=raw)
    with pytest.raises(
        MalformedPageError, match="POST /api/v1/grants/feed answered 200 with a body"
    ) as raised:
        Page.read(answer)
    assert raised.value.response is answer  # the retry's warning names its call


def test_the_hooks_read_the_page_they_are_handed() -> None:
    """parse_response and the paginator read the Page the request path parsed, not the
    response's bytes again (nor anything kept elsewhere about that response)."""
    answer = response(None, raw=b"not what the hooks read")
    parsed = Page(answer, {"list": [{"id": "a"}], "nextPageToken": "t1"})
    assert page_body(parsed) is parsed.body
    paginator = NextPageTokenPaginator()
    assert paginator.continue_if_empty(parsed)
    paginator.advance(parsed)
    assert paginator.current_value == "t1"
    with pytest.raises(FatalAPIError, match=r"^POST /api/v1/grants/feed returned a page token"):
        paginator.get_next(parsed)


def test_every_page_is_parsed_once(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole run, worker threads included: each body the service sent is parsed exactly
    once (validation, records and paging share that one parse), whichever JSON parser it
    would go through (requests' .json() uses simplejson when it is installed)."""
    config = tap_config(emulator)
    tap = TapAccessGov(config=config, parse_env_config=False)
    served: Counter[bytes] = Counter()
    for stream in tap.streams.values():
        if isinstance(stream, RESTStream):
            stream.requests_session.hooks["response"].append(
                lambda response, *args, **kwargs: served.update([response.content])
            )
    parsed: Counter[bytes] = Counter()

    def counting(loads: t.Callable[..., t.Any]) -> t.Callable[..., t.Any]:
        def count(text: str | bytes, *args: t.Any, **kwargs: t.Any) -> t.Any:
            raw = text.encode() if isinstance(text, str) else bytes(text)
            if raw in served:
                parsed.update([raw])
            return loads(text, *args, **kwargs)

        return count

    monkeypatch.setattr(json, "loads", counting(json.loads))
    monkeypatch.setattr(simplejson, "loads", counting(simplejson.loads))
    sync(config, tap=tap)
    assert sum(served.values()) == emulator.stats["api_requests"] > 20
    assert parsed == served


def test_the_posts_page_in_their_body_with_their_own_filters() -> None:
    """The searches and the feed (paging.BodyPaging): ``pageSize`` (a probe's own replaces
    the setting's), the stream's filters, and ``pageToken`` only after the first page."""
    config = {
        "client_id": CREDENTIAL.client_id,
        "client_secret": CREDENTIAL.client_secret,
        "api_url": "http://127.0.0.1:9",  # nothing is sent
        "page_size": 40,
        "app_ids": ["a1"],
    }
    streams = TapAccessGov(config=config, parse_env_config=False).streams
    grants, tasks, feed = streams["grants"], streams["tasks"], streams["grant_feed"]
    window = {"createdAfter": "2026-01-01T00:00:00Z"}
    bodies = {
        "grants": grants.prepare_request_payload({"appId": "a1"}, None),  # type: ignore[attr-defined]
        "grants, then": grants.prepare_request_payload({"appId": "a1"}, "t2"),  # type: ignore[attr-defined]
        "tasks": tasks.prepare_request_payload(window, "t2"),  # type: ignore[attr-defined]
        "first task": tasks.prepare_request_payload({"pageSize": 10}, None),  # type: ignore[attr-defined]
        "probe": feed.prepare_request_payload(  # type: ignore[attr-defined]
            {"after": None, "before": "2026-01-02T00:00:00Z", "probe": True}, None
        ),
    }
    assert bodies == {
        "grants": {"pageSize": 40, "appIds": ["a1"]},
        "grants, then": {"pageSize": 40, "appIds": ["a1"], "pageToken": "t2"},
        "tasks": {"pageSize": 40, **window, "pageToken": "t2"},
        "first task": {"pageSize": 10},
        "probe": {"pageSize": 10, "before": "2026-01-02T00:00:00Z", "appRefs": [{"id": "a1"}]},
    }


def test_a_page_keeps_its_answer_and_its_object() -> None:
    answer = response({"list": [{"a": 1}], "nextPageToken": "t"})
    read = Page.read(answer)
    assert read.body == {"list": [{"a": 1}], "nextPageToken": "t"}
    assert read.response is answer
    assert read.request is answer.request
    assert page_body(read) is read.body


def test_a_bare_response_is_refused_where_a_page_is_expected() -> None:
    message = r"^expected the Page the request path answers \(parsed once\), got a bare response$"
    with pytest.raises(TypeError, match=message):
        page_body(response({"list": []}))


def test_the_objects_of_a_lists_views_and_one_without_an_id_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    views = [
        {"task": {"id": "t1", "state": "open"}},
        {"task": {"state": "no id"}},
        {"task": None},
        None,
        {"other": {"id": "x"}},
        {"task": {"id": "t2"}},
    ]
    logger = logging.getLogger("test_paging")
    with caplog.at_level(logging.WARNING, logger="test_paging"):
        found = list(viewed_objects(page({"list": views}), "task", logger))
    assert found == [{"id": "t1", "state": "open"}, {"id": "t2"}]
    assert [r.getMessage() for r in caplog.records] == [
        "Skipping a task without an id (POST /api/v1/grants/feed)"
    ] * 4
    assert list(viewed_objects(page({"list": None}), "task", logger)) == []
    assert list(viewed_objects(page({}), "task", logger)) == []
    caplog.clear()
    for member in ("user", "appUser", "appEntitlement", "accessReview"):
        assert list(viewed_objects(page({"list": [{member: {}}]}), member, logger)) == []
    assert [r.getMessage().split(" without")[0] for r in caplog.records] == [
        "Skipping a user",
        "Skipping an app user",
        "Skipping an app entitlement",
        "Skipping an access review",
    ]


class Listed(QueryPaging):
    page_size = 50


class Undeclared(QueryPaging):
    page_size = 50
    declares_paging = False


class Searched(BodyPaging):
    page_size = 25

    def search_filters(self, context: t.Mapping[str, t.Any] | None) -> dict[str, t.Any]:
        return {"appIds": [context["app"]]} if context else {"pageSize": 10}


def test_get_lists_page_in_the_query_string_and_searches_in_the_body() -> None:
    assert Listed().get_url_params(None, None) == {"page_size": 50}
    assert Listed().get_url_params(None, "") == {"page_size": 50}
    assert Listed().get_url_params(None, "t2") == {"page_size": 50, "page_token": "t2"}
    # an operation that declares no paging gets none, until the service pages anyway
    assert Undeclared().get_url_params(None, None) == {}
    assert Undeclared().get_url_params(None, "t2") == {"page_size": 50, "page_token": "t2"}
    assert Searched().prepare_request_payload({"app": "a1"}, None) == {
        "pageSize": 25,
        "appIds": ["a1"],
    }
    assert Searched().prepare_request_payload({"app": "a1"}, "t3") == {
        "pageSize": 25,
        "appIds": ["a1"],
        "pageToken": "t3",
    }
    assert Searched().prepare_request_payload(None, "") == {"pageSize": 10}  # a probe's size
    assert BodyPaging.search_filters(Searched(), None) == {}
