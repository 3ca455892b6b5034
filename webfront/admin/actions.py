"""The console's actions, each written to the audit log: requeue or drop a dead event,
ban or unban a player, replay a battle report from its stored seed."""

from __future__ import annotations

import logging
from typing import Annotated

from aiohttp import web
from pydantic import Field
from sqlalchemy import select

from db.models import Player
from webfront.admin import audit, bans, deadletters
from webfront.admin.auth import answer, authenticate_operator
from webfront.admin.hooks import GameHooks
from webfront.admin.views import Handler
from webfront.errors import ApiError, not_found
from webfront.state import CLOCK, ENGINE, QUEUE, REDIS, SESSION_FACTORY, SESSIONS, SETTINGS
from webfront.validation import StrictBody, path_id, read_body

log = logging.getLogger("webfront.admin")


class NoBody(StrictBody):
    """``{}``: an action that needs nothing more than its path."""


class BanBody(StrictBody):
    reason: Annotated[str, Field(min_length=1, max_length=200)]


def dead_action(name: str) -> Handler:
    run = deadletters.requeue if name == "requeue" else deadletters.drop

    async def handle(request: web.Request) -> web.Response:
        operator = await authenticate_operator(request)
        event_id = path_id(request, "id", "dead event")
        await read_body(request, NoBody)
        app = request.app
        outcome = await run(app[QUEUE], app[SESSION_FACTORY], event_id)
        async with app[SESSION_FACTORY]() as session, session.begin():
            await audit.record(
                session, operator, name, f"event:{event_id}",
                {"done": outcome.done, "outcome": outcome.reason}, app[CLOCK].now_ms(),
            )  # fmt: skip
        log.warning("operator %s: %s event %d: %s", operator.name, name, event_id, outcome.reason)
        if not outcome.done:
            raise ApiError(409, "not_done", f"event {event_id}: {outcome.reason}")
        return answer(request, {"ok": True, "event_id": str(event_id), "outcome": outcome.reason})

    return handle


async def _player_exists(request: web.Request, player_id: int) -> None:
    async with request.app[ENGINE].connect() as conn:
        found = await conn.execute(select(Player.id).where(Player.id == player_id))
        if found.first() is None:
            raise not_found("player")


async def ban(request: web.Request) -> web.Response:
    operator = await authenticate_operator(request)
    player_id = path_id(request, "id", "player")
    body = await read_body(request, BanBody)
    await _player_exists(request, player_id)
    app = request.app
    revoked = await bans.ban(
        app[SESSION_FACTORY], app[ENGINE], app[SESSIONS], app[REDIS], app[SETTINGS].redis_prefix,
        operator, player_id, body.reason, app[CLOCK].now_ms(),
    )  # fmt: skip
    log.warning("operator %s banned player %d", operator.name, player_id)
    return answer(request, {"ok": True, "player_id": player_id, "sessions_revoked": revoked})


async def unban(request: web.Request) -> web.Response:
    operator = await authenticate_operator(request)
    player_id = path_id(request, "id", "player")
    await read_body(request, NoBody)
    await _player_exists(request, player_id)
    app = request.app
    lifted = await bans.unban(
        app[SESSION_FACTORY], app[ENGINE], app[REDIS], app[SETTINGS].redis_prefix,
        operator, player_id, app[CLOCK].now_ms(),
    )  # fmt: skip
    log.warning("operator %s unbanned player %d", operator.name, player_id)
    return answer(request, {"ok": True, "player_id": player_id, "was_banned": lifted})


def replay(hooks: GameHooks) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        operator = await authenticate_operator(request)
        report_id = path_id(request, "id", "report")
        await read_body(request, NoBody)
        if hooks.replay is None:
            raise ApiError(404, "no_replay", "this game offers no report replay")
        app = request.app
        async with app[SESSION_FACTORY]() as session:
            result = await hooks.replay(session, report_id)
        if result is None:
            raise not_found("report")
        async with app[SESSION_FACTORY]() as session, session.begin():
            await audit.record(
                session, operator, "replay", f"report:{report_id}",
                {"equal": result.get("equal")}, app[CLOCK].now_ms(),
            )  # fmt: skip
        return answer(request, {"report_id": report_id, **result})

    return handle
