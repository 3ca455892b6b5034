"""The command ceiling: ``POST /api/build`` by hand on bare aiohttp + asyncpg.

One transaction per request, the same writes a refgame build makes: a
conditional spend (settle and subtract in one UPDATE of ``village_stock``, no
row when the stock does not cover the cost), a ``build_orders`` row, a
``scheduled_events`` row and an ``idempotent_responses`` row, committed with
``synchronous_commit`` on (the server default). No framework, no ORM, no rules
beyond the spend, no Redis: what the database allows for this work.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from typing import Any

import asyncpg
from aiohttp import web

from common.amounts import to_fixed
from refgame.buildings import build_cost
from refgame.resources import RESOURCE_TYPES


def _settled(res: str, cap: str, declining: bool) -> str:
    value = f"LEAST({cap}_cap, {res} + {res}_rate * GREATEST($2 - updated_ms, 0))"
    return f"GREATEST(0, {value})" if declining else value


def _spend_parts() -> tuple[str, str]:
    """The SET list and the WHERE conditions: every resource settled at $2, $3.. subtracted."""
    sets, conds = [], []
    for i, r in enumerate(RESOURCE_TYPES):
        value = _settled(r.name, r.cap or r.name, r.may_decline)
        sets.append(f"{r.name} = {value} - ${i + 3}")
        conds.append(f"{value} >= ${i + 3}")
    return ", ".join(sets), " AND ".join(conds)


def spend_sql() -> str:
    """Settle every resource at $2 and subtract $3.. in one UPDATE, only if each covers it."""
    sets, conds = _spend_parts()
    return (
        f"UPDATE village_stock SET {sets}, updated_ms = GREATEST(updated_ms, $2) "
        f"WHERE village_id = $1 AND {conds} "
        "RETURNING updated_ms, (SELECT player_id FROM villages WHERE id = $1)"
    )


def builds_sql() -> str:
    """Many builds (``$1`` their villages, ``$n`` their idempotency keys) as one statement,
    as the web tier writes commands that wait together (``db.shared_writes``): the spends
    in one UPDATE, then an order, an event and an idempotency row for each that held."""
    sets, conds = _spend_parts()
    n = len(RESOURCE_TYPES)
    kind, done, first_event, keys = f"${n + 3}", f"${n + 4}", f"${n + 5}", f"${n + 6}"
    return (
        "WITH asked AS (SELECT * FROM unnest($1::bigint[], "
        f"{keys}::text[]) AS a(village_id, key)), "
        f"spent AS (UPDATE village_stock SET {sets}, updated_ms = GREATEST(updated_ms, $2) "
        f"FROM asked WHERE village_stock.village_id = asked.village_id AND {conds} "
        "RETURNING asked.village_id, asked.key, "
        "(SELECT player_id FROM villages WHERE id = asked.village_id) AS player_id), "
        "orders AS (INSERT INTO build_orders (village_id, kind, target_level, started_ms, "
        f"done_ms) SELECT village_id, {kind}, 1, $2, {done} FROM spent "
        "RETURNING id, village_id), "
        "events AS (INSERT INTO scheduled_events (id, kind, village_id, due_ms, priority, "
        f"payload, created_ms, attempts) SELECT {first_event} + row_number() OVER (), "
        f"'build_done', village_id, {done}, 0, "
        "convert_to(json_build_object('order_id', id)::text, 'UTF8'), $2, 0 FROM orders) "
        "INSERT INTO idempotent_responses (player_id, key, request_hash, status, body, "
        "created_ms) SELECT player_id, key, repeat('0', 64), 200, "
        "json_build_object('kind', " + kind + "::text), $2 FROM spent"
    )


ORDER_SQL = (
    "INSERT INTO build_orders (village_id, kind, target_level, started_ms, done_ms) "
    "VALUES ($1, $2, 1, $3, $4) RETURNING id"
)
EVENT_SQL = (
    "INSERT INTO scheduled_events (id, kind, village_id, due_ms, priority, payload, "
    "created_ms, attempts) VALUES ($1, 'build_done', $2, $3, 0, $4, $5, 0)"
)
IDEMPOTENCY_SQL = (
    "INSERT INTO idempotent_responses (player_id, key, request_hash, status, body, created_ms) "
    "VALUES ($1, $2, $3, 200, $4, $5)"
)


class BareBuild:
    """The hand-written build transaction (also the world bench's floor for a command or an
    event: ``bench.world.floor``)."""

    def __init__(self) -> None:
        self.spend = spend_sql()
        self.builds = builds_sql()
        self.cost = build_cost("woodcutter", 1).as_dict()
        self.fixed = [to_fixed(self.cost.get(r.name, 0)) for r in RESOURCE_TYPES]
        self.next_event = int(time.time() * 1000) << 16 | secrets.randbelow(1 << 12) << 4

    async def run(
        self, conn: asyncpg.Connection, village_id: int, kind: str, key: str
    ) -> str | None:
        """Build ``kind`` in ``village_id`` in one transaction; the answer's JSON, or None
        when the stock does not cover the cost (nothing written)."""
        now = int(time.time() * 1000)
        async with conn.transaction():
            row = await conn.fetchrow(self.spend, village_id, now, *self.fixed)
            if row is None:
                return None
            done = now + 60_000
            order_id = await conn.fetchval(ORDER_SQL, village_id, kind, now, done)
            self.next_event += 1
            payload = json.dumps({"order_id": order_id}).encode()
            await conn.execute(EVENT_SQL, self.next_event, village_id, done, payload, now)
            result = {"order_id": order_id, "kind": kind, "target_level": 1, "cost": self.cost,
                      "spent_ms": int(row[0]), "started_ms": now, "done_ms": done}  # fmt: skip
            text = json.dumps(result)
            if key:
                await conn.execute(IDEMPOTENCY_SQL, row[1], key, "0" * 64, text, now)
        return text

    async def run_many(self, conn: asyncpg.Connection, asked: list[tuple[int, str]]) -> None:
        """Build a woodcutter in each (village, idempotency key) of ``asked``, in one
        statement committed by itself; a village that cannot pay gets nothing."""
        now = int(time.time() * 1000)
        first_event = self.next_event
        self.next_event += len(asked)
        asked = sorted(asked)  # rows locked in one order: two batches never deadlock
        villages, keys = [v for v, _ in asked], [k for _, k in asked]
        await conn.execute(
            self.builds, villages, now, *self.fixed, "woodcutter", now + 60_000, first_event, keys
        )


def _error(status: int, code: str, message: str) -> web.Response:
    body = json.dumps({"error": {"code": code, "message": message}})
    return web.Response(status=status, text=body, content_type="application/json")


async def serve_bare_commands(port: int) -> None:
    from bench.web.servers import _serve
    from webfront.main import tune_process

    dsn = os.environ["DATABASE_URL"].replace("postgresql+asyncpg://", "postgresql://")
    # the web tier's pool: 10 kept, up to 30 (db.engine's pool_size + max_overflow)
    pool = await asyncpg.create_pool(dsn, min_size=10, max_size=30)
    bare = BareBuild()

    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hello")

    async def build(request: web.Request) -> web.Response:
        if not request.headers.get("Authorization", "").startswith("Bearer "):
            return _error(401, "unauthorized", "log in first")
        key = request.headers.get("Idempotency-Key", "")
        try:
            body: dict[str, Any] = await request.json()
            village_id = int(body["village_id"])
            kind = str(body["kind"])
        except (ValueError, KeyError, TypeError):
            return _error(400, "invalid_body", "a JSON object with village_id and kind")
        async with pool.acquire() as conn:
            text = await bare.run(conn, village_id, kind, key)
        if text is None:
            raise web.HTTPConflict(
                text=json.dumps({"error": {"code": "insufficient_resources",
                                           "message": "not enough resources"}}),
                content_type="application/json",
            )  # fmt: skip
        return web.Response(text=text, content_type="application/json")

    app = web.Application()
    app.router.add_get("/hello", hello)
    app.router.add_post("/api/build", build)
    try:
        await _serve(app, port, tune_process)
    finally:
        await pool.close()
