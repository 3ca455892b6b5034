"""The extension point for a game's player commands (build, train, send march, ...).

A game's ``commands`` module (``load_game_module(GAME, "commands")``, when it
exists) exports::

    ROUTES: list[CommandRoute]                      # mounted as POST /api/<path>
    RULE_ERRORS: tuple[type[Exception], ...] = ()   # its "the rules say no" errors

and each handler is ``async def handler(ctx, player_id, body) -> dict``.
Every route gets, uniformly: authentication, the per-player command rate
limit (429 + ``Retry-After``), strict validation of ``body_model`` from JSON,
``Idempotency-Key`` handling, one database transaction (``ctx.conn``) that the
framework commits together with the idempotency record, then the handler's
``ctx.after_commit`` callbacks (e.g. enqueue the timed event) and a snapshot
version bump of the player and of everyone passed to ``ctx.touch``, and an
entry in the OpenAPI document. A rule error ``exc`` becomes
``{"error": {"code": exc.code, "message": str(exc), "details": ...}}`` with
status ``exc.http_status`` (default 400); nothing is committed then.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from aiohttp import web
from pydantic import BaseModel
from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection

from common.errors import ConfigError
from common.game import load_game_module
from common.ids import IdGenerator
from common.settings import Settings
from common.snapshot_versions import bump_versions
from db.models import Village
from webfront import idempotency, ratelimit
from webfront.auth import authenticate
from webfront.codec import respond
from webfront.errors import ApiError
from webfront.routing import Endpoint
from webfront.state import CLOCK, CONFIG, ENGINE, IDS, LIMITER, REDIS, SETTINGS
from webfront.validation import read_body

log = logging.getLogger("webfront.commands")

B = TypeVar("B", bound=BaseModel)
_PATH_RE = re.compile(r"[a-z][a-z0-9_-]*(/[a-z][a-z0-9_-]*)*")
_RESERVED = frozenset({"register", "login", "logout", "time", "snapshot", "map", "reports"})
_SQLITE_LOCK_RETRIES = 5  # SQLite refuses a second writer at once; the whole command is re-run


@dataclass
class CommandContext:
    """What a command handler works with; ``conn`` is inside the command's transaction."""

    conn: AsyncConnection
    player_id: int
    now_ms: int
    settings: Settings
    redis: Redis
    ids: IdGenerator
    touched: set[int] = field(default_factory=set)
    callbacks: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def touch(self, *player_ids: int | None) -> None:
        """These players' snapshots change too (e.g. the target of an attack)."""
        self.touched.update(p for p in player_ids if p is not None)

    def after_commit(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` once the transaction committed (e.g. add the event to the queue).

        A failing callback is logged and does not change the answer: the
        committed rows are the truth and the reconciler repairs Redis.
        """
        self.callbacks.append(callback)

    async def own_village(self, village_id: int) -> None:
        """404 ``village_not_found`` unless the village exists and is the player's."""
        found = await self.conn.execute(
            select(Village.id).where(Village.id == village_id, Village.player_id == self.player_id)
        )
        if found.first() is None:
            raise ApiError(404, "village_not_found", "no such village of yours")


CommandHandler = Callable[[CommandContext, int, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class CommandRoute(Generic[B]):
    path: str  # "build" is served as POST /api/build
    body_model: type[B]
    handler: Callable[[CommandContext, int, B], Awaitable[dict[str, Any]]]
    summary: str = ""
    response_model: type[BaseModel] | None = None
    status: int = 200


def load_commands(game: str) -> tuple[list[CommandRoute[Any]], tuple[type[Exception], ...]]:
    """The game's command routes and rule errors; none if it has no ``commands`` module."""
    try:
        found = importlib.util.find_spec(f"{game}.commands")
    except ModuleNotFoundError:
        found = None
    if found is None:
        return [], ()
    module = load_game_module(game, "commands")
    routes = list(getattr(module, "ROUTES", []))
    errors = tuple(getattr(module, "RULE_ERRORS", ()))
    for route in routes:
        if not isinstance(route, CommandRoute):
            raise ConfigError(f"GAME: {game}.commands.ROUTES holds {route!r}, not a CommandRoute")
        if _PATH_RE.fullmatch(route.path) is None or route.path.split("/")[0] in _RESERVED:
            raise ConfigError(
                f"GAME: command path {route.path!r} must be lower-case words joined by '/' "
                f"and must not start with one of {sorted(_RESERVED)}"
            )
    return routes, errors


def _rule_error(exc: Exception) -> ApiError:
    details = getattr(exc, "details", None)
    return ApiError(
        int(getattr(exc, "http_status", 400)),
        str(getattr(exc, "code", "rule_violation")),
        str(getattr(exc, "message", None) or exc),
        details=dict(details) if details else None,
    )


def _is_sqlite_lock(exc: OperationalError) -> bool:
    return "database is locked" in str(exc.orig)


def command_handler(
    route: CommandRoute[Any], rule_errors: tuple[type[Exception], ...]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    full_path = f"/api/{route.path}"

    async def handle(request: web.Request) -> web.Response:
        app = request.app
        player_id = await authenticate(request)
        await app[LIMITER].hit(
            ratelimit.Check(
                "commands",
                str(player_id),
                app[CONFIG].commands_per_player,
                "too many commands; slow down",
            )
        )
        key = idempotency.key_of(request)
        body = await read_body(request, route.body_model)
        engine = app[ENGINE]
        digest = idempotency.request_hash(full_path, body) if key else ""
        if key:
            stored = await idempotency.lookup(engine, player_id, key)
            if stored is not None:
                return idempotency.replay(request, stored, digest)
        for attempt in range(_SQLITE_LOCK_RETRIES):
            now = app[CLOCK].now_ms()
            try:
                async with engine.begin() as conn:
                    ctx = CommandContext(conn, player_id, now, app[SETTINGS], app[REDIS], app[IDS])
                    result = await route.handler(ctx, player_id, body)
                    if key:
                        await idempotency.store(
                            conn, player_id, key, digest, route.status, result, now
                        )
                break
            except rule_errors as exc:
                if key and (stored := await idempotency.lookup(engine, player_id, key)):
                    return idempotency.replay(request, stored, digest)
                raise _rule_error(exc) from None
            except IntegrityError:
                if key and (stored := await idempotency.lookup(engine, player_id, key)):
                    return idempotency.replay(request, stored, digest)
                raise
            except OperationalError as exc:
                if not _is_sqlite_lock(exc) or attempt == _SQLITE_LOCK_RETRIES - 1:
                    raise
                await asyncio.sleep(0.01 * (attempt + 1))
        for callback in ctx.callbacks:
            try:
                await callback()
            except Exception:
                log.exception("after-commit callback of %s failed", full_path)
        await bump_versions(
            app[REDIS], app[SETTINGS].redis_prefix, {player_id, *ctx.touched}, app[CLOCK].now_ms()
        )
        return respond(request, result, status=route.status)

    return handle


def command_endpoints(game: str) -> list[Endpoint]:
    routes, rule_errors = load_commands(game)
    return endpoints_for(routes, rule_errors)


def endpoints_for(
    routes: Sequence[CommandRoute[Any]], rule_errors: tuple[type[Exception], ...] = ()
) -> list[Endpoint]:
    return [
        Endpoint(
            "POST",
            f"/api/{route.path}",
            command_handler(route, rule_errors),
            route.summary or f"Command {route.path}",
            "commands",
            body=route.body_model,
            response=route.response_model,
            status=route.status,
            errors=(404, 409, 429),
            headers=(
                (
                    idempotency.HEADER,
                    "optional; a repeat with the same key and body returns the first answer",
                ),
            ),
        )
        for route in routes
    ]
