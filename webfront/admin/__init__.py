"""The operator console under ``/admin``: one static page and its JSON API.

Operators have their own accounts (``wgctl operator create``), sessions and cookie
(``webfront.admin.auth``); every action is written to the audit log. The page
(``webfront/static/admin/``) has no inline script or style, so it runs under the
strict Content-Security-Policy it is served with.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from webfront.admin import actions, auth, views
from webfront.admin.hooks import load_hooks
from webfront.routing import Endpoint

STATIC_DIR = Path(__file__).resolve().parent.parent / "static" / "admin"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


async def page(_request: web.Request) -> web.FileResponse:
    response = web.FileResponse(STATIC_DIR / "index.html")
    response.headers["Content-Security-Policy"] = CSP
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def endpoints(game: str) -> list[Endpoint]:
    """The console's routes, with the hooks of ``game`` (its ``admin`` module, if any)."""
    hooks = load_hooks(game)

    def get(path: str, handler: views.Handler, summary: str) -> Endpoint:
        return Endpoint("GET", path, handler, summary, "admin", errors=(404,))

    def post(path: str, handler: views.Handler, summary: str, body: type | None = None) -> Endpoint:
        return Endpoint(
            "POST", path, handler, summary, "admin", body=body or actions.NoBody, errors=(404, 409)
        )

    return [
        Endpoint(
            "GET",
            "/admin",
            page,
            "The operator console",
            "admin",
            auth=False,
            media_type="text/html",
        ),
        Endpoint(
            "GET",
            "/admin/static/{filename}",
            None,
            "Files of the operator console",
            "admin",
            auth=False,
            media_type="application/octet-stream",
            errors=(404,),
            static_dir=STATIC_DIR,
        ),
        Endpoint(
            "POST",
            "/admin/api/login",
            auth.login,
            "Operator login: a session (cookie and body)",
            "admin",
            auth=False,
            body=auth.OperatorLoginBody,
            errors=(401, 429),
        ),
        post("/admin/api/logout", auth.logout, "End this operator session"),
        get("/admin/api/me", auth.me, "The logged-in operator"),
        get("/admin/api/overview", views.overview, "The world at a glance"),
        get("/admin/api/players", views.find_players, "Players whose name starts with ?name="),
        get("/admin/api/players/{id}", views.player_view(hooks), "A player's timeline"),
        get("/admin/api/villages/{id}", views.village_view(hooks), "A village's timeline"),
        get("/admin/api/audit", views.audit_log, "The audit log, newest first"),
        post(
            "/admin/api/dead/{id}/requeue",
            actions.dead_action("requeue"),
            "Run a dead event again",
        ),
        post("/admin/api/dead/{id}/drop", actions.dead_action("drop"), "Drop a dead event"),
        post("/admin/api/players/{id}/ban", actions.ban, "Ban a player", actions.BanBody),
        post("/admin/api/players/{id}/unban", actions.unban, "Lift a player's ban"),
        post(
            "/admin/api/reports/{id}/replay",
            actions.replay(hooks),
            "Replay a battle report from its stored seed",
        ),
    ]
