"""The extension point for a game's player commands (build, train, send march, ...).

A game's ``commands`` module (``load_game_module(GAME, "commands")``, when it
exists) exports::

    ROUTES: list[CommandRoute]                      # mounted as POST /api/<path>
    RULE_ERRORS: tuple[type[Exception], ...] = ()   # its "the rules say no" errors

and each handler is ``async def handler(ctx, player_id, body) -> dict``.
Every route gets, uniformly: authentication, the per-player command rate
limit (429 + ``Retry-After``), strict validation of ``body_model`` from JSON,
``Idempotency-Key`` handling, one database transaction (``ctx.session``) that
the framework commits together with the events the handler scheduled
(``ctx.schedule``) and the idempotency record; after the commit the events are
indexed in the queue, ``ctx.after_commit`` callbacks run and the snapshot
versions of the player and of everyone passed to ``ctx.touch_players`` are
bumped; and an entry in the OpenAPI document. A rule error ``exc`` becomes
``{"error": {"code": exc.code, "message": str(exc), "details": ...}}`` with
status ``exc.http_status`` (default 400); nothing is committed then.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from aiohttp import web
from pydantic import BaseModel
from sqlalchemy import delete, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from common.errors import ConfigError
from common.game import load_game_module
from common.ids import IdGenerator
from common.queue import Event, NewEvent
from common.queue.durable import add_durable_events
from common.settings import Settings
from common.snapshot_versions import bump_versions
from db.engine import is_transaction_conflict
from db.models import ScheduledEvent, Village
from webfront import idempotency, ratelimit
from webfront.auth import authenticate
from webfront.codec import respond
from webfront.errors import ApiError
from webfront.routing import Endpoint
from webfront.state import (
    CLOCK,
    CONFIG,
    ENGINE,
    IDS,
    LIMITER,
    LOCAL_CACHE,
    QUEUE,
    REDIS,
    SESSION_FACTORY,
    SETTINGS,
)
from webfront.validation import read_body

log = logging.getLogger("webfront.commands")

B = TypeVar("B", bound=BaseModel)
_PATH_RE = re.compile(r"[a-z][a-z0-9_-]*(/[a-z][a-z0-9_-]*)*")
_RESERVED = frozenset({"register", "login", "logout", "time", "snapshot", "map", "reports"})
# A transaction that lost to another (SQLite refuses a second writer, a PostgreSQL
# deadlock) is run again from the start, this many times at most.
_CONFLICT_RETRIES = 5


@dataclass
class CommandContext:
    """What a command handler works with: ``session`` is inside the command's transaction.

    It has what a game's command transaction needs (the reference game's
    ``CommandTx``): ``session``, ``now_ms``, ``world_speed``, ``ids``,
    ``schedule`` (a durable event, written in this transaction and indexed in
    the queue after the commit), ``cancel`` (a pending durable event),
    ``touch_players`` and ``after_commit``.
    """

    session: AsyncSession
    player_id: int
    now_ms: int
    settings: Settings
    ids: IdGenerator
    events: list[NewEvent] = field(default_factory=list)
    cancelled: list[tuple[int, int]] = field(default_factory=list)  # (village_id, event_id)
    touched: set[int] = field(default_factory=set)
    callbacks: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @property
    def world_speed(self) -> float:
        return self.settings.world_speed

    def schedule(self, kind: str, village_id: int, due_ms: int, payload: dict[str, Any]) -> int:
        """A timed event, committed with this transaction; returns its id."""
        event_id = self.ids.next_id()
        self.events.append(NewEvent(kind, village_id, due_ms, dict(payload), id=event_id))
        return event_id

    async def cancel(self, event_id: int) -> bool:
        """Cancel a pending durable event in this transaction; False if it already ran."""
        deleted = await self.session.execute(
            delete(ScheduledEvent)
            .where(ScheduledEvent.id == event_id)
            .returning(ScheduledEvent.village_id)
        )
        village_id = deleted.scalar_one_or_none()
        if village_id is None:
            return False
        self.cancelled.append((village_id, event_id))
        return True

    def touch_players(self, player_ids: Iterable[int | None]) -> None:
        """These players' snapshots change too (e.g. the target of an attack)."""
        self.touched.update(p for p in player_ids if p is not None)

    def touch(self, *player_ids: int | None) -> None:
        self.touch_players(player_ids)

    def after_commit(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` once the transaction committed.

        A failing callback is logged and does not change the answer: the
        committed rows are the truth.
        """
        self.callbacks.append(callback)

    async def own_village(self, village_id: int) -> None:
        """404 ``village_not_found`` unless the village exists and is the player's."""
        found = await self.session.execute(
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
    try:
        module = load_game_module(game, "commands")
    except ImportError as exc:  # a broken game module: one clear line, not a traceback
        raise ConfigError(f"GAME: cannot import {game}.commands: {exc}") from None
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
        for attempt in range(_CONFLICT_RETRIES):
            now = app[CLOCK].now_ms()
            try:
                async with app[SESSION_FACTORY]() as session, session.begin():
                    ctx = CommandContext(session, player_id, now, app[SETTINGS], app[IDS])
                    result = await route.handler(ctx, player_id, body)
                    events = await add_durable_events(
                        session, ctx.events, clock=app[CLOCK], ids=app[IDS]
                    )
                    if key:
                        await idempotency.store(
                            session, player_id, key, digest, route.status, result, now
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
            except DBAPIError as exc:
                if not is_transaction_conflict(exc) or attempt == _CONFLICT_RETRIES - 1:
                    raise
                await asyncio.sleep(0.01 * (attempt + 1))
        await _after_commit(app, ctx, events, full_path)
        return respond(request, result, status=route.status)

    return handle


async def _after_commit(
    app: web.Application, ctx: CommandContext, events: list[Event], path: str
) -> None:
    """Index the new events, tidy cancelled ones, run callbacks, bump snapshot versions.

    Failures here are logged, never answered: the commit is the truth and the
    task server's reconciler indexes any event Redis missed.
    """
    queue = app[QUEUE]
    try:
        if events:
            await queue.index(events)
        for village_id, event_id in ctx.cancelled:
            await queue.cancel(village_id, event_id)
    except Exception:
        log.exception("indexing the events of %s failed; the reconciler will", path)
    for callback in ctx.callbacks:
        try:
            await callback()
        except Exception:
            log.exception("after-commit callback of %s failed", path)
    touched = {ctx.player_id, *ctx.touched}
    await bump_versions(app[REDIS], app[SETTINGS].redis_prefix, touched, app[CLOCK].now_ms())
    app[LOCAL_CACHE].forget_versions(touched)  # Redis pushes it too; here it is certain now


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
