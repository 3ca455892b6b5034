"""The web tier's side of a game's commands: ``POST /api/<path>`` for each ``CommandRoute``.

A game lists its commands in ``Game.commands`` (``gameapi.CommandRoute``); each
handler is ``async def handler(tx, player_id, body) -> dict``. Every route gets,
uniformly: authentication, the per-player command rate limit (429 +
``Retry-After``), strict validation of ``body_model`` from JSON,
``Idempotency-Key`` handling, one database transaction (``tx``, a
``gameapi.Tx``) that the framework commits together with the events the
handler scheduled and the idempotency record; after the commit the unit of
work (``common.queue.work``) indexes the events, runs ``after_commit``
callbacks and bumps the snapshot versions of the player and of everyone passed
to ``tx.touch_players``; and an entry in the OpenAPI document. A rule error
``exc`` (one of ``Game.rule_errors``) becomes ``{"error": {"code": exc.code,
"message": str(exc), "details": ...}}`` with status ``exc.http_status``
(default 400); nothing is committed then. A unique or foreign-key violation is a
lost race (``db.engine.is_constraint_race``): the command runs again, and its own
checks then see the winner's row and refuse it, so a game can enforce "at most one"
with a constraint and still answer the loser with its rule error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from redis.asyncio.cluster import RedisCluster
from sqlalchemy import bindparam, select
from sqlalchemy.exc import DBAPIError

from common.queue.durable import INSERT_EVENT, durable_rows
from common.queue.tx import StaleRead, Tx, WorldShape
from common.queue.work import Committed
from db import driver
from db.command_transaction import CommandTransaction
from db.engine import is_constraint_race, is_database_outage, is_transaction_conflict
from db.models import IdempotentResponse
from gameapi.places import PLACE_ERRORS
from gameapi.routes import CommandRoute
from gameapi.stocks import stocks_of
from webfront import idempotency, ratelimit
from webfront.auth import authenticate
from webfront.codec import respond
from webfront.errors import ApiError
from webfront.guard import error_response
from webfront.routing import Endpoint
from webfront.state import (
    CLOCK,
    CONFIG,
    ENGINE,
    EVENT_KINDS,
    FAST_REDIS,
    GAME,
    IDS,
    LIMITER,
    LOCAL_CACHE,
    QUEUE,
    SETTINGS,
    SHARED_READS,
    SHARED_WRITES,
    SHELF,
)
from webfront.validation import read_body

log = logging.getLogger("webfront.commands")

# A transaction that lost to another (SQLite refuses a second writer, a PostgreSQL
# deadlock, a constraint race) is run again from the start, this many times at most.
_CONFLICT_RETRIES = 5


def rule_error(exc: Exception) -> ApiError:
    details = getattr(exc, "details", None)
    return ApiError(
        int(getattr(exc, "http_status", 400)),
        str(getattr(exc, "code", "rule_violation")),
        str(getattr(exc, "message", None) or exc),
        details=dict(details) if details else None,
    )


class _Refused(Exception):
    """A rule refused the command; ``stored`` is the key's first answer, if any."""

    def __init__(self, rule: Exception, stored: idempotency.Stored | None) -> None:
        self.rule, self.stored = rule, stored


_STORED_COLUMNS = IdempotentResponse.__table__.c  # a Core statement: no ORM per-call work
_STORED = select(_STORED_COLUMNS.request_hash, _STORED_COLUMNS.status, _STORED_COLUMNS.body).where(
    _STORED_COLUMNS.player_id == bindparam("player_id"),
    _STORED_COLUMNS.key == bindparam("key"),
)


async def _stored(tx: Tx, player_id: int, key: str) -> idempotency.Stored | None:
    """The key's stored answer: as the handler's first read took it along, or read now."""
    found = tx.along_rows
    if found is None:
        found = await tx.read(_STORED, {"player_id": player_id, "key": key})
    return idempotency.Stored(*found[0]) if found else None


@dataclass
class _Attempts:
    """When a command that failed runs again, from the start: once after a lost connection
    (the pool keeps no pre-ping, so a connection the server dropped fails on first use;
    the pool then renews them all), only when it cannot apply twice (it failed before its
    commit, or its key's row answers a repeat of one that did commit); and up to
    ``_CONFLICT_RETRIES`` times in all after it lost to another transaction (a conflict or
    a constraint race, ``db.engine``) or found what it read changed at its commit
    (``StaleRead``), a little later each time."""

    key: str | None
    outage_retried: bool = False
    conflicts: int = 0

    def again(self, exc: Exception, committing: bool) -> float | None:
        """Seconds to wait before the next run, or None: ``exc`` is the answer."""
        if not self.outage_retried and is_database_outage(exc) and (not committing or self.key):
            self.outage_retried = True
            return 0.0
        lost = isinstance(exc, StaleRead) or (
            isinstance(exc, DBAPIError)
            and (is_constraint_race(exc) or is_transaction_conflict(exc))
        )
        if not lost:
            return None
        if self.conflicts == _CONFLICT_RETRIES - 1:
            return None
        self.conflicts += 1
        return 0.01 * self.conflicts


def command_handler(
    route: CommandRoute[Any], rule_errors: tuple[type[Exception], ...]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    full_path = f"/api/{route.path}"
    rule_errors = (*rule_errors, *PLACE_ERRORS)

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
        engine, shelf = app[ENGINE], app[SHELF]
        # A key is not looked up first: a repeat runs into the stored row's primary key
        # (or a rule the first run changed), rolls back and is answered from the row
        # below, so the common first use of a key costs no extra round trip.
        speed = app[SETTINGS].world_speed
        stocks = stocks_of(app[GAME])
        world = WorldShape(app[SETTINGS].map_radius, app[SETTINGS].tick_shards)
        attempts = _Attempts(key)
        while True:
            now = app[CLOCK].now_ms()
            committing = False
            try:
                # a Core transaction: the game's statements go through ``tx.rows``/``read``
                # and ``Stocks`` on it; its connection is taken when a statement needs one,
                # and a session made only when the game asks for one
                async with CommandTransaction(shelf) as command:
                    tx = Tx(
                        None,
                        now,
                        speed,
                        app[IDS],
                        kinds=app[EVENT_KINDS],
                        player_id=player_id,
                        stocks=stocks,
                        world=world,
                        command=command,
                        shared_reads=app[SHARED_READS],
                        shared_writes=app[SHARED_WRITES],
                    )
                    if key:  # read with the handler's first read, for a refusal
                        tx.read_along(_STORED, {"player_id": player_id, "key": key})
                    try:
                        result = await route.handler(tx, player_id, body)
                    except rule_errors as exc:
                        # a repeat of a command that went through may be refused now:
                        # its first answer, read along or read now
                        stored = await _stored(tx, player_id, key) if key else None
                        raise _Refused(exc, stored) from None
                    await tx.flush()
                    events, rows = durable_rows(tx.events, clock=app[CLOCK], ids=app[IDS])
                    writes: list[driver.Write] = [(INSERT_EVENT, row) for row in rows]
                    if key:
                        digest = idempotency.request_hash(full_path, body)
                        answer = (player_id, key, digest, route.status, result, now)
                        writes.append((idempotency.STORE, idempotency.record(*answer)))
                    # the closing statement (one round trip on PostgreSQL) commits by
                    # itself when the command wrote nothing before it: it may apply
                    # from here on
                    committing = True
                    await tx.write_kept(writes)
                break
            except _Refused as refused:
                if refused.stored is not None:
                    return idempotency.replay(request, refused.stored, full_path, body)
                return error_response(request, rule_error(refused.rule))  # answered, not raised
            except Exception as exc:
                # whatever stopped a repeat (the key's row, a rule, a conflict), it rolled
                # back: the first answer is the answer
                if key and (stored := await idempotency.lookup(engine, player_id, key)):
                    return idempotency.replay(request, stored, full_path, body)
                if isinstance(exc, rule_errors):
                    return error_response(request, rule_error(exc))
                wait = attempts.again(exc, committing)
                if wait is None and isinstance(exc, StaleRead):
                    raise ApiError(
                        409, "conflict", "the place changed while the command ran; try again"
                    ) from None
                if wait is None:
                    raise
                await asyncio.sleep(wait)
        work = Committed()
        work.add(tx, events)
        queue = app[QUEUE]
        # the pipelined connection reaches the queue's Redis only when that is one server
        fast = None if isinstance(queue.redis, RedisCluster) else app[FAST_REDIS]
        await work.finish(queue, app[CLOCK].now_ms(), full_path, fast)
        app[LOCAL_CACHE].forget_versions(work.players)  # Redis pushes it too; certain now
        return respond(request, result, status=route.status)

    return handle


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
