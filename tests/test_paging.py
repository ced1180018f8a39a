"""The paginator over ``nextPageToken``: empty or missing ends, empty pages with a token go on,
and a token seen before anywhere in the traversal stops the run instead of looping."""

from __future__ import annotations

import json

import pytest
import requests
from singer_sdk.exceptions import FatalAPIError

from tap_accessgov.paging import MalformedPageError, NextPageTokenPaginator, page_body


def page(body: object, raw: bytes | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code = 200
    response._content = raw if raw is not None else json.dumps(body).encode()
    response.request = requests.Request("POST", "http://127.0.0.1/api/v1/grants/feed").prepare()
    return response


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
    with pytest.raises(FatalAPIError, match="returned a page token it had already returned"):
        paginator.advance(page({"list": [{}], "nextPageToken": "a"}))


@pytest.mark.parametrize("raw", [b"<html>bad gateway</html>", b'{"list": [', b"[1, 2]", b""])
def test_a_body_that_is_not_a_json_object_is_retriable(raw: bytes) -> None:
    with pytest.raises(
        MalformedPageError, match="POST /api/v1/grants/feed answered 200 with a body"
    ):
        page_body(page(None, raw=raw))
