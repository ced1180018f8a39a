"""The service's error shape, so every failure path answers alike."""

from __future__ import annotations

from typing import Any

# gRPC status codes the service puts in `code`.
INVALID_ARGUMENT = 3
NOT_FOUND = 5
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


def bad_request(message: str) -> ApiError:
    return ApiError(400, INVALID_ARGUMENT, message)


def method_not_allowed(allowed: str) -> ApiError:
    return ApiError(405, UNIMPLEMENTED, "method not allowed", {"Allow": allowed})


def unauthenticated(message: str = "unauthenticated") -> ApiError:
    return ApiError(401, UNAUTHENTICATED, message)
