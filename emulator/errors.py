"""The service's error shape and codes, so every failure path answers alike and no answer
carries a bare number."""

from __future__ import annotations

from typing import Any

# gRPC status codes the service puts in `code`.
INVALID_ARGUMENT = 3
NOT_FOUND = 5
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
UNAUTHENTICATED = 16


class ApiError(Exception):
    """An HTTP error answer: raised anywhere in a handler, written by the server."""

    def __init__(
        self, status: int, code: int, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": []}


# The answers given on their own, without looking at the request: a gateway's (rate limit,
# server errors) and the service's for a token revoked server-side, a credential whose scope
# or allowed IPs exclude the call, a request it rejects. Faults and throttling send these.
CANNED: dict[int, tuple[int, str]] = {
    429: (RESOURCE_EXHAUSTED, "rate limit exceeded"),
    500: (INTERNAL, "internal error"),
    502: (UNAVAILABLE, "unavailable"),
    503: (UNAVAILABLE, "unavailable"),
    504: (UNAVAILABLE, "unavailable"),
    401: (UNAUTHENTICATED, "unauthenticated: access token revoked"),
    403: (PERMISSION_DENIED, "permission denied: the API key's scope does not allow this call"),
    400: (INVALID_ARGUMENT, "invalid argument"),
}


def canned(status: int, headers: dict[str, str] | None = None) -> ApiError:
    """The answer given on its own for an HTTP ``status`` of ``CANNED``."""
    code, message = CANNED[status]
    return ApiError(status, code, message, headers)


def bad_request(message: str) -> ApiError:
    return ApiError(400, INVALID_ARGUMENT, message)


def method_not_allowed(allowed: str) -> ApiError:
    return ApiError(405, UNIMPLEMENTED, "method not allowed", {"Allow": allowed})


def unauthenticated(message: str = "unauthenticated") -> ApiError:
    return ApiError(401, UNAUTHENTICATED, message)
