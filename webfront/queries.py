"""The web tier's side of a game's queries: ``GET /api/<path>`` for each ``QueryRoute``.

Each gets authentication, strict validation of its query string, a read-only
session (one transaction, so every statement sees the same data, rolled back
at the end) and an OpenAPI entry. A rule error of the game becomes the JSON
error shape, as for commands.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from gameapi.routes import QueryRoute
from webfront.auth import authenticate
from webfront.codec import respond
from webfront.commands import rule_error
from webfront.routing import Endpoint
from webfront.state import SESSION_FACTORY
from webfront.validation import read_query


def query_handler(
    route: QueryRoute[Any], rule_errors: tuple[type[Exception], ...]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        player_id = await authenticate(request)
        query = read_query(request, route.query_model)
        # closing the session rolls its transaction back: a query keeps nothing it did
        async with request.app[SESSION_FACTORY]() as session:
            try:
                result = await route.handler(session, player_id, query)
            except rule_errors as exc:
                raise rule_error(exc) from None
        return respond(request, result)

    return handle


def query_endpoints(
    routes: Sequence[QueryRoute[Any]], rule_errors: tuple[type[Exception], ...] = ()
) -> list[Endpoint]:
    return [
        Endpoint(
            "GET",
            f"/api/{route.path}",
            query_handler(route, rule_errors),
            route.summary or f"Query {route.path}",
            "queries",
            query=route.query_model,
            response=route.response_model,
            errors=(404,),
        )
        for route in routes
    ]
