"""What the console reads: the world at a glance, timelines, the audit log.

Everything comes from the framework's own tables (players, villages, scheduled and
processed events, bans), the queue in Redis, the task servers' status records
(``gameserver.status``) and, for a game's own rows, the game's ``admin_timeline`` hook.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import Field
from sqlalchemy import func, select, text

from common.queue import DeadEvent, codec
from db.models import Player, PlayerBan, PlayerSession, ProcessedEvent, ScheduledEvent, Village
from gameserver.status import read_status
from webfront.admin import audit
from webfront.admin.auth import answer, authenticate_operator
from webfront.admin.hooks import GameHooks
from webfront.errors import not_found
from webfront.state import CLOCK, ENGINE, QUEUE, REDIS, SESSION_FACTORY, SETTINGS
from webfront.validation import Query, path_id, read_query

DEAD_SHOWN = 100  # dead letters listed in the overview
PROCESSED_SHOWN = 50  # processed events listed per village
PROBE_TIMEOUT_S = 2.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def plain(value: Any) -> Any:
    """``value`` made JSON-ready (a payload may hold bytes or non-string keys)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def dead_row(dead: DeadEvent) -> dict[str, Any]:
    event = dead.event
    return {
        "id": str(dead.id),  # ids pass 2**53: text, so the page's numbers stay exact
        "partition": dead.partition,
        "kind": event.kind if event else None,
        "village_id": event.village_id if event else None,
        "due_ms": event.due_ms if event else None,
        "durable": event.durable if event else None,
        "payload": plain(event.payload) if event else None,
        "attempts": dead.attempts,
        "died_ms": dead.died_ms,
        "error": dead.error,
    }


async def _timed(probe: Awaitable[Any]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        detail = await asyncio.wait_for(probe, PROBE_TIMEOUT_S)
    except Exception as exc:  # any failure is the answer: say which
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 2), **(detail or {})}


async def _redis_probe(request: web.Request) -> dict[str, Any]:
    redis = request.app[REDIS]
    await redis.ping()
    info = await redis.info("server")
    memory = await redis.info("memory")
    return {
        "version": info.get("redis_version") or info.get("valkey_version"),
        "used_memory": memory.get("used_memory_human"),
    }


async def _db_probe(request: web.Request) -> dict[str, Any]:
    engine = request.app[ENGINE]
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
    return {"dialect": engine.dialect.name}


async def _counts(request: web.Request) -> dict[str, int]:
    async with request.app[ENGINE].connect() as conn:
        out = {}
        for name, query in (
            ("players", select(func.count()).select_from(Player)),
            ("villages", select(func.count()).select_from(Village)),
            ("banned", select(func.count()).select_from(PlayerBan)),
            ("pending_events", select(func.count()).select_from(ScheduledEvent)),
            (
                "dead_events_in_db",
                select(func.count())
                .select_from(ScheduledEvent)
                .where(ScheduledEvent.dead_ms.is_not(None)),
            ),
        ):
            out[name] = int((await conn.execute(query)).scalar() or 0)
        return out


async def overview(request: web.Request) -> web.Response:
    await authenticate_operator(request)
    app = request.app
    now = app[CLOCK].now_ms()
    queue = app[QUEUE]
    redis_health, db_health = await asyncio.gather(
        _timed(_redis_probe(request)), _timed(_db_probe(request))
    )
    world = await _counts(request) if db_health["ok"] else None
    partitions: list[dict[str, Any]] = []
    dead: list[dict[str, Any]] = []
    servers: list[dict[str, Any]] = []
    if redis_health["ok"]:
        stats = await queue.stats()
        partitions = [
            {
                f: getattr(s, f)
                for f in ("partition", "depth", "ready", "inflight", "dead", "lag_ms")
            }
            for s in stats
        ]
        rows = await queue.dead(limit=DEAD_SHOWN)
        dead = [dead_row(d) for d in sorted(rows, key=lambda d: -d.died_ms)[:DEAD_SHOWN]]
        servers = await read_status(app[REDIS], app[SETTINGS].redis_prefix, now)
    rates = [s["events_per_s"] for s in servers if s.get("events_per_s") is not None]
    ticks = [s.get("tick") or {} for s in servers]
    return answer(
        request,
        {
            "now_ms": now,
            "world": world,
            "queue": {
                "partitions": partitions,
                "depth": sum(p["depth"] for p in partitions),
                "ready": sum(p["ready"] for p in partitions),
                "inflight": sum(p["inflight"] for p in partitions),
                "dead": sum(p["dead"] for p in partitions),
                "max_lag_ms": max((p["lag_ms"] for p in partitions), default=0),
            },
            "dead_letters": dead,
            "events_per_s": round(sum(rates), 1) if rates else None,
            "tick": {
                "avg_ms": max(
                    (t["avg_ms"] for t in ticks if t.get("avg_ms") is not None), default=None
                ),
                "overruns_total": sum(int(t.get("overruns_total") or 0) for t in ticks),
                "failures_total": sum(int(t.get("failures_total") or 0) for t in ticks),
            },
            "task_servers": servers,
            "health": {"redis": redis_health, "db": db_health},
        },
    )


def _event_state(row: ScheduledEvent) -> str:
    if row.dead_ms is not None:
        return "dead"
    return "failing" if row.attempts else "pending"


async def village_timeline(
    request: web.Request, hooks: GameHooks, village_id: int
) -> dict[str, Any]:
    app = request.app
    queue = app[QUEUE]
    async with app[SESSION_FACTORY]() as session:
        village = (await session.execute(select(Village).where(Village.id == village_id))).scalar()
        if village is None:
            raise not_found("village")
        events = (
            await session.execute(
                select(ScheduledEvent)
                .where(ScheduledEvent.village_id == village_id)
                .order_by(ScheduledEvent.due_ms, ScheduledEvent.priority, ScheduledEvent.id)
            )
        ).scalars()
        pending = []
        for row in events:
            try:
                payload = plain(codec.unpack(row.payload))
            except Exception:  # a corrupt payload is shown as such, not a 500
                payload = None
            pending.append(
                {
                    "id": str(row.id),
                    "kind": row.kind,
                    "state": _event_state(row),
                    "due_ms": row.due_ms,
                    "attempts": row.attempts,
                    "error": row.last_error,
                    "dead_ms": row.dead_ms,
                    "payload": payload,
                }
            )
        processed = [
            {"id": str(r.event_id), "kind": r.kind, "processed_ms": r.processed_ms}
            for r in (
                await session.execute(
                    select(ProcessedEvent)
                    .where(ProcessedEvent.village_id == village_id)
                    .order_by(ProcessedEvent.processed_ms.desc())
                    .limit(PROCESSED_SHOWN)
                )
            ).scalars()
        ]
        game = await hooks.timeline(session, village_id) if hooks.timeline else {}
    partition = queue.partition_of(village_id)
    dead = [
        dead_row(d)
        for d in await queue.dead(partition, limit=1000)
        if d.event is not None and d.event.village_id == village_id
    ]
    return {
        "village": {
            "id": village.id,
            "name": village.name,
            "player_id": village.player_id,
            "x": village.x,
            "y": village.y,
            "partition": partition,
        },
        "events": pending,
        "dead_letters": dead,
        "processed": processed,
        "game": plain(game),
    }


def village_view(hooks: GameHooks) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        await authenticate_operator(request)
        village_id = path_id(request, "id", "village")
        return answer(request, await village_timeline(request, hooks, village_id))

    return handle


def player_view(hooks: GameHooks) -> Handler:
    async def handle(request: web.Request) -> web.Response:
        await authenticate_operator(request)
        player_id = path_id(request, "id", "player")
        now = request.app[CLOCK].now_ms()
        async with request.app[SESSION_FACTORY]() as session:
            player = (await session.execute(select(Player).where(Player.id == player_id))).scalar()
            if player is None:
                raise not_found("player")
            ban = (
                await session.execute(select(PlayerBan).where(PlayerBan.player_id == player_id))
            ).scalar()
            live = (
                await session.execute(
                    select(func.count())
                    .select_from(PlayerSession)
                    .where(
                        PlayerSession.player_id == player_id,
                        PlayerSession.revoked.is_(False),
                        PlayerSession.expires_ms > now,
                    )
                )
            ).scalar()
            village_ids = [
                int(v)
                for v in (
                    await session.execute(
                        select(Village.id)
                        .where(Village.player_id == player_id)
                        .order_by(Village.id)
                    )
                ).scalars()
            ]
        villages = [await village_timeline(request, hooks, v) for v in village_ids]
        return answer(
            request,
            {
                "player": {
                    "id": player.id,
                    "name": player.name,
                    "created_ms": player.created_ms,
                    "is_bot": player.is_bot,
                    "live_sessions": int(live or 0),
                    "ban": None
                    if ban is None
                    else {"reason": ban.reason, "since_ms": ban.created_ms},
                },
                "villages": villages,
            },
        )

    return handle


class PlayerSearch(Query):
    name: str = Field("", max_length=64)


async def find_players(request: web.Request) -> web.Response:
    await authenticate_operator(request)
    query = read_query(request, PlayerSearch)
    like = query.name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    async with request.app[ENGINE].connect() as conn:
        rows = await conn.execute(
            select(Player.id, Player.name, PlayerBan.player_id.is_not(None))
            .outerjoin(PlayerBan, PlayerBan.player_id == Player.id)
            .where(Player.name.like(like, escape="\\"))
            .order_by(Player.name)
            .limit(50)
        )
        found = [{"id": r[0], "name": r[1], "banned": bool(r[2])} for r in rows]
    return answer(request, {"players": found})


class AuditQuery(Query):
    limit: int = Field(50, ge=1, le=500)


async def audit_log(request: web.Request) -> web.Response:
    await authenticate_operator(request)
    query = read_query(request, AuditQuery)
    return answer(request, {"entries": await audit.recent(request.app[ENGINE], query.limit)})
