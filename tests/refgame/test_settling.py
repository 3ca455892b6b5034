"""Settlers and a second village, on a real database: training, founding, refusals, a field
taken while they travel, and an arrival run late."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, func, select, update

from common.amounts import accrue, to_fixed
from common.clock import ManualClock
from common.queue.durable import row_to_event
from common.settings import load_settings
from db.models import ScheduledEvent, Village
from db.worldgen import generate_world
from gameapi import OffMap, PlaceTaken, load_game
from gameapi.places import found_place
from gameapi.testing import GameDriver
from refgame import commands, settling
from refgame.admin import admin_timeline
from refgame.economy import stock_at
from refgame.errors import InsufficientTroops, NotYourVillage, PrerequisiteMissing, QueueFull
from refgame.models import Building, March, Report, SettleMarch, Troop
from refgame.resources import RESOURCES, STOCKS
from refgame.rules import rule_tables
from refgame.state import add_troops
from refgame.travel import march_duration_ms
from refgame.units import SETTLER_RESIDENCE_LEVEL, total_upkeep
from refgame.world import player_village_template, village_template

T0 = 1_750_000_000_000
HOUR = 3_600_000
RADIUS = 6
SHARDS = 4
SETTLERS = {"settler": settling.SETTLERS_TO_FOUND}


@pytest.fixture
async def game(engine) -> GameDriver:
    clock = ManualClock(T0)
    await generate_world(
        engine,
        stocks=STOCKS,
        players=3,
        template=village_template(1.0),
        shards=SHARDS,
        map_radius=RADIUS,
        seed=3,
        clock=clock,
    )
    settings = load_settings(map_radius=RADIUS, tick_shards=SHARDS)
    return GameDriver(load_game("refgame"), engine, clock, settings=settings)


async def _stock(game: GameDriver, village_id: int) -> dict:
    async with game.sessions() as session:
        row = await session.execute(select(STOCKS.table).where(STOCKS.c.village_id == village_id))
        return dict(row.one()._mapping)


async def _troops(game: GameDriver, village_id: int) -> dict[str, int]:
    async with game.sessions() as session:
        rows = await session.execute(
            select(Troop.unit, Troop.count).where(
                Troop.village_id == village_id, Troop.home_village_id == village_id
            )
        )
        return {u: n for u, n in rows if n}


async def _give_settlers(game: GameDriver, village_id: int, count: int = 3) -> None:
    async with game.sessions() as session, session.begin():
        await add_troops(session, village_id, village_id, {"settler": count})


async def _xy(game: GameDriver, village_id: int) -> tuple[int, int]:
    async with game.sessions() as session:
        x, y = (
            await session.execute(select(Village.x, Village.y).where(Village.id == village_id))
        ).one()
        return int(x), int(y)


async def _free_field(game: GameDriver, near: tuple[int, int]) -> tuple[int, int]:
    """The free field nearest to ``near`` (not ``near`` itself), on the map."""
    async with game.sessions() as session:
        taken = {(x, y) for x, y in await session.execute(select(Village.x, Village.y))}
    fields = [
        (x, y)
        for x in range(-RADIUS, RADIUS + 1)
        for y in range(-RADIUS, RADIUS + 1)
        if (x, y) not in taken
    ]
    return min(fields, key=lambda p: ((p[0] - near[0]) ** 2 + (p[1] - near[1]) ** 2, p))


async def _world_rows(game: GameDriver) -> tuple[int, int, int, int]:
    async with game.sessions() as session:
        return (
            int(await session.scalar(select(func.count()).select_from(Village)) or 0),
            int(await session.scalar(select(func.count()).select_from(SettleMarch)) or 0),
            int(await session.scalar(select(func.count()).select_from(ScheduledEvent)) or 0),
            int(await session.scalar(select(func.count()).select_from(Report)) or 0),
        )


async def test_settlers_train_in_the_residence_from_its_level(game: GameDriver) -> None:
    with pytest.raises(PrerequisiteMissing) as refused:
        await game.command(commands.train, 1, 1, "settler", 1)
    assert refused.value.details["requires"] == {"residence": SETTLER_RESIDENCE_LEVEL}
    async with game.sessions() as session, session.begin():
        await session.execute(
            update(Building)
            .where(Building.village_id == 1, Building.kind == "residence")
            .values(level=SETTLER_RESIDENCE_LEVEL)
        )
    crop_rate = (await _stock(game, 1))["crop_rate"]
    await game.clock.advance(2 * HOUR)  # iron for a settler (800; a new village has 750)
    order = await game.command(commands.train, 1, 1, "settler", 1)
    assert order["cost"] == {"wood": 750, "clay": 650, "iron": 800, "crop": 500}
    await game.run_until(order["done_ms"])
    assert (await _troops(game, 1))["settler"] == 1
    assert (await _stock(game, 1))["crop_rate"] == crop_rate - total_upkeep({"settler": 1})


async def test_found_a_village_that_then_produces_on_its_own(game: GameDriver, engine) -> None:
    await _give_settlers(game, 1)
    origin = await _xy(game, 1)
    x, y = await _free_field(game, origin)
    crop_rate = (await _stock(game, 1))["crop_rate"]
    sent = await game.command(settling.found, 1, 1, x, y)
    assert sent["arrive_ms"] == T0 + march_duration_ms(origin, (x, y), SETTLERS, 1.0)
    assert "settler" not in await _troops(game, 1)
    async with game.sessions() as session:
        assert (
            await session.scalar(select(Village.id).where(Village.x == x, Village.y == y)) is None
        )

    await game.run_until(sent["arrive_ms"])
    async with game.sessions() as session:
        new = (
            await session.execute(select(Village).where(Village.x == x, Village.y == y))
        ).scalar_one()
        buildings = dict(
            (
                await session.execute(
                    select(Building.kind, Building.level).where(Building.village_id == new.id)
                )
            ).all()
        )
        report = (await session.execute(select(Report.kind, Report.body))).one()
    template = player_village_template(1.0)
    assert new.player_id == 1 and new.created_ms == sent["arrive_ms"]
    assert buildings == dict(template.buildings)
    stock = await _stock(game, new.id)
    assert stock["shard"] == new.id % SHARDS and stock["updated_ms"] == sent["arrive_ms"]
    assert {r: stock[f"{r}_rate"] for r in RESOURCES} == template.rates
    assert stock["wood"] == to_fixed(750)
    # the settlers are used up: their home stops feeding them at the arrival
    home = await _stock(game, 1)
    assert home["crop_rate"] == crop_rate + total_upkeep(SETTLERS)
    assert home["updated_ms"] == sent["arrive_ms"]
    assert (
        report.kind == "settling" and report.body["founded"] and report.body["village_id"] == new.id
    )

    # its own stock ticks: the tick materializes it, exactly as the closed form says
    later = sent["arrive_ms"] + HOUR
    async with engine.connect() as conn:
        await STOCKS.tick_shard(conn, new.id % SHARDS, later)
    ticked = await _stock(game, new.id)
    cap = to_fixed(template.caps["warehouse"])
    assert ticked["updated_ms"] == later
    assert ticked["wood"] == accrue(to_fixed(750), template.rates["wood"], HOUR, cap)


async def test_refusals_change_nothing(game: GameDriver) -> None:
    await _give_settlers(game, 1, 2)
    origin = await _xy(game, 1)
    x, y = await _free_field(game, origin)
    before = (await _world_rows(game), await _troops(game, 1), await _stock(game, 1))
    with pytest.raises(InsufficientTroops):  # 2 of 3 settlers
        await game.command(settling.found, 1, 1, x, y)
    await _give_settlers(game, 1, 1)
    before = (await _world_rows(game), await _troops(game, 1), await _stock(game, 1))
    with pytest.raises(PlaceTaken):
        await game.command(settling.found, 1, 1, *(await _xy(game, 2)))
    with pytest.raises(OffMap):
        await game.command(settling.found, 1, 1, RADIUS + 1, 0)
    with pytest.raises(NotYourVillage):
        await game.command(settling.found, 1, 2, x, y)
    after = (await _world_rows(game), await _troops(game, 1), await _stock(game, 1))
    assert after == before and after[1]["settler"] == 3


async def test_field_taken_while_travelling_sends_the_settlers_home(game: GameDriver) -> None:
    await _give_settlers(game, 1)
    await _give_settlers(game, 2)
    x, y = await _free_field(game, await _xy(game, 2))
    first = await game.command(settling.found, 2, 2, x, y)
    late = await game.command(settling.found, 1, 1, x, y)
    if late["arrive_ms"] < first["arrive_ms"]:  # who is first depends on the map: swap roles
        first, late = late, first
    assert late["arrive_ms"] > first["arrive_ms"]
    async with game.sessions() as session:
        loser = (
            await session.execute(
                select(SettleMarch.origin_village_id).where(SettleMarch.id == late["settle_id"])
            )
        ).scalar_one()
    winner = 3 - loser  # villages 1 and 2 are players 1's and 2's
    crop_rate = (await _stock(game, loser))["crop_rate"]

    await game.run_until(late["arrive_ms"])
    async with game.sessions() as session:
        owner = await session.scalar(
            select(Village.player_id).where(Village.x == x, Village.y == y)
        )
        back = (
            await session.execute(select(March).where(March.origin_village_id == loser))
        ).scalar_one()
        report = (
            await session.execute(select(Report.body).where(Report.player_id == loser))
        ).scalar_one()
    assert owner == winner
    assert back.kind == "return" and back.troops == SETTLERS
    assert back.depart_ms == late["arrive_ms"]
    assert back.arrive_ms == late["arrive_ms"] + (late["arrive_ms"] - late["depart_ms"])
    assert not report["founded"] and report["return_ms"] == back.arrive_ms
    assert (await _stock(game, loser))["crop_rate"] == crop_rate  # still its settlers

    await game.run_until(back.arrive_ms)
    assert (await _troops(game, loser))["settler"] == 3
    assert (await _world_rows(game))[1] == 0


async def test_an_arrival_run_late_founds_at_its_due_time(game: GameDriver) -> None:
    await _give_settlers(game, 1)
    x, y = await _free_field(game, await _xy(game, 1))
    sent = await game.command(settling.found, 1, 1, x, y)
    due = sent["arrive_ms"]
    await game.clock.set(due + 5 * HOUR)  # the task server was down for five hours
    await game.run_until(due + 5 * HOUR)
    assert game.events_run[-1] == (settling.FOUND, 1, due)
    async with game.sessions() as session:
        new = (
            await session.execute(select(Village).where(Village.x == x, Village.y == y))
        ).scalar_one()
    stock = await _stock(game, new.id)
    template = player_village_template(1.0)
    assert new.created_ms == due and stock["updated_ms"] == due
    cap = to_fixed(template.caps["warehouse"])
    expected = accrue(to_fixed(750), template.rates["wood"], 5 * HOUR, cap)
    assert stock_at(stock, due + 5 * HOUR)["wood"] == expected
    assert (await _stock(game, 1))["updated_ms"] == due  # the upkeep fell at the due time


async def test_found_place_relies_on_the_field_being_unique(game: GameDriver) -> None:
    """The framework's extension point: a taken field raises and the transaction lives on."""
    x, y = await _free_field(game, (0, 0))
    template = player_village_template(1.0)
    async with game.sessions() as session, session.begin():
        tx = game._tx(session, 1)
        first = await found_place(tx, 1, x, y, template, name="first")
        with pytest.raises(PlaceTaken):
            await found_place(tx, 2, x, y, template, name="second")
        with pytest.raises(OffMap):
            await found_place(tx, 2, RADIUS, -RADIUS - 1, template, name="off")
        # the transaction is still usable after the conflict
        assert await session.scalar(select(Village.player_id).where(Village.id == first)) == 1
        assert tx.touched == {1}
    assert (await _stock(game, first))["shard"] == first % SHARDS


async def test_a_dropped_dead_arrival_brings_the_settlers_home(game: GameDriver) -> None:
    """The operator's drop (``common.queue.deadletters.drop``) runs ``found``'s compensation
    in the transaction that deletes the event's row."""
    await _give_settlers(game, 1)
    x, y = await _free_field(game, await _xy(game, 1))
    await game.command(settling.found, 1, 1, x, y)
    registration = game.registry.get(settling.FOUND)
    assert registration is not None and registration.compensate is not None
    compensate = registration.compensate
    async with game.sessions() as session, session.begin():
        row = (await session.execute(delete(ScheduledEvent).returning(ScheduledEvent))).scalar_one()
        await compensate(game._tx(session), [row_to_event(row)])
    assert (await _troops(game, 1))["settler"] == 3
    assert (await _world_rows(game))[1:] == (0, 0, 0)  # no settlers away, no event, no report


async def test_each_village_has_its_own_queues_and_sends_its_own_marches(
    game: GameDriver,
) -> None:
    await _give_settlers(game, 1)
    x, y = await _free_field(game, await _xy(game, 1))
    sent = await game.command(settling.found, 1, 1, x, y)
    async with game.sessions() as session:
        timeline = await admin_timeline(session, 1)
    assert [(m["kind"], m["field"]) for m in timeline["marches"]] == [("found", {"x": x, "y": y})]
    await game.run_until(sent["arrive_ms"])
    async with game.sessions() as session:
        new = (
            await session.execute(select(Village.id).where(Village.x == x, Village.y == y))
        ).scalar_one()
    await game.clock.advance(HOUR)  # the new village's first resources

    # the build queue is per village: the first one's is full, the new one's is not
    await game.command(commands.build, 1, 1, "cropland")
    await game.command(commands.build, 1, 1, "cropland")
    with pytest.raises(QueueFull):
        await game.command(commands.build, 1, 1, "cropland")
    order = await game.command(commands.build, 1, new, "cropland")
    assert order["target_level"] == 3 and order["started_ms"] == game.clock.now_ms()

    # a march leaves from the village named, and only from the player's own
    async with game.sessions() as session, session.begin():
        await add_troops(session, new, new, {"legionnaire": 5})
    march = await game.command(
        commands.send_march, 1, new, "reinforce", *(await _xy(game, 1)), {"legionnaire": 5}
    )
    assert march["target_village_id"] == 1 and "legionnaire" not in await _troops(game, new)
    with pytest.raises(NotYourVillage):
        await game.command(commands.send_march, 1, 2, "raid", x, y, {"legionnaire": 1})
    with pytest.raises(NotYourVillage):
        await game.command(commands.train, 2, new, "legionnaire", 1)


def test_the_rule_tables_tell_where_settlers_train_and_how_many_found() -> None:
    tables = rule_tables(1.0, RADIUS)
    settler = tables["units"]["settler"]
    assert settler["trained_in"] == "residence"
    assert settler["barracks_level"] == SETTLER_RESIDENCE_LEVEL
    assert tables["units"]["legionnaire"]["trained_in"] == "barracks"
    assert tables["settlers_to_found"] == settling.SETTLERS_TO_FOUND
    assert tables["map_radius"] == RADIUS
    assert "residence" in tables["buildings"]
