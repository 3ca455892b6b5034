"""``GET /api/time``: the server's clock, for clients to measure their offset."""

from __future__ import annotations

from aiohttp import web

from webfront.codec import respond
from webfront.routing import Endpoint
from webfront.state import CLOCK
from webfront.validation import Out


class TimeOut(Out):
    server_time_ms: int


async def server_time(request: web.Request) -> web.Response:
    response = respond(request, {"server_time_ms": request.app[CLOCK].now_ms()})
    response.headers["Cache-Control"] = "no-store"
    return response


ENDPOINTS = [
    Endpoint(
        "GET",
        "/api/time",
        server_time,
        "Server time in ms since the epoch (measure the offset with the round trip)",
        "meta",
        auth=False,
        response=TimeOut,
    ),
]
