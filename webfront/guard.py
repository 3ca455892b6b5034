"""The guard around every handler: CSRF check, error shape and metrics.

CSRF: session cookies are ``SameSite=Strict`` (a browser never sends them
with a request started by another site), and every POST must carry
``Content-Type: application/json``, which an HTML form on another site cannot
send and a cross-site ``fetch`` can only send after a CORS preflight that this
server never approves (it sends no CORS headers). Either defence alone stops a
forged request.

Each route's handler is wrapped once, when it is mounted (``webfront.routing``),
instead of running an aiohttp middleware: a middleware chain costs every
request two more coroutine layers, a cache lookup of the chain and a route
lookup for the label (a share of a snapshot poll worth saving). Here the route
label and whether the CSRF check applies are known in advance.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from webfront.codec import respond
from webfront.errors import ApiError, from_exception
from webfront.metrics import Metrics
from webfront.protocol import SERVER

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# Pages and files a browser renders: only this server's own scripts and styles run, no page
# may frame them, no type sniffing, no full URL sent to other sites.
BROWSER_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(request: web.Request, error: ApiError) -> web.Response:
    return respond(request, error.body(), status=error.status, headers=error.headers)


def _require_json(request: web.Request) -> None:
    content_type = request.headers.get("Content-Type", "")
    if content_type.partition(";")[0].strip().lower() != "application/json":
        raise ApiError(
            415,
            "unsupported_media_type",
            "send the request with Content-Type: application/json",
        )


def guard(
    handler: Handler,
    route: str,
    metrics: Metrics,
    *,
    check_csrf: bool,
    browser: bool = False,
) -> Handler:
    """``handler`` answering every error in the API's shape, counted under ``route``.

    ``check_csrf`` (routes of an unsafe method): refuse a request without a JSON content
    type (415) before the handler runs. ``browser`` (pages and their files): answers carry
    ``BROWSER_HEADERS``. Every answer names the server without versions.
    """
    observe = metrics.observe
    clock = time.perf_counter

    async def guarded(request: web.Request) -> web.StreamResponse:
        started = clock()
        response: web.StreamResponse
        try:
            if check_csrf:
                _require_json(request)
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = error_response(request, from_exception(exc))
        except Exception as exc:
            response = error_response(request, from_exception(exc))
        headers = response.headers
        headers["Server"] = SERVER
        if browser:
            headers.update(BROWSER_HEADERS)
        observe(request.method, route, response.status, clock() - started)
        return response

    return guarded
