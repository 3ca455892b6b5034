"""Look-alike names collide (issue 14, finding 2): a UTS #39 confusable skeleton after
case folding, kept unique in ``players.name_key``, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa
from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from common.names import name_key
from common.settings import Settings
from db.migrate import downgrade, upgrade
from db.models import Player
from tests.web.conftest import PASSWORD

LOOK_ALIKES = {
    "alice_sec": ["Alice_sec", "ALICE_SEC", "\u0430lice_sec"],  # Cyrillic а
    "bob_sec": ["b\u03bfb_sec", "B0B_SEC"],  # Greek ο, a zero
    "mary": ["rnary", "MARY"],
}


def test_keys_fold_case_and_confusables() -> None:
    for original, others in LOOK_ALIKES.items():
        assert {name_key(n) for n in others} == {name_key(original)}, original
    assert name_key("alice_sec") != name_key("alice_sek")
    assert name_key("Zoë") != name_key("Zoe")  # a real letter is not a look-alike of another


async def test_look_alike_names_cannot_register(client: TestClient, engine: AsyncEngine) -> None:
    for original, others in LOOK_ALIKES.items():
        resp = await client.post("/api/register", json={"name": original, "password": PASSWORD})
        assert resp.status == 201, await resp.text()
        for other in others:
            resp = await client.post("/api/register", json={"name": other, "password": PASSWORD})
            assert resp.status == 409, other
            assert (await resp.json())["error"]["code"] == "name_taken"
    async with engine.connect() as conn:
        names = set((await conn.execute(sa.select(Player.name))).scalars())
    assert names == set(LOOK_ALIKES)


async def test_a_login_finds_the_account_by_its_key(client: TestClient) -> None:
    resp = await client.post("/api/register", json={"name": "alice_sec", "password": PASSWORD})
    player_id = (await resp.json())["player_id"]
    for spelling in ("ALICE_SEC", "\u0430lice_sec"):
        resp = await client.post("/api/login", json={"name": spelling, "password": PASSWORD})
        assert resp.status == 200
        body = await resp.json()
        assert (body["player_id"], body["name"]) == (player_id, "alice_sec")


async def test_the_migration_backfills_keys_and_keeps_older_look_alikes(
    settings: Settings, engine: AsyncEngine
) -> None:
    """Players who registered look-alike names before keys existed both keep their account."""
    await downgrade(engine, settings, "0003")
    players = sa.table(
        "players",
        sa.column("id", sa.BigInteger),
        sa.column("name"),
        sa.column("password_hash"),
        sa.column("created_ms", sa.BigInteger),
        sa.column("is_bot", sa.Boolean),
    )
    async with engine.begin() as conn:
        await conn.execute(
            players.insert(),
            [
                {"id": i, "name": n, "password_hash": "!", "created_ms": 0, "is_bot": False}
                for i, n in enumerate(["alice_sec", "ALICE_SEC", "bob_sec"], start=1)
            ],
        )
    await upgrade(engine, settings)
    async with engine.connect() as conn:
        rows = {i: k for i, k in await conn.execute(sa.select(Player.id, Player.name_key))}
    assert rows == {1: "alice_sec", 2: "alice_sec#2", 3: "bob_sec"}
