"""The one error shape of the API: ``{"error": {"code": ..., "message": ...}}``.

Handlers raise ``ApiError``; ``webfront.guard`` turns it, aiohttp's HTTP
exceptions, validation errors and anything unexpected into that shape.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from pydantic import ValidationError
from redis.exceptions import RedisError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from db.engine import is_database_outage

log = logging.getLogger("webfront")

# Codes of aiohttp's own HTTP exceptions (router misses, size limits, ...).
_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    411: "length_required",
    413: "payload_too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    431: "headers_too_large",
    500: "internal_error",
    503: "unavailable",
}


class ApiError(Exception):
    """An error answer: HTTP ``status``, a stable machine ``code`` and a human ``message``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.details = details

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.code!r}, {self.message!r})"


def unauthorized(message: str = "log in first: no valid session") -> ApiError:
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


def not_found(what: str = "resource") -> ApiError:
    return ApiError(404, "not_found", f"no such {what}")


def too_many(code: str, message: str, retry_after_s: int) -> ApiError:
    return ApiError(429, code, message, headers={"Retry-After": str(retry_after_s)})


def from_validation(exc: ValidationError, known: frozenset[str] = frozenset()) -> ApiError:
    """422 listing each bad field; the offending input is never echoed back.

    A location part is shown when it is a field name in ``known`` (the model's) or an
    index; anything else in it (an unknown key, a dict key) was chosen by the client and
    shows as ``*``. A message that quotes its input says ``invalid value`` instead.
    """
    problems = []
    for err in exc.errors(include_url=False, include_context=False):
        if err["type"] == "json_invalid":
            return ApiError(400, "malformed_json", "the request body is not valid JSON")
        parts = [
            str(part) if isinstance(part, int) or part in known else "*" for part in err["loc"]
        ]
        problem = err["msg"]
        given = err.get("input")
        if err["type"] == "extra_forbidden":
            problem = "unknown field"
        elif isinstance(given, str) and (f"'{given}'" in problem or f'"{given}"' in problem):
            problem = "invalid value"
        problems.append({"field": ".".join(parts) or "body", "problem": problem})
    first = problems[0] if problems else {"field": "body", "problem": "invalid"}
    return ApiError(
        422,
        "invalid_request",
        f"{first['field']}: {first['problem']}",
        details=problems,
    )


def from_exception(exc: BaseException) -> ApiError:
    """Map anything a handler raised to an ApiError; unexpected ones are logged, not leaked."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, web.HTTPException):
        code = _STATUS_CODES.get(exc.status, "http_error")
        headers = {}
        if exc.status == 405 and "Allow" in exc.headers:
            headers["Allow"] = exc.headers["Allow"]
        return ApiError(exc.status, code, exc.reason, headers=headers)
    if isinstance(exc, ValidationError):
        return from_validation(exc)
    if isinstance(exc, RedisError | ConnectionError | PoolTimeoutError) or is_database_outage(exc):
        log.warning("backend unavailable: %s: %s", type(exc).__name__, exc)
        return ApiError(
            503, "unavailable", "a backend server is busy or unreachable; retry shortly",
            headers={"Retry-After": "1"},
        )  # fmt: skip
    log.exception("unexpected error", exc_info=exc)
    return ApiError(500, "internal_error", "an unexpected error happened; it was logged")
