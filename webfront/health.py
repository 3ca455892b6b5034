"""Operator endpoints: ``GET /healthz`` (can this process reach Redis and the database?)
and ``GET /metrics`` (Prometheus; exposure rules in ``webfront.metrics``)."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from sqlalchemy import text

from webfront.errors import not_found
from webfront.metrics import may_read_metrics
from webfront.routing import Endpoint
from webfront.state import CLIENTS, CONFIG, ENGINE, METRICS, REDIS, SETTINGS
from webfront.validation import Out

_PROBE_TIMEOUT_S = 2.0


class HealthOut(Out):
    status: str
    redis: str
    db: str


async def _probe_redis(request: web.Request) -> str:
    try:
        await asyncio.wait_for(request.app[REDIS].ping(), _PROBE_TIMEOUT_S)
        return "ok"
    except Exception as exc:  # any failure means unhealthy; say which
        return f"error: {type(exc).__name__}"


async def _probe_db(request: web.Request) -> str:
    async def ping() -> None:
        async with request.app[ENGINE].connect() as conn:
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


async def metrics(request: web.Request) -> web.Response:
    token = request.app[CONFIG].metrics_token or request.app[SETTINGS].web_metrics_token
    if not may_read_metrics(request, token, request.app[CLIENTS]):
        raise not_found("route")
    return web.Response(
        body=request.app[METRICS].render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
    )


ENDPOINTS = [
    Endpoint(
        "GET",
        "/healthz",
        healthz,
        "Can this process reach Redis and the database? (503 if not)",
        "ops",
        auth=False,
        response=HealthOut,
        errors=(503,),
    ),
    Endpoint(
        "GET",
        "/metrics",
        metrics,
        "Prometheus metrics; loopback or Authorization: Bearer <metrics token> only, else 404",
        "ops",
        auth=False,
        media_type="text/plain",
        errors=(404,),
    ),
]
