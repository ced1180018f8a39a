"""How the service pages and answers: a page is its JSON object, parsed once and passed along;
``nextPageToken`` is followed until it is empty or absent, and a token seen twice is refused
(a cycling server must not loop us forever).

Every endpoint pages the same way and answers protobuf-JSON, so this is shared by all streams;
the GET lists say it in the query string (``QueryPaging``), the searches and the feed (POST)
in the body (``BodyPaging``).
"""

from __future__ import annotations

import json
import logging
import re
import typing as t
from dataclasses import dataclass, field

import requests
from singer_sdk.exceptions import FatalAPIError, RetriableAPIError
from singer_sdk.pagination import BaseAPIPaginator
from typing_extensions import override

from tap_accessgov.retries import where


class MalformedPageError(RetriableAPIError):
    """A 200 whose body is not a JSON object (truncated or garbled): worth another try."""


@dataclass(frozen=True)
class Page:
    """One answer of the service and its JSON object.

    The request path (``AccessGovStream.request_decorator``) returns a Page where the SDK's
    returns the response, and the SDK hands that object on untouched to ``parse_response``,
    the paginator and ``update_sync_costs``: each reads ``body`` instead of parsing the body
    again. It is parsed inside the retried attempt, so a malformed 200 is retried like a
    dropped connection.
    """

    response: requests.Response = field(repr=False)
    body: dict[str, t.Any] = field(repr=False)

    @classmethod
    def read(cls, response: requests.Response) -> Page:
        """Parse ``response``'s body; MalformedPageError if it is not a JSON object."""
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            msg = f"{where(response.request)} answered 200 with a body that is not a JSON object"
            raise MalformedPageError(msg, response)
        return cls(response, body)

    @property
    def request(self) -> requests.PreparedRequest:
        """The call this page answers (as on a response: messages name it with ``where``)."""
        return self.response.request


def page_body(page: Page | requests.Response) -> dict[str, t.Any]:
    """The JSON object of the Page the request path handed to an SDK hook (typed for a
    response). A bare response is refused rather than parsed again: every hook that reads a
    page gets the Page, so a response here is a caller outside the request path."""
    if not isinstance(page, Page):
        msg = "expected the Page the request path answers (parsed once), got a bare response"
        raise TypeError(msg)
    return page.body


def viewed_objects(
    page: Page | requests.Response,
    member: str,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
) -> t.Iterator[dict[str, t.Any]]:
    """The ``member`` object of each view of a page's ``list`` (``appEntitlement`` of an
    AppEntitlementView, ``task`` of a TaskView...): the service's lists wrap each object in a
    view. One without an id cannot be keyed and is skipped, with a warning naming the call."""
    for view in page_body(page).get("list") or []:
        found = (view or {}).get(member) or {}
        if found.get("id"):
            yield found
        else:
            logger.warning("Skipping %s without an id (%s)", _named(member), where(page.request))


def _named(member: str) -> str:
    """A member's name in words, with its article: ``accessReview``, "an access review"."""
    words = re.sub(r"(?<=[a-z])([A-Z])", r" \1", member).lower()
    return f"{'an' if words[0] in 'aeio' else 'a'} {words}"


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
        token: str | None = page_body(response).get("nextPageToken") or None
        if token is not None:
            if token in self._seen:
                msg = (
                    f"{where(response.request)} returned a page token it had already returned; "
                    "stopping instead of looping forever"
                )
                raise RepeatedPageTokenError(msg)
            self._seen.add(token)
        return token

    @override
    def continue_if_empty(self, response: requests.Response) -> bool:
        return bool(page_body(response).get("nextPageToken"))


class QueryPaging:
    """``page_size`` and, after the first page, ``page_token`` in the query string: how the
    service's GET lists page. An operation that declares no paging parameters (the automation
    exclusions: ``declares_paging = False``) gets none on its first request, and both when
    the service still answers with a ``nextPageToken``."""

    page_size: int
    declares_paging = True

    def get_url_params(
        self, context: t.Mapping[str, t.Any] | None, next_page_token: str | None
    ) -> dict[str, t.Any]:
        if not next_page_token:
            return {"page_size": self.page_size} if self.declares_paging else {}
        return {"page_size": self.page_size, "page_token": next_page_token}


class BodyPaging:
    """``pageSize`` and, after the first page, ``pageToken`` in the JSON body: how the
    service's searches and its feed (POST) page. ``search_filters`` adds the stream's own
    fields (a ``pageSize`` among them replaces the setting's: a probe asks for a small page)."""

    page_size: int

    def prepare_request_payload(
        self, context: t.Mapping[str, t.Any] | None, next_page_token: str | None
    ) -> dict[str, t.Any]:
        body: dict[str, t.Any] = {"pageSize": self.page_size, **self.search_filters(context)}
        if next_page_token:
            body["pageToken"] = next_page_token
        return body

    def search_filters(self, context: t.Mapping[str, t.Any] | None) -> dict[str, t.Any]:
        """The fields of the request besides its paging (none unless the stream says)."""
        return {}
