"""March arrivals run as one batch (``BatchState`` in memory) give exactly what running them
one by one gives, including arrivals that depend on an earlier one of the same batch."""

from __future__ import annotations

import itertools
from typing import Any, cast

import msgpack
import pytest
from sqlalchemy import Table, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from common.clock import ManualClock
from common.ids import IdGenerator
from db.engine import session_factory
from db.models import ScheduledEvent, Village
from db.worldgen import generate_world
from refgame import commands, handlers
from refgame.models import March, Report, Troop
from refgame.resources import STOCKS
from refgame.world import STARTING_TROOPS, village_template
from tests.refgame.driver import DriverTx

T0 = 1_750_000_000_000
ARRIVAL = T0 + 3_600_000  # every march lands in this ms, in the order written


@pytest.fixture
async def world(engine: AsyncEngine) -> list[handlers.Arrival]:
    """Seven villages (ids 1..7, player i owns village i) and the marches of one batch."""
    clock = ManualClock(T0)
    await generate_world(
        engine, stocks=STOCKS, players=7, template=village_template(1.0), shards=2, map_radius=8,
        seed=5, clock=clock,
    )  # fmt: skip
    sessions = session_factory(engine)
    ids = IdGenerator(clock)
    async with sessions() as session, session.begin():
        xy = {
            v: (x, y) for v, x, y in await session.execute(select(Village.id, Village.x, Village.y))
        }
        tx = DriverTx(session, T0, 1.0, ids)
        sends = [
            (4, "reinforce", 3, {"legionnaire": 5}),  # 1. reinforcements reach 3 first
            (1, "attack", 3, {"equites_imperatoris": 3, "imperian": 5}),  # 2. meets them
            (2, "raid", 3, {"imperian": 5, "legionnaire": 5}),  # 3. meets what 2. left
            (6, "attack", 5, {"equites_imperatoris": 3}),  # 5. after 5's troops came home
            (2, "attack", 7, {"legionnaire": 3}),  # 6. 7 is deleted below: turns around
        ]
        marches = []
        for origin, kind, target, troops in sends:
            sent = await commands.send_march(tx, origin, origin, kind, *xy[target], troops)
            marches.append(sent["march_id"])
        # 4. half of village 5's army comes home with loot, before 6's attack on it lands
        home_id = (
            await session.execute(
                insert(March).returning(March.id),
                [{"kind": "return", "origin_village_id": 5, "target_village_id": 1,
                  "troops": {"legionnaire": 7, "praetorian": 4}, "loot": {"wood": 90, "crop": 40},
                  "depart_ms": T0, "arrive_ms": ARRIVAL, "event_id": 0}],
            )
        ).scalar_one()  # fmt: skip
        await tx.flush()
        await session.execute(delete(ScheduledEvent))  # the batch is handed its events below
        await session.execute(
            cast(Table, Troop.__table__)  # the stubs say FromClause
            .update()
            .where(Troop.village_id == 5, Troop.home_village_id == 5, Troop.unit == "legionnaire")
            .values(count=STARTING_TROOPS["legionnaire"] - 7)
        )
        await session.execute(delete(Village).where(Village.id == 7))
    order = [*marches[:3], home_id, *marches[3:]]
    targets = [3, 3, 3, 5, 5, 7]
    return [(v, ARRIVAL, {"march_id": m}) for v, m in zip(targets, order, strict=True)]


async def _run(
    engine: AsyncEngine,
    arrivals: list[handlers.Arrival],
    one_by_one: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Any]:
    """Run the arrivals in a transaction that is rolled back; return the world it made."""
    seeds = itertools.count(1_000)  # the same battle seeds in both runs
    monkeypatch.setattr(handlers, "new_seed", lambda: next(seeds))
    async with AsyncSession(engine) as session, session.begin():
        tx = DriverTx(session, ARRIVAL, 1.0, IdGenerator(ManualClock(ARRIVAL)))
        if one_by_one:
            for village_id, due_ms, payload in arrivals:
                await handlers.march(tx, village_id, due_ms, payload)
        else:
            await handlers.march_batch(tx, arrivals)
        out = await _world(session, tx)
        await session.rollback()
    return out


async def _world(session: AsyncSession, tx: DriverTx) -> dict[str, Any]:
    stocks = [tuple(r) for r in await session.execute(
        select(STOCKS.table).order_by(STOCKS.c.village_id))]  # fmt: skip
    by_key = (Troop.village_id, Troop.home_village_id, Troop.unit)
    troops = [tuple(r) for r in await session.execute(select(Troop.__table__).order_by(*by_key))]
    marches = [
        (r.id, r.kind, r.origin_village_id, r.troops, r.loot, r.depart_ms, r.arrive_ms)
        for r in await session.execute(select(March.__table__).order_by(March.id))
    ]
    reports = [
        (r.player_id, r.kind, r.title, r.body, r.created_ms)
        for r in await session.execute(select(Report.__table__).order_by(Report.id))
    ]
    events = [
        (e["kind"], e["village_id"], e["due_ms"], msgpack.unpackb(e["payload"])) for e in tx.pending
    ]
    return {"stocks": stocks, "troops": troops, "marches": marches, "reports": reports,
            "events": events, "players": sorted(tx.touched)}  # fmt: skip


async def test_a_batch_of_arrivals_equals_running_them_one_by_one(
    engine: AsyncEngine, world: list[handlers.Arrival], monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = await _run(engine, world, False, monkeypatch)
    single = await _run(engine, world, True, monkeypatch)
    assert batch == single

    battles = [body for _, kind, _, body, _ in batch["reports"] if kind == "battle"]
    defender_reports = [b for b in battles if b["side"] == "defender"]
    at_3 = [b["battle"]["defenders"] for b in defender_reports if b["defender"]["village_id"] == 3]
    # the first attack met the garrison plus the reinforcements of the same batch ...
    assert at_3[0]["legionnaire"] == STARTING_TROOPS["legionnaire"] + 5
    # ... the raid met what the first attack left of them
    first = next(b for b in defender_reports if b["defender"]["village_id"] == 3)
    survivors = first["battle"]["defender_survivors"]
    assert at_3[1] == {u: n for u, n in survivors.items() if n > 0}
    # the attack on 5 met the troops that came home earlier in the batch
    at_5 = next(b for b in defender_reports if b["defender"]["village_id"] == 5)
    assert at_5["battle"]["defenders"]["legionnaire"] == STARTING_TROOPS["legionnaire"]
    # the march to the deleted village walks back: a return arriving twice its travel later
    [turned] = [m for m in batch["marches"] if m[3] == {"legionnaire": 3}]
    assert (turned[1], turned[2], turned[5]) == ("return", 2, ARRIVAL)
    assert turned[6] == ARRIVAL + (ARRIVAL - T0)
    kinds = sorted({kind for kind, *_ in batch["events"]})
    assert kinds == ["march", "troops_lost"]
