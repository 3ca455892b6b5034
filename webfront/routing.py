"""Endpoints: one declaration per route, read both by the router and by the OpenAPI document.

A module exports a list of ``Endpoint``s; ``mount`` adds them to the app,
each handler inside ``webfront.guard`` (error shape, metrics, CSRF check), and
records them under ``ENDPOINTS`` so ``webfront.openapi`` describes exactly
what is served. Requests that no route matches (404, or 405 with ``Allow``)
are answered by ``Unmatched``, the router's last resource, through the same
guard under the label ``unmatched``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.web_urldispatcher import ResourceRoute, UrlMappingMatchInfo
from pydantic import BaseModel
from yarl import URL

from webfront.errors import not_found
from webfront.guard import UNSAFE, Handler, guard
from webfront.metrics import Metrics

if TYPE_CHECKING:
    from aiohttp.web_urldispatcher import _InfoDict

UNMATCHED = "unmatched"  # the metrics label of requests no route matches


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler | None  # None with static_dir: the files of that folder
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
    # serve this folder's files (subfolders too) at "/prefix/{filename:.+}"
    static_dir: Path | None = None


ENDPOINTS: web.AppKey[list[Endpoint]] = web.AppKey("endpoints", list)


def static_files(directory: Path) -> Handler:
    """The files in ``directory`` and its subfolders, by relative path ("icons/a.svg"):
    a fixed list read once, so no request path can reach anything else. Hidden files
    and folders (a leading dot) are not served."""
    files: dict[str, Path] = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            files[rel.as_posix()] = path

    async def serve(request: web.Request) -> web.FileResponse:
        path = files.get(request.match_info["filename"])
        if path is None:
            raise not_found("file")
        return web.FileResponse(path)

    return serve


class Unmatched(web.AbstractResource):
    """Matches every request that the resources before it did not: register it last.

    It has no routes of its own (the OpenAPI test and ``router.routes()`` do not
    see it) and answers 405 with ``Allow`` when another resource has the path.
    """

    def __init__(self, router: web.UrlDispatcher, handler: Handler) -> None:
        super().__init__()
        self._router = router
        self._route = ResourceRoute("*", handler, self)

    @property
    def canonical(self) -> str:
        return "/"  # indexed under "/": the last prefix aiohttp's router tries

    def url_for(self, **kwargs: str) -> URL:
        raise RuntimeError("Unmatched has no URL")

    async def resolve(self, request: web.Request) -> tuple[UrlMappingMatchInfo, set[str]]:
        return UrlMappingMatchInfo({}, self._route), set()

    def add_prefix(self, prefix: str) -> None:
        raise RuntimeError("Unmatched cannot move under a prefix")

    def get_info(self) -> _InfoDict:
        return {}

    def raw_match(self, path: str) -> bool:
        return False

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[web.AbstractRoute]:
        return iter(())

    async def allowed_methods(self, request: web.Request) -> set[str]:
        """The methods other resources serve at this path (an error path: a plain scan)."""
        allowed: set[str] = set()
        for resource in self._router.resources():
            if resource is not self:
                allowed |= (await resource.resolve(request))[1]
        return allowed


def mount(app: web.Application, endpoints: Sequence[Endpoint], metrics: Metrics) -> None:
    """Serve ``endpoints`` (all of the app's: the catch-all ``Unmatched`` comes last)."""
    router = app.router
    for endpoint in endpoints:
        handler = endpoint.handler
        if endpoint.static_dir is not None:
            handler = static_files(endpoint.static_dir)
        elif handler is None:
            raise ValueError(f"endpoint {endpoint.path} has neither a handler nor a static_dir")
        browser = endpoint.static_dir is not None or endpoint.media_type == "text/html"
        guarded = guard(
            handler,
            endpoint.path,
            metrics,
            check_csrf=endpoint.method in UNSAFE,
            browser=browser,
        )
        router.add_route(endpoint.method, endpoint.path, guarded)
        if endpoint.static_dir is not None:
            router.add_route("HEAD", endpoint.path, guarded)

    async def unmatched(request: web.Request) -> web.StreamResponse:
        allowed = await fallback.allowed_methods(request)
        if allowed:
            raise web.HTTPMethodNotAllowed(request.method, allowed)
        raise web.HTTPNotFound()

    fallback = Unmatched(router, guard(unmatched, UNMATCHED, metrics, check_csrf=False))
    router.register_resource(fallback)
    resolve = router.resolve

    async def resolve_pathless(request: web.Request) -> UrlMappingMatchInfo:
        # aiohttp's router answers a request without a path (``CONNECT host:port``) itself,
        # in plain text: send it to the fallback like any other unmatched request
        if not request.rel_url.raw_path:
            return (await fallback.resolve(request))[0]
        return await resolve(request)

    router.resolve = resolve_pathless  # type: ignore[method-assign]
    app[ENDPOINTS] = list(endpoints)
