"""How the service pages and answers: one parse per page, ``nextPageToken`` until it is empty
or absent, and a token seen twice refused (a cycling server must not loop us forever).

Every endpoint pages the same way and answers protobuf-JSON, so this is shared by all streams.
"""

from __future__ import annotations

import json
import typing as t
import weakref

import requests
from singer_sdk.exceptions import FatalAPIError, RetriableAPIError
from singer_sdk.pagination import BaseAPIPaginator
from typing_extensions import override

# Parsed bodies, keyed by response, so that validation, records and paging read one parse.
_PAGES: weakref.WeakKeyDictionary[requests.Response, dict[str, t.Any]] = weakref.WeakKeyDictionary()


class MalformedPageError(RetriableAPIError):
    """A 200 whose body is not a JSON object (truncated or garbled): worth another try."""


def page_body(response: requests.Response) -> dict[str, t.Any]:
    """The JSON object of a page, parsed once per response."""
    body = _PAGES.get(response)
    if body is None:
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            msg = f"{where(response.request)} answered 200 with a body that is not a JSON object"
            raise MalformedPageError(msg, response)
        _PAGES[response] = body
    return body


def where(request: requests.PreparedRequest) -> str:
    """``METHOD /path`` of a call, without its query: how every message names a call."""
    path = request.path_url.split("?", 1)[0] if request.path_url else "?"
    return f"{request.method} {path}"


class RepeatedPageTokenError(FatalAPIError):
    """The service answered a page token it had already returned: following it would loop."""


class NextPageTokenPaginator(BaseAPIPaginator[str | None]):
    """Follows ``nextPageToken`` until it is empty or missing.

    Unlike the SDK's JSONPathPaginator it reads the already-parsed page, keeps going over an
    empty page that still carries a token, and refuses a token it has seen before anywhere in
    the traversal (not only the previous one), so a cycling server cannot loop us forever.
    """

    def __init__(self) -> None:
        super().__init__(None)
        self._seen: set[str] = set()

    @override
    def get_next(self, response: requests.Response) -> str | None:
        token = page_body(response).get("nextPageToken") or None
        if token is not None:
            if token in self._seen:
                msg = (
                    f"{where(response.request)} returned a page token it had already returned; "
                    "stopping instead of looping forever"
                )
                raise RepeatedPageTokenError(msg)
            self._seen.add(token)
        return t.cast("str | None", token)

    @override
    def continue_if_empty(self, response: requests.Response) -> bool:
        return bool(page_body(response).get("nextPageToken"))
