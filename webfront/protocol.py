"""Requests refused by aiohttp's HTTP parser, answered in the API's error shape.

A request the parser cannot accept (a control character in a header, a header
line past 8,190 bytes, too many headers, ``Content-Length`` with
``Transfer-Encoding``, an unknown method) never reaches a route: aiohttp's
``RequestHandler.handle_error`` answers it with the parser's message as a
``text/plain`` body and logs it at ERROR with a traceback. That message quotes
the offending bytes, which can be a ``Cookie`` header with a live session
token. aiohttp offers no hook for these answers (aio-libs/aiohttp#3287), so
``install()`` replaces that one method: the answer is ``{"error": {"code",
"message"}}`` with a fixed message, and the log is one line naming the peer and
the kind of refusal, never the request's bytes.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import http_exceptions, web, web_protocol
from aiohttp.web_request import BaseRequest

log = logging.getLogger("webfront.protocol")

SERVER = "webgame"  # the Server header of every answer: no product versions

_ANSWERS: dict[int, tuple[str, str]] = {
    400: ("bad_request", "the request is not valid HTTP"),
    413: ("payload_too_large", "the request is too large"),
    431: ("headers_too_large", "the request's headers are too large"),
    500: ("internal_error", "an unexpected error happened; it was logged"),
    504: ("timeout", "the request took too long"),
}


def _status(status: int, exc: BaseException | None) -> int:
    if isinstance(exc, http_exceptions.LineTooLong):
        return 431
    return status if status in _ANSWERS else 400 if status < 500 else 500


def handle_error(
    self: web_protocol.RequestHandler,  # type: ignore[type-arg]
    request: BaseRequest,
    status: int = 500,
    exc: BaseException | None = None,
    message: str | None = None,
) -> web.StreamResponse:
    """aiohttp's ``RequestHandler.handle_error``, without echoing or logging the request."""
    status = _status(status, exc)
    kind = type(exc).__name__ if exc is not None else "none"
    if status >= 500:
        log.error("request from %s failed outside a route: %s", request.remote, kind)
    else:
        log.info("refused a malformed request from %s: %s (%d)", request.remote, kind, status)
    if request.writer.output_size > 0:  # the same as aiohttp's: too late for an answer
        raise ConnectionError("response already started; cannot send an error answer")
    code, text = _ANSWERS[status]
    body = json.dumps({"error": {"code": code, "message": text}})
    response = web.Response(
        status=status,
        text=body,
        content_type="application/json",
        headers={"Server": SERVER, "X-Content-Type-Options": "nosniff"},
    )
    response.force_close()
    return response


def install() -> None:
    """Use ``handle_error`` in every aiohttp server of this process (idempotent)."""
    handler: Any = web_protocol.RequestHandler
    handler.handle_error = handle_error
