"""Endpoints: one declaration per route, read both by the router and by the OpenAPI document.

A module exports a list of ``Endpoint``s; ``mount`` adds them to the app and
records them under ``ENDPOINTS`` so ``webfront.openapi`` describes exactly
what is served.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ENDPOINTS = web.AppKey("endpoints", list)


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler | None  # None with static_dir: files served by aiohttp's static route
    summary: str
    tag: str
    auth: bool = True  # needs a session (cookie or bearer token)
    body: type[BaseModel] | None = None  # JSON request body
    query: type[BaseModel] | None = None  # query parameters
    response: type[BaseModel] | None = None  # the success body
    status: int = 200
    errors: tuple[int, ...] = ()  # error statuses worth documenting besides the common ones
    media_type: str | None = None  # a non-JSON success body (text, HTML)
    headers: tuple[tuple[str, str], ...] = ()  # documented request headers: (name, description)
    etag: bool = False  # answers If-None-Match with 304
    extra: dict[str, Any] = field(default_factory=dict)  # merged into the OpenAPI operation
    static_dir: Path | None = None  # serve this folder at the path's prefix ("/static/{name}")


def mount(app: web.Application, endpoints: Sequence[Endpoint]) -> None:
    for endpoint in endpoints:
        if endpoint.static_dir is not None:
            app.router.add_static(endpoint.path.rsplit("/", 1)[0], endpoint.static_dir)
        elif endpoint.handler is not None:
            app.router.add_route(endpoint.method, endpoint.path, endpoint.handler)
        else:
            raise ValueError(f"endpoint {endpoint.path} has neither a handler nor a static_dir")
    if ENDPOINTS not in app:
        app[ENDPOINTS] = []
    app[ENDPOINTS].extend(endpoints)
