"""``GET /healthz``: is this web process able to reach Redis and the database?"""

from __future__ import annotations

import asyncio

from aiohttp import web
from sqlalchemy import text

from webfront import app as app_keys

_PROBE_TIMEOUT_S = 2.0


async def _probe_redis(request: web.Request) -> str:
    try:
        await asyncio.wait_for(request.app[app_keys.REDIS].ping(), _PROBE_TIMEOUT_S)
        return "ok"
    except Exception as exc:  # any failure means unhealthy; say which
        return f"error: {type(exc).__name__}"


async def _probe_db(request: web.Request) -> str:
    async def ping() -> None:
        async with request.app[app_keys.ENGINE].connect() as conn:
            await conn.execute(text("SELECT 1"))

    try:
        await asyncio.wait_for(ping(), _PROBE_TIMEOUT_S)
        return "ok"
    except Exception as exc:
        return f"error: {type(exc).__name__}"


async def healthz(request: web.Request) -> web.Response:
    redis, db = await asyncio.gather(_probe_redis(request), _probe_db(request))
    healthy = redis == "ok" and db == "ok"
    return web.json_response(
        {"status": "ok" if healthy else "degraded", "redis": redis, "db": db},
        status=200 if healthy else 503,
    )
