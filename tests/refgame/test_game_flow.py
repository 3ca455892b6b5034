"""The reference game against a real database: commands, event handlers, exact stocks."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, func, select, update

from common.amounts import accrue, to_fixed
from common.clock import ManualClock
from db.models import ScheduledEvent, Village
from db.worldgen import generate_world
from gameapi import load_game
from gameapi.testing import GameDriver
from refgame import commands
from refgame.battle import verify_report
from refgame.buildings import build_cost
from refgame.economy import field_production, stock_at
from refgame.errors import InsufficientResources, InsufficientTroops, NotRecallable, NotYourVillage
from refgame.models import Building, March, Report, Troop
from refgame.resources import STOCKS
from refgame.units import total_upkeep
from refgame.world import village_template

T0 = 1_750_000_000_000
HOUR = 3_600_000


@pytest.fixture
async def game(engine) -> GameDriver:
    clock = ManualClock(T0)
    await generate_world(
        engine,
        stocks=STOCKS,
        players=3,
        template=village_template(1.0),
        shards=4,
        map_radius=6,
        seed=3,
        clock=clock,
    )
    return GameDriver(load_game("refgame"), engine, clock)


async def _stock(game: GameDriver, village_id: int) -> dict:
    async with game.sessions() as session:
        row = await session.execute(select(STOCKS.table).where(STOCKS.c.village_id == village_id))
        return dict(row.one()._mapping)


async def _troops(game: GameDriver, village_id: int, home: int | None = None) -> dict[str, int]:
    async with game.sessions() as session:
        rows = await session.execute(
            select(Troop.unit, Troop.count).where(
                Troop.village_id == village_id, Troop.home_village_id == (home or village_id)
            )
        )
        return {u: n for u, n in rows if n}


async def _xy(game: GameDriver, village_id: int) -> tuple[int, int]:
    async with game.sessions() as session:
        row = await session.execute(select(Village.x, Village.y).where(Village.id == village_id))
        x, y = row.one()
        return x, y


async def test_build_spends_then_raises_production_at_its_due_time(game: GameDriver) -> None:
    await game.clock.advance(10_000)
    order = await game.command(commands.build, 1, 1, "woodcutter")
    cost = build_cost("woodcutter", 3)
    assert order["target_level"] == 3 and order["cost"] == cost.as_dict()
    before = await _stock(game, 1)
    assert before["wood"] == to_fixed(750) + 45 * 10_000 - to_fixed(cost.wood)

    await game.run_until(order["done_ms"] + HOUR)
    async with game.sessions() as session:
        level = (
            await session.execute(
                select(Building.level).where(
                    Building.village_id == 1, Building.kind == "woodcutter"
                )
            )
        ).scalar()
    assert level == 3
    after = await _stock(game, 1)
    new_rate = 45 + field_production(3, 1.0) - field_production(2, 1.0)
    assert after["wood_rate"] == new_rate
    # the closed form: old rate until the order is done, the new one after; capped by storage
    cap = to_fixed(1200)
    expected = accrue(
        accrue(before["wood"], 45, order["done_ms"] - before["updated_ms"], cap),
        new_rate,
        HOUR,
        cap,
    )
    assert after["updated_ms"] == order["done_ms"]
    assert stock_at(after, order["done_ms"] + HOUR)["wood"] == expected


async def test_train_adds_troops_and_their_upkeep(game: GameDriver) -> None:
    order = await game.command(commands.train, 1, 1, "legionnaire", 2)
    crop_rate = (await _stock(game, 1))["crop_rate"]
    await game.run_until(order["done_ms"])
    assert (await _troops(game, 1))["legionnaire"] == 17
    assert (await _stock(game, 1))["crop_rate"] == crop_rate - total_upkeep({"legionnaire": 2})


async def test_refusals_change_nothing(game: GameDriver) -> None:
    before = await _stock(game, 1)
    with pytest.raises(InsufficientResources):
        await game.command(commands.train, 1, 1, "legionnaire", 100)
    with pytest.raises(InsufficientTroops):
        await game.command(
            commands.send_march, 1, 1, "attack", *(await _xy(game, 2)), {"legionnaire": 16}
        )
    with pytest.raises(NotYourVillage):
        await game.command(commands.build, 2, 1, "woodcutter")
    assert await _stock(game, 1) == before
    assert (await _troops(game, 1))["legionnaire"] == 15
    async with game.sessions() as session:
        assert (
            await session.execute(select(func.count()).select_from(ScheduledEvent))
        ).scalar() == 0


async def test_attack_end_to_end(game: GameDriver) -> None:
    target_xy = await _xy(game, 2)
    sent = {"legionnaire": 15, "imperian": 5, "equites_imperatoris": 3}
    march = await game.command(commands.send_march, 1, 1, "attack", *target_xy, sent)
    assert (await _troops(game, 1)) == {"praetorian": 10}
    origin_x, origin_y = await _xy(game, 1)
    assert game.alerts == [(2, "incoming_attack", {  # pushed to the defender's open clients
        "march_id": march["march_id"], "kind": "attack", "target_village_id": 2,
        "origin": {"x": origin_x, "y": origin_y}, "arrive_ms": march["arrive_ms"],
    })]  # fmt: skip
    defenders_before = await _troops(game, 2)

    await game.run_until(march["arrive_ms"])  # arrival: battle, reports, return scheduled
    async with game.sessions() as session:
        reports = (await session.execute(select(Report).order_by(Report.player_id))).scalars().all()
        back = await session.get(March, march["march_id"])
    assert [r.player_id for r in reports] == [1, 2]
    assert all(verify_report(r.body) for r in reports)
    battle = reports[0].body["battle"]
    loot = reports[0].body["loot"]
    assert battle["attackers"] == sent and battle["defenders"] == defenders_before
    assert await _troops(game, 2) == {u: n for u, n in battle["defender_survivors"].items() if n}
    survivors = {u: n for u, n in battle["attacker_survivors"].items() if n}
    if survivors:
        assert (
            back is not None
            and back.kind == "return"
            and back.troops == survivors
            and back.loot == loot
        )
        home_stock_before = await _stock(game, 1)
        await game.run_until(back.arrive_ms)
        home = await _troops(game, 1)
        assert home == {u: n for u, n in {"praetorian": 10, **survivors}.items()}
        after = await _stock(game, 1)
        cap = to_fixed(1200)
        expected_wood = min(
            cap,
            accrue(
                home_stock_before["wood"], 45, back.arrive_ms - home_stock_before["updated_ms"], cap
            )
            + to_fixed(loot["wood"]),
        )
        assert after["wood"] == expected_wood
    else:
        assert back is None
    # troops are conserved: the dead are the battle's losses
    lost = sum(battle["attacker_losses"].values())
    assert sum((await _troops(game, 1)).values()) + lost == 10 + sum(sent.values())


async def test_two_marches_landing_in_the_same_ms_fight_one_after_another(game: GameDriver) -> None:
    xy = await _xy(game, 3)
    first = await game.command(commands.send_march, 1, 1, "raid", *xy, {"legionnaire": 5})
    # village 2's march is sent so that it lands in the very same ms
    async with game.sessions() as session, session.begin():
        await session.execute(
            update(March).where(March.id == first["march_id"]).values(arrive_ms=T0 + HOUR)
        )
        await session.execute(update(ScheduledEvent).values(due_ms=T0 + HOUR))
    second = await game.command(commands.send_march, 2, 2, "raid", *xy, {"legionnaire": 5})
    async with game.sessions() as session, session.begin():
        await session.execute(
            update(March).where(March.id == second["march_id"]).values(arrive_ms=T0 + HOUR)
        )
        await session.execute(
            update(ScheduledEvent).where(ScheduledEvent.due_ms > T0 + HOUR).values(due_ms=T0 + HOUR)
        )
    await game.run_until(T0 + HOUR)
    async with game.sessions() as session:
        bodies = [
            r.body
            for r in (
                await session.execute(
                    select(Report).where(Report.player_id == 3).order_by(Report.id)
                )
            ).scalars()
        ]
    assert [b["attacker"]["village_id"] for b in bodies] == [1, 2]  # by (due, priority, id)
    # the second battle meets what the first left behind
    assert bodies[1]["battle"]["defenders"] == {
        u: n for u, n in bodies[0]["battle"]["defender_survivors"].items() if n
    }


async def test_recall_within_the_window_brings_troops_home(game: GameDriver) -> None:
    march = await game.command(
        commands.send_march, 1, 1, "attack", *(await _xy(game, 2)), {"legionnaire": 4}
    )
    half = (march["arrive_ms"] - march["depart_ms"]) // 2
    await game.clock.advance(half // 2)
    recalled = await game.command(commands.recall, 1, march["march_id"])
    assert recalled["arrive_ms"] == game.clock.now_ms() + half // 2
    await game.run_until(recalled["arrive_ms"])
    assert (await _troops(game, 1))["legionnaire"] == 15
    async with game.sessions() as session:
        assert (await session.execute(select(func.count()).select_from(Report))).scalar() == 0


async def test_recall_past_the_window_or_of_another_player_is_refused(game: GameDriver) -> None:
    march = await game.command(
        commands.send_march, 1, 1, "attack", *(await _xy(game, 2)), {"legionnaire": 4}
    )
    with pytest.raises(NotYourVillage):
        await game.command(commands.recall, 2, march["march_id"])
    await game.clock.set((march["depart_ms"] + march["arrive_ms"]) // 2 + 1)
    with pytest.raises(NotRecallable):
        await game.command(commands.recall, 1, march["march_id"])


async def test_march_to_a_deleted_village_turns_around(game: GameDriver) -> None:
    march = await game.command(
        commands.send_march, 1, 1, "attack", *(await _xy(game, 2)), {"legionnaire": 4}
    )
    async with game.sessions() as session, session.begin():
        await session.execute(delete(Village).where(Village.id == 2))
    await game.run_until(march["arrive_ms"] + (march["arrive_ms"] - march["depart_ms"]))
    assert (await _troops(game, 1))["legionnaire"] == 15


async def test_starvation_kills_troops_when_the_granary_runs_dry(game: GameDriver) -> None:
    order = await game.command(commands.train, 1, 1, "legionnaire", 1)
    # an empty granary and a production exactly eaten by upkeep; the new unit tips it over
    async with game.sessions() as session, session.begin():
        await session.execute(
            update(STOCKS.table).where(STOCKS.c.village_id == 1).values(crop=0, crop_rate=0)
        )
    await game.run_until(order["done_ms"] + HOUR)
    assert [k for k, v, _ in game.events_run] == ["train_done", "starvation"]
    # -1 crop/hour: the highest-upkeep unit starves first (one equites_imperatoris eats 3)
    assert (await _stock(game, 1))["crop_rate"] == -1 + 3
    troops = await _troops(game, 1)
    assert troops["equites_imperatoris"] == 2 and troops["legionnaire"] == 16
    async with game.sessions() as session:
        report = (
            await session.execute(select(Report).where(Report.kind == "starvation"))
        ).scalar_one()
    assert report.body["deaths"] == {"equites_imperatoris": 1}
