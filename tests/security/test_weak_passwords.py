"""Common and guessable passwords, and the player's own name, are refused (finding 6)."""

from __future__ import annotations

import sqlalchemy as sa
from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from db.models import Player
from tests.web.conftest import PASSWORD


async def test_weak_passwords_are_refused_with_a_clear_422(
    client: TestClient, engine: AsyncEngine
) -> None:
    for name, password in [
        ("carol_sec", "12345678"),
        ("carol_sec", "aaaaaaaa"),
        ("carol_sec", "password1"),
        ("carol_sec", "carol_sec"),
        ("carol_sec", "CAROL_SEC"),
    ]:
        resp = await client.post("/api/register", json={"name": name, "password": password})
        assert resp.status == 422, password
        error = (await resp.json())["error"]
        assert error["code"] == "weak_password"
        assert "password" in error["message"] and password not in error["message"]
    async with engine.connect() as conn:
        assert (await conn.execute(sa.select(sa.func.count()).select_from(Player))).scalar() == 0
    resp = await client.post("/api/register", json={"name": "carol_sec", "password": PASSWORD})
    assert resp.status == 201
