"""The reference game's commands through the web tier: validation, auth, spending, events."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select, update

from common.amounts import to_fixed
from common.clock import ManualClock
from common.settings import Settings
from db.engine import create_engine
from db.models import ScheduledEvent, Village
from refgame.buildings import build_cost
from refgame.models import BuildOrder
from refgame.resources import STOCKS
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app


@pytest.fixture
async def client(aiohttp_client: Any, settings: Settings, redis: Redis) -> Any:
    clock = ManualClock(1_750_000_000_000)
    game_settings = settings.model_copy(update={"game": "refgame", "map_radius": 8})
    app = create_app(game_settings, clock, config=replace(FAST_CONFIG))
    return await aiohttp_client(app)


async def _register(client: Any, name: str) -> dict[str, Any]:
    resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201, await resp.text()
    data = await resp.json()
    client.session.cookie_jar.clear()
    return {**data, "auth": {"Authorization": f"Bearer {data['token']}"}}


async def _count(settings: Settings, model: Any) -> int:
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            return int((await conn.execute(select(func.count()).select_from(model))).scalar() or 0)
    finally:
        await engine.dispose()


async def test_build_spends_and_schedules_its_event(client: Any, settings: Settings) -> None:
    alice = await _register(client, "alice")
    resp = await client.post(
        "/api/build",
        json={"village_id": alice["village_id"], "kind": "woodcutter"},
        headers=alice["auth"],
    )
    assert resp.status == 200, await resp.text()
    order = await resp.json()
    assert order["target_level"] == 3 and order["cost"] == build_cost("woodcutter", 3).as_dict()
    assert await _count(settings, BuildOrder) == 1
    assert await _count(settings, ScheduledEvent) == 1
    snapshot = await (await client.get("/api/snapshot", headers=alice["auth"])).json()
    village = snapshot["villages"][0]
    assert village["build_queue"][0]["done_ms"] == order["done_ms"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"village_id": 1, "kind": "castle"}, 400, "unknown_building"),
        ({"village_id": 1, "kind": 7}, 422, None),
        ({"village_id": -1, "kind": "woodcutter"}, 422, None),
        ({"village_id": 1}, 422, None),
        ({"village_id": 1, "kind": "woodcutter", "extra": 1}, 422, None),
    ],
)
async def test_bad_build_requests_change_nothing(
    client: Any, settings: Settings, body: dict, status: int, code: str | None
) -> None:
    alice = await _register(client, "alice")
    body = {**body, "village_id": alice["village_id"]} if body.get("village_id") == 1 else body
    resp = await client.post("/api/build", json=body, headers=alice["auth"])
    assert resp.status == status, await resp.text()
    error = (await resp.json())["error"]
    assert error["message"]
    if code:
        assert error["code"] == code
    assert await _count(settings, BuildOrder) == 0


async def test_commands_on_another_players_village_are_refused(
    client: Any, settings: Settings
) -> None:
    alice, bob = await _register(client, "alice"), await _register(client, "bob")
    for path, body in [
        ("/api/build", {"village_id": bob["village_id"], "kind": "woodcutter"}),
        ("/api/train", {"village_id": bob["village_id"], "unit": "legionnaire", "count": 1}),
        ("/api/march", {"village_id": bob["village_id"], "kind": "attack", "x": 0, "y": 0,
                        "troops": {"legionnaire": 1}}),
        ("/api/recall", {"march_id": 12345}),
    ]:  # fmt: skip
        resp = await client.post(path, json=body, headers=alice["auth"])
        assert resp.status == 404, (path, await resp.text())
    assert await _count(settings, ScheduledEvent) == 0


async def test_fifty_concurrent_spends_never_spend_twice(client: Any, settings: Settings) -> None:
    alice = await _register(client, "alice")
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:  # exactly enough for 3 legionnaire orders of 2
            await conn.execute(
                update(STOCKS.table)
                .where(STOCKS.c.village_id == alice["village_id"])
                .values(
                    wood=to_fixed(720),
                    clay=to_fixed(600),
                    iron=to_fixed(900),
                    crop=to_fixed(180),
                    wood_rate=0,
                    clay_rate=0,
                    iron_rate=0,
                    crop_rate=0,
                )
            )
        body = {"village_id": alice["village_id"], "unit": "legionnaire", "count": 2}
        responses = await asyncio.gather(
            *(client.post("/api/train", json=body, headers=alice["auth"]) for _ in range(50))
        )
        statuses = sorted(r.status for r in responses)
        async with engine.connect() as conn:
            left = (
                await conn.execute(
                    select(STOCKS.table).where(STOCKS.c.village_id == alice["village_id"])
                )
            ).one()
    finally:
        await engine.dispose()
    assert statuses.count(200) == 3
    assert all(s == 409 for s in statuses if s != 200)
    assert (left.wood, left.clay, left.iron, left.crop) == (0, 0, 0, 0)


async def test_attack_and_recall_through_the_api(client: Any, settings: Settings) -> None:
    alice, bob = await _register(client, "alice"), await _register(client, "bob")
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            bob_xy = (
                await conn.execute(
                    select(Village.x, Village.y).where(Village.id == bob["village_id"])
                )
            ).one()
        async with engine.begin() as conn:  # human players start without troops; give alice some
            from sqlalchemy.ext.asyncio import AsyncSession

            from refgame.state import add_troops

            async with AsyncSession(conn) as session:
                await add_troops(
                    session, alice["village_id"], alice["village_id"], {"legionnaire": 5}
                )
                await session.flush()
    finally:
        await engine.dispose()
    body = {"village_id": alice["village_id"], "kind": "attack", "x": bob_xy[0], "y": bob_xy[1],
            "troops": {"legionnaire": 5}}  # fmt: skip
    resp = await client.post(
        "/api/march", json=body, headers={**alice["auth"], "Idempotency-Key": "m1"}
    )
    assert resp.status == 200, await resp.text()
    march = await resp.json()
    again = await client.post(
        "/api/march", json=body, headers={**alice["auth"], "Idempotency-Key": "m1"}
    )
    assert again.status == 200 and (await again.json())["march_id"] == march["march_id"]
    assert await _count(settings, ScheduledEvent) == 1  # the replay spent nothing
    bob_view = await (await client.get("/api/snapshot", headers=bob["auth"])).json()
    assert bob_view["villages"][0]["marches_in"][0]["arrive_ms"] == march["arrive_ms"]
    resp = await client.post(
        "/api/recall", json={"march_id": march["march_id"]}, headers=alice["auth"]
    )
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["kind"] == "return"
    resp = await client.post(
        "/api/recall", json={"march_id": march["march_id"]}, headers=alice["auth"]
    )
    assert resp.status == 409 and (await resp.json())["error"]["code"] == "not_recallable"
    alice_view = await (await client.get("/api/snapshot", headers=alice["auth"])).json()
    coming_home = alice_view["villages"][0]["marches_in"]
    assert [m["kind"] for m in coming_home] == ["return"]
    assert coming_home[0]["troops"] == {"legionnaire": 5}
    assert alice_view["villages"][0]["marches_out"] == []
    bob_view = await (await client.get("/api/snapshot", headers=bob["auth"])).json()
    assert bob_view["villages"][0]["marches_in"] == []  # troops leaving are not shown to bob
