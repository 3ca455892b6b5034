"""Trade: the rules, the command and its events (GameDriver), and the whole path through the
web tier, the Redis queue and the task server, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from common.amounts import SCALE, accrue, to_fixed
from common.clock import ManualClock
from common.queue.handlers import HandlerRegistry
from common.settings import Settings, load_settings
from db.engine import create_engine
from db.models import ScheduledEvent, Village
from db.worldgen import generate_world
from gameapi import load_game
from gameapi.testing import GameDriver
from gameserver import builtin
from gameserver.config import TaskServerConfig
from gameserver.taskserver import TaskServer
from refgame import world
from refgame.errors import (
    InsufficientMerchants,
    InsufficientResources,
    InvalidQuantity,
    InvalidTrade,
    NotYourVillage,
    PrerequisiteMissing,
    RuleError,
)
from refgame.market import send_resources
from refgame.models import Building, Report, Trade
from refgame.resources import RESOURCES, STOCKS
from refgame.trade import (
    MERCHANT_CAPACITY,
    merchants_needed,
    merchants_total,
    plan_trade,
    split_delivery,
    trade_duration_ms,
)
from refgame.travel import travel_ms
from tests.web.conftest import FAST_CONFIG, PASSWORD
from webfront.app import create_app

T0 = 1_750_000_000_000

# ---- the rules


def test_merchants_follow_the_marketplace_level_and_carry_a_fixed_load() -> None:
    assert [merchants_total(level) for level in (0, 1, 5)] == [0, 1, 5]
    assert merchants_needed({"wood": 1}) == 1
    assert merchants_needed({"wood": MERCHANT_CAPACITY}) == 1
    assert merchants_needed({"wood": MERCHANT_CAPACITY, "crop": 1}) == 2


def test_merchants_walk_at_their_speed_on_the_map_distance() -> None:
    assert trade_duration_ms((0, 0), (3, 4), 1.0) == travel_ms(25, 16, 1.0) == 1_125_000
    assert trade_duration_ms((0, 0), (3, 4), 2.0) == 562_500


def test_plan_refuses_what_the_rules_forbid() -> None:
    plan = plan_trade({"wood": 600, "clay": 0}, (0, 0), (3, 4), 2, 0, T0, 1.0)
    assert plan.resources == {"wood": 600} and plan.merchants == 2
    assert (plan.arrive_ms, plan.return_ms) == (T0 + 1_125_000, T0 + 2_250_000)
    with pytest.raises(InsufficientMerchants) as refused:
        plan_trade({"wood": 600}, (0, 0), (3, 4), 2, 1, T0, 1.0)
    assert refused.value.details == {"needed": 2, "free": 1, "total": 2}
    for amounts in ({}, {"wood": 0}, {"wood": -1}, {"wood": True}, {"wood": 1.0}, {"gold": 1}):
        with pytest.raises(InvalidQuantity):
            plan_trade(amounts, (0, 0), (3, 4), 2, 0, T0, 1.0)
    with pytest.raises(InvalidTrade):
        plan_trade({"wood": 1}, (1, 1), (1, 1), 2, 0, T0, 1.0)
    with pytest.raises(PrerequisiteMissing):
        plan_trade({"wood": 1}, (0, 0), (3, 4), 0, 0, T0, 1.0)


def test_what_does_not_fit_is_lost() -> None:
    space = {"wood": 10 * SCALE + SCALE - 1, "clay": 0, "iron": -5, "crop": 10**9 * SCALE}
    delivered, lost = split_delivery({"wood": 30, "clay": 5, "crop": 7}, space)
    assert delivered == {"wood": 10, "clay": 0, "iron": 0, "crop": 7}
    assert lost == {"wood": 20, "clay": 5, "iron": 0, "crop": 0}


# ---- the command and its events, in process


@pytest.fixture
async def game(engine: AsyncEngine) -> GameDriver:
    return await _game(engine)


async def _game(engine: AsyncEngine) -> GameDriver:
    clock = ManualClock(T0)
    await generate_world(
        engine, stocks=STOCKS, players=3, template=world.village_template(1.0), shards=4,
        map_radius=6, seed=3, clock=clock,
    )  # fmt: skip
    return GameDriver(load_game("refgame"), engine, clock)


async def _villages(game: GameDriver) -> list[Any]:
    async with game.sessions() as session:
        rows = await session.execute(
            select(Village.id, Village.player_id, Village.x, Village.y).order_by(Village.id)
        )
        return list(rows.all())


async def _stock(game: GameDriver, village_id: int) -> dict[str, int]:
    async with game.sessions() as session:
        row = await session.execute(select(STOCKS.table).where(STOCKS.c.village_id == village_id))
        return dict(row.one()._mapping)


def _at(row: dict[str, int], t: int) -> dict[str, int]:
    return {
        r: accrue(row[r], row[f"{r}_rate"], t - row["updated_ms"],
                  row["granary_cap" if r == "crop" else "warehouse_cap"])
        for r in RESOURCES
    }  # fmt: skip


async def _count(game: GameDriver, model: Any) -> int:
    async with game.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def _marketplace(game: GameDriver, village_id: int, level: int) -> None:
    async with game.sessions() as session, session.begin():
        await session.execute(
            update(Building).where(Building.village_id == village_id,
                                   Building.kind == "marketplace").values(level=level)
        )  # fmt: skip


async def test_send_arrive_and_return(game: GameDriver) -> None:
    a, b, _ = await _villages(game)
    before_a, before_b = await _stock(game, a.id), await _stock(game, b.id)
    sent = {"wood": 100, "iron": 20}
    answer = await game.command(send_resources, a.player_id, a.id, (b.x, b.y), sent)
    duration = trade_duration_ms((a.x, a.y), (b.x, b.y), 1.0)
    assert answer["arrive_ms"] == T0 + duration and answer["return_ms"] == T0 + 2 * duration
    assert answer["merchants"] == 1 and answer["spent_ms"] == T0
    spent = await _stock(game, a.id)
    expected = _at(before_a, T0)
    assert {r: spent[r] for r in RESOURCES} == {
        r: expected[r] - to_fixed(sent.get(r, 0)) for r in RESOURCES
    }
    with pytest.raises(InsufficientMerchants):  # the only merchant is away
        await game.command(send_resources, a.player_id, a.id, b.id, {"clay": 1})

    await game.run_until(answer["arrive_ms"])
    got = await _stock(game, b.id)
    want = _at(before_b, answer["arrive_ms"])
    assert {r: got[r] for r in RESOURCES} == {
        r: want[r] + to_fixed(sent.get(r, 0)) for r in RESOURCES
    }
    assert got["updated_ms"] == answer["arrive_ms"]
    async with game.sessions() as session:
        trade = await session.get(Trade, answer["trade_id"])
        reports = (await session.execute(select(Report.player_id, Report.body))).all()
    assert trade is not None and trade.homebound and trade.lost == dict.fromkeys(RESOURCES, 0)
    assert sorted(p for p, _ in reports) == sorted([a.player_id, b.player_id])
    assert all(body["delivered"] == {**dict.fromkeys(RESOURCES, 0), **sent}
               for _, body in reports)  # fmt: skip
    with pytest.raises(InsufficientMerchants):  # still on the way home
        await game.command(send_resources, a.player_id, a.id, b.id, {"clay": 1})

    await game.run_until(answer["return_ms"])
    assert ("trade_return", a.id, answer["return_ms"]) in game.events_run
    assert await _count(game, Trade) == 0
    again = await game.command(send_resources, a.player_id, a.id, b.id, {"clay": 1})
    assert again["merchants"] == 1


@pytest.mark.parametrize(
    ("target", "amounts", "error"),
    [
        ("self", {"wood": 1}, InvalidTrade),
        ((99, 99), {"wood": 1}, InvalidTrade),
        (10**9, {"wood": 1}, InvalidTrade),
        ("other", {"wood": 0}, InvalidQuantity),
        ("other", {"wood": 751}, InsufficientResources),
        ("other", {"wood": 400, "clay": 200, "iron": 500}, InsufficientMerchants),
    ],
)
async def test_refusals_change_nothing(
    game: GameDriver, target: Any, amounts: dict[str, int], error: type[RuleError]
) -> None:
    a, b, _ = await _villages(game)
    await _marketplace(game, a.id, 2)
    where = {"self": a.id, "other": b.id}.get(target, target) if isinstance(target, str) else target
    before = await _stock(game, a.id)
    with pytest.raises(error) as refused:
        await game.command(send_resources, a.player_id, a.id, where, amounts)
    if error is InsufficientResources:
        assert refused.value.details["missing"] == {"wood": 1}
    assert await _stock(game, a.id) == before
    assert await _count(game, Trade) == 0 and await _count(game, ScheduledEvent) == 0
    with pytest.raises(NotYourVillage):  # another player's village sends nothing
        await game.command(send_resources, b.player_id, a.id, b.id, {"wood": 1})


async def test_a_full_warehouse_takes_what_fits_and_the_rest_is_lost(game: GameDriver) -> None:
    a, b, _ = await _villages(game)
    await _marketplace(game, a.id, 3)
    sent = {"wood": 500, "crop": 700}
    answer = await game.command(send_resources, a.player_id, a.id, b.id, sent)
    assert answer["merchants"] == 3
    before_b = await _stock(game, b.id)
    await game.run_until(answer["arrive_ms"])
    at_arrival = _at(before_b, answer["arrive_ms"])
    room = {r: (before_b["granary_cap" if r == "crop" else "warehouse_cap"] - at_arrival[r])
            // SCALE for r in RESOURCES}  # fmt: skip
    delivered = {r: min(sent.get(r, 0), room[r]) for r in RESOURCES}
    lost = {r: sent.get(r, 0) - delivered[r] for r in RESOURCES}
    assert lost["wood"] > 0 and lost["crop"] > 0  # 750 of 800 were there already
    got = await _stock(game, b.id)
    assert {r: got[r] for r in RESOURCES} == {
        r: at_arrival[r] + to_fixed(delivered[r]) for r in RESOURCES
    }
    async with game.sessions() as session:
        bodies = (await session.execute(select(Report.body))).scalars().all()
    assert len(bodies) == 2
    for body in bodies:
        assert body["delivered"] == delivered and body["lost"] == lost
        assert {r: body["delivered"][r] + body["lost"][r] for r in RESOURCES} == {
            r: sent.get(r, 0) for r in RESOURCES
        }


async def test_concurrent_sends_never_share_a_merchant(postgres_url: str) -> None:
    """Two sends racing for one village's only merchant (resources enough for both): the
    marketplace row lock makes the second count the first's merchant."""
    engine = create_engine(load_settings(database_url=postgres_url))
    try:
        game = await _game(engine)
        a, b, c = await _villages(game)
        for _ in range(5):
            sends = [
                game.command(send_resources, a.player_id, a.id, to.id, {"wood": 10})
                for to in (b, c)
            ]
            results = await asyncio.gather(*sends, return_exceptions=True)
            sent = [r for r in results if isinstance(r, dict)]
            refused = [r for r in results if isinstance(r, InsufficientMerchants)]
            assert (len(sent), len(refused)) == (1, 1), results
            await game.run_until(sent[0]["return_ms"])
        assert await _count(game, Trade) == 0
    finally:
        await engine.dispose()


# ---- through the web tier, the Redis queue and the task server

TASKS = TaskServerConfig(
    partition_lease_ttl_ms=1_000, partition_heartbeat_ms=100, marker_check_ms=100,
    stats_every_s=0.1, max_idle_ms=60_000,
)  # fmt: skip


async def _player(client: Any, name: str) -> dict[str, Any]:
    resp = await client.post("/api/register", json={"name": name, "password": PASSWORD})
    assert resp.status == 201, await resp.text()
    data = await resp.json()
    client.session.cookie_jar.clear()
    return {**data, "auth": {"Authorization": f"Bearer {data['token']}"}}


async def _row(settings: Settings, village_id: int) -> dict[str, int]:
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            row = await conn.execute(select(STOCKS.table).where(STOCKS.c.village_id == village_id))
            return dict(row.one()._mapping)
    finally:
        await engine.dispose()


async def _village(client: Any, player: dict[str, Any]) -> dict[str, Any]:
    resp = await client.get("/api/snapshot", headers=player["auth"])
    assert resp.status == 200
    village: dict[str, Any] = (await resp.json())["villages"][0]
    return village


async def _burst(settings: Settings, clock: ManualClock) -> None:
    """Run everything due at the clock's time with a real task server, then stop."""
    registry = HandlerRegistry()
    builtin.register(registry)
    world.register_handlers(registry, settings)
    await TaskServer(settings, registry, clock, config=TASKS, burst=True).run()


@pytest.fixture
def web(settings: Settings) -> tuple[Settings, ManualClock]:
    return settings.model_copy(update={"game": "refgame", "map_radius": 8}), ManualClock(T0)


@pytest.mark.slow
@pytest.mark.parametrize("late_ms", [0, 7_200_000], ids=["on_time", "late"])
async def test_trade_through_the_tiers(
    aiohttp_client: Any, web: tuple[Settings, ManualClock], redis: Redis, late_ms: int
) -> None:
    settings, clock = web
    client = await aiohttp_client(create_app(settings, clock, config=replace(FAST_CONFIG)))
    alice, bob = await _player(client, "alice"), await _player(client, "bob")
    here, there = await _village(client, alice), await _village(client, bob)
    assert (here["merchants_free"], here["merchants_total"]) == (1, 1)
    sent = {"wood": 120, "clay": 0, "iron": 30, "crop": 0}
    body = {"village_id": alice["village_id"], "x": there["x"], "y": there["y"], "resources": sent}
    bob_before = await _row(settings, bob["village_id"])
    resp = await client.post("/api/send_resources", json=body, headers=alice["auth"])
    assert resp.status == 200, await resp.text()
    trade = await resp.json()
    assert trade["resources"] == sent and trade["merchants"] == 1
    assert trade["target_village_id"] == bob["village_id"]

    here, there = await _village(client, alice), await _village(client, bob)
    assert here["merchants_free"] == 0
    assert [t["id"] for t in here["trades_out"]] == [trade["trade_id"]]
    incoming = there["trades_in"]
    assert [(t["id"], t["arrive_ms"], t["resources"]) for t in incoming] == [
        (trade["trade_id"], trade["arrive_ms"], {"wood": 120, "iron": 30})
    ]
    # a refusal through the web: no merchant left; nothing changes
    before = await _row(settings, alice["village_id"])
    resp = await client.post("/api/send_resources", json=body, headers=alice["auth"])
    assert resp.status == 409
    assert (await resp.json())["error"]["code"] == "insufficient_merchants"
    assert await _row(settings, alice["village_id"]) == before

    # the arrival runs at its due time, or long after it: it credits at its due time
    await clock.set(trade["arrive_ms"] + late_ms)
    await _burst(settings, clock)
    got = await _row(settings, bob["village_id"])
    want = _at(bob_before, trade["arrive_ms"])
    want = {r: want[r] + to_fixed(sent[r]) for r in RESOURCES}
    assert {r: _at(got, clock.now_ms())[r] for r in RESOURCES} == {
        r: _at({**bob_before, **want, "updated_ms": trade["arrive_ms"]}, clock.now_ms())[r]
        for r in RESOURCES
    }
    if late_ms:  # the return, made by the arrival, is overdue too: the next burst runs it
        await _burst(settings, clock)
    here = await _village(client, alice)
    if late_ms:
        assert here["merchants_free"] == 1 and here["trades_out"] == []
    else:
        assert here["merchants_free"] == 0 and here["trades_out"][0]["returning"]
        assert (await _village(client, bob))["trades_in"] == []
        await clock.set(trade["return_ms"])
        await _burst(settings, clock)
        assert (await _village(client, alice))["merchants_free"] == 1
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            kinds = (await conn.execute(select(Report.player_id, Report.body))).all()
            pending = await conn.scalar(select(func.count()).select_from(ScheduledEvent))
    finally:
        await engine.dispose()
    assert sorted(p for p, _ in kinds) == sorted([alice["player_id"], bob["player_id"]])
    assert kinds[0].body["time_ms"] == trade["arrive_ms"] and pending == 0


@pytest.mark.parametrize(
    "body",
    [
        {"resources": {"wood": 1}},  # no target
        {"x": 1, "resources": {"wood": 1}},  # half a coordinate
        {"target_village_id": 1, "x": 1, "y": 1, "resources": {"wood": 1}},  # two targets
        {"target_village_id": 1, "resources": {"wood": -1}},
        {"target_village_id": 1, "resources": {"wood": 1.5}},
        {"target_village_id": 1, "resources": {"wood": "3"}},
        {"target_village_id": 1, "resources": {"gold": 3}},
        {"target_village_id": 1, "resources": {"wood": 1}, "extra": 1},
    ],
)
async def test_bad_send_requests_change_nothing(
    aiohttp_client: Any, web: tuple[Settings, ManualClock], redis: Redis, body: dict[str, Any]
) -> None:
    settings, clock = web
    client = await aiohttp_client(create_app(settings, clock, config=replace(FAST_CONFIG)))
    alice = await _player(client, "alice")
    before = await _row(settings, alice["village_id"])
    resp = await client.post(
        "/api/send_resources", json={"village_id": alice["village_id"], **body},
        headers=alice["auth"],
    )  # fmt: skip
    assert resp.status == 422, await resp.text()
    assert set((await resp.json())["error"]) >= {"code", "message"}
    assert await _row(settings, alice["village_id"]) == before
