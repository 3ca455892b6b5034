"""Helpers of refgame's HTTP tests: a refgame app on real Redis and the test's database
(``make_client``, for a module's ``client`` fixture), players registered through it, and
JSON calls with a player's token."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import func, select

from common.clock import ManualClock
from common.settings import Settings
from db.engine import create_engine
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app


async def make_client(aiohttp_client: Any, settings: Settings) -> Any:
    clock = ManualClock(1_750_000_000_000)
    game_settings = settings.model_copy(update={"game": "refgame", "map_radius": 8})
    return await aiohttp_client(create_app(game_settings, clock, config=replace(FAST_CONFIG)))


async def register(client: Any, name: str) -> dict[str, Any]:
    resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201, await resp.text()
    data = await resp.json()
    client.session.cookie_jar.clear()
    return {**data, "auth": {"Authorization": f"Bearer {data['token']}"}}


async def post(client: Any, who: dict[str, Any], path: str, body: Any) -> tuple[int, Any]:
    resp = await client.post(f"/api/{path}", json=body, headers=who["auth"])
    return resp.status, await resp.json()


async def get(client: Any, who: dict[str, Any], path: str, **query: Any) -> tuple[int, Any]:
    resp = await client.get(f"/api/{path}", params=query, headers=who["auth"])
    return resp.status, await resp.json()


async def snapshot(client: Any, who: dict[str, Any]) -> dict[str, Any]:
    resp = await client.get("/api/snapshot", headers=who["auth"])
    assert resp.status == 200, await resp.text()
    data: dict[str, Any] = await resp.json()
    return data


async def etag(client: Any, who: dict[str, Any]) -> str:
    resp = await client.get("/api/snapshot", headers=who["auth"])
    return str(resp.headers["ETag"])


async def changed_since(client: Any, who: dict[str, Any], tag: str) -> bool:
    """Whether the player's snapshot changed since ``tag`` (a 304 says it did not)."""
    resp = await client.get("/api/snapshot", headers={**who["auth"], "If-None-Match": tag})
    return bool(resp.status == 200)


async def count(settings: Settings, model: Any, *where: Any) -> int:
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            stmt = select(func.count()).select_from(model).where(*where)
            return int((await conn.execute(stmt)).scalar() or 0)
    finally:
        await engine.dispose()
