"""The space game through the real tiers: web commands -> Redis queue -> task server -> DB.

Register, build a mine, an attack from the command to both battle reports and the
fleet home with its loot, a recalled transport, and the rule refusals' error shape;
once on SQLite and once on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from common.clock import SYSTEM_CLOCK
from common.settings import Settings
from db.engine import create_engine
from examples.spacegame import admin, state
from examples.spacegame.battle import Side, fight
from examples.spacegame.models import Fleet, Report, Ships
from gameapi import to_fixed
from gameserver.main import game_registry
from gameserver.taskserver import TaskServer
from tests.queue.conftest import eventually
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app

pytestmark = pytest.mark.slow


@dataclass
class World:
    client: Any
    engine: AsyncEngine
    server: asyncio.Task[None]
    players: dict[str, dict[str, Any]]

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.players[name]['token']}"}

    async def post(self, name: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        resp = await self.client.post(f"/api/{path}", json=body, headers=self.auth(name))
        return resp.status, await resp.json()

    async def snapshot(self, name: str) -> dict[str, Any]:
        resp = await self.client.get("/api/snapshot", headers=self.auth(name))
        assert resp.status == 200, await resp.text()
        planets: list[dict[str, Any]] = (await resp.json())["villages"]
        assert len(planets) == 1
        return planets[0]

    async def until(self, check: Any, timeout_s: float = 60) -> None:
        await eventually(check, timeout_s, alive=[self.server])


@pytest.fixture
async def world(
    aiohttp_client: Any, space_settings: Settings, redis: Redis
) -> AsyncIterator[World]:
    client = await aiohttp_client(
        create_app(space_settings, SYSTEM_CLOCK, config=replace(FAST_CONFIG))
    )
    players = {}
    for name in ("alice", "bob"):
        resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
        assert resp.status == 201, await resp.text()
        players[name] = await resp.json()
        client.session.cookie_jar.clear()
    engine = create_engine(space_settings)
    server = TaskServer(space_settings, game_registry(space_settings))
    running = asyncio.create_task(server.run(), name="task server")
    try:
        yield World(client, engine, running, players)
    finally:
        # stopped as an operator stops it: a cancel that landed while it was still starting
        # was seen lost (it then served on, and the test never ended)
        server.stop()
        await running
        await engine.dispose()


async def test_a_new_planet_and_a_mine(world: World) -> None:
    planet = await world.snapshot("alice")
    assert planet["buildings"]["metal_mine"] == 0
    assert set(planet["ships"]) == {"small_cargo", "light_fighter", "heavy_fighter", "cruiser"}
    assert planet["stocks"]["metal"]["rate_per_hour"] == 30 * 200
    assert planet["stocks"]["deuterium"]["cap"] == 10_000
    assert -40 <= planet["temperature"] <= 80

    pid = world.players["alice"]["village_id"]
    status, body = await world.post(
        "alice", "sg/build", {"planet_id": pid, "building": "metal_mine"}
    )
    assert status == 200, body
    assert body["item"] == "metal_mine" and body["amount"] == 1
    status, busy = await world.post(
        "alice", "sg/build", {"planet_id": pid, "building": "crystal_mine"}
    )
    assert status == 409 and busy["error"]["code"] == "queue_busy"
    assert (await world.snapshot("alice"))["orders"][0]["item"] == "metal_mine"

    async def built() -> bool:
        return (await world.snapshot("alice"))["buildings"]["metal_mine"] == 1

    await world.until(built)
    planet = await world.snapshot("alice")
    assert planet["orders"] == []
    assert planet["stocks"]["metal"]["rate_per_hour"] == (30 + 33) * 200


async def test_rule_refusals_answer_the_error_shape(world: World) -> None:
    pid = world.players["alice"]["village_id"]
    bob = world.players["bob"]["village_id"]
    cases = [
        ("sg/build", {"planet_id": pid, "building": "barracks"}, 400, "unknown_name"),
        ("sg/build", {"planet_id": bob, "building": "metal_mine"}, 404, "village_not_found"),
        ("sg/shipyard", {"planet_id": pid, "ship": "cruiser", "count": 1}, 409,
         "requirement_missing"),
        ("sg/research", {"planet_id": pid, "research": "weapons_tech"}, 409,
         "requirement_missing"),
        ("sg/fleet/send", {"planet_id": pid, "target_id": bob, "mission": "attack",
                           "ships": {"light_fighter": 1}}, 409, "not_enough"),
        ("sg/fleet/send", {"planet_id": pid, "target_id": pid, "mission": "transport",
                           "ships": {"small_cargo": 1}}, 400, "invalid_fleet"),
        ("sg/fleet/recall", {"fleet_id": 12345}, 404, "unknown_target"),
    ]  # fmt: skip
    for path, body, status, code in cases:
        got, answer = await world.post("alice", path, body)
        assert (got, answer["error"]["code"]) == (status, code), (path, answer)
        assert set(answer["error"]) <= {"code", "message", "details"}
    got, answer = await world.post("alice", "sg/build", {"planet_id": pid, "building": 3})
    assert got == 422  # the body model refuses it before the game sees it


async def _give_ships(world: World, name: str, ships: dict[str, int]) -> None:
    """Ships (and deuterium for their fuel: a new planet has none) straight into the DB."""
    pid = world.players[name]["village_id"]
    async with world.engine.begin() as conn:
        fuel = {"deuterium": to_fixed(2_000)}
        await state.stocks().deposit(conn, pid, fuel, SYSTEM_CLOCK.now_ms())
        for ship, count in ships.items():
            await conn.execute(
                update(Ships).where(Ships.place_id == pid, Ships.name == ship).values(count=count)
            )


async def _reports(world: World, name: str) -> list[dict[str, Any]]:
    resp = await world.client.get("/api/sg/reports", headers=world.auth(name))
    assert resp.status == 200, await resp.text()
    reports: list[dict[str, Any]] = (await resp.json())["reports"]
    return reports


async def test_attack_from_command_to_reports_and_loot_home(world: World) -> None:
    alice, bob = world.players["alice"]["village_id"], world.players["bob"]["village_id"]
    await _give_ships(world, "alice", {"light_fighter": 10, "small_cargo": 1})
    await _give_ships(world, "bob", {"small_cargo": 1})
    send = {"planet_id": alice, "target_id": bob, "mission": "attack",
            "ships": {"light_fighter": 10, "small_cargo": 1}}  # fmt: skip
    status, sent = await world.post("alice", "sg/fleet/send", send)
    assert status == 200, sent
    assert sent["fuel"] >= 1
    mine = await world.snapshot("alice")
    assert mine["ships"]["light_fighter"] == 0 and mine["fleets"][0]["state"] == "out"
    incoming = (await world.snapshot("bob"))["incoming"]
    assert incoming == [
        {"id": sent["fleet_id"], "origin_id": alice, "mission": "attack",
         "arrive_ms": sent["arrive_ms"]}
    ]  # fmt: skip

    async def reported() -> bool:
        return bool(await _reports(world, "bob"))

    await world.until(reported)
    report = (await _reports(world, "alice"))[0]
    assert report["kind"] == "battle"
    assert (await _reports(world, "bob"))[0]["body"] == report["body"]
    battle = report["body"]
    replay = fight(Side.from_dict(battle["attacker"]), Side.from_dict(battle["defender"]),
                   battle["seed"])  # fmt: skip
    async with AsyncSession(world.engine) as session:
        ids = (await session.execute(select(Report.id))).scalars().all()
        for report_id in ids:  # the console's replay: both sides' copies fight again alike
            assert (await admin.replay_report(session, report_id) or {})["equal"] is True
    assert replay.winner == battle["winner"] == "attacker"
    assert replay.losses(Side.from_dict(battle["defender"]), replay.defender_left) == {
        "small_cargo": 1
    }
    loot = battle["loot"]
    assert loot["metal"] > 0 and loot["crystal"] > 0
    assert (await world.snapshot("bob"))["ships"]["small_cargo"] == 0
    survivors = replay.attacker_left

    async def home() -> bool:
        async with world.engine.connect() as conn:
            left = await conn.execute(select(Fleet.id).where(Fleet.id == sent["fleet_id"]))
            return left.first() is None

    await world.until(home)
    planet = await world.snapshot("alice")
    assert {k: v for k, v in planet["ships"].items() if v} == survivors
    assert planet["fleets"] == []
    assert planet["stocks"]["metal"]["units"] >= loot["metal"]


async def test_a_recalled_transport_comes_home_with_its_cargo(world: World) -> None:
    alice, bob = world.players["alice"]["village_id"], world.players["bob"]["village_id"]
    await _give_ships(world, "alice", {"small_cargo": 2})
    send = {"planet_id": alice, "target_id": bob, "mission": "transport", "speed_pct": 10,
            "ships": {"small_cargo": 2}, "cargo": {"metal": 300}}  # fmt: skip
    status, sent = await world.post("alice", "sg/fleet/send", send)
    assert status == 200, sent
    assert (await world.snapshot("alice"))["stocks"]["metal"]["units"] < 300
    status, back = await world.post("alice", "sg/fleet/recall", {"fleet_id": sent["fleet_id"]})
    assert status == 200, back
    assert back["arrive_ms"] < sent["arrive_ms"]
    status, again = await world.post("alice", "sg/fleet/recall", {"fleet_id": sent["fleet_id"]})
    assert status == 409 and again["error"]["code"] == "not_recallable"

    async def home() -> bool:
        return (await world.snapshot("alice"))["ships"]["small_cargo"] == 2

    await world.until(home)
    assert await _reports(world, "bob") == []  # it never arrived
    assert (await world.snapshot("alice"))["stocks"]["metal"]["units"] >= 300
