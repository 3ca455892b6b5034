"""``create_app(settings)``: the aiohttp application and its resources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import SYSTEM_CLOCK, Clock
from common.redis_conn import create_redis
from common.settings import Settings
from db.engine import create_engine
from webfront import health

STATIC_DIR = Path(__file__).with_name("static")

SETTINGS = web.AppKey("settings", Settings)
CLOCK = web.AppKey("clock", Clock)  # type: ignore[type-abstract]
ENGINE = web.AppKey("engine", AsyncEngine)
REDIS = web.AppKey("redis", Redis)


async def _resources(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    app[ENGINE] = create_engine(settings)
    app[REDIS] = create_redis(settings)  # type: ignore[assignment]
    yield
    await app[REDIS].aclose()
    await app[ENGINE].dispose()


async def index(_request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "index.html")


def create_app(settings: Settings, clock: Clock = SYSTEM_CLOCK) -> web.Application:
    app = web.Application(client_max_size=64 * 1024)
    app[SETTINGS] = settings
    app[CLOCK] = clock
    app.cleanup_ctx.append(_resources)
    app.router.add_get("/healthz", health.healthz)
    app.router.add_get("/", index)
    app.router.add_static("/static/", STATIC_DIR)
    return app
