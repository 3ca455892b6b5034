"""Finished builds and trainings run as one batch (a few statements whatever its size) give
exactly what running them one at a time gives, including several events of one village in
the batch: a field built twice, a storage built, units trained twice, upkeep that turns net
crop negative (a starvation check is scheduled), and an order that is gone."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from common.amounts import to_fixed
from common.clock import ManualClock
from common.ids import IdGenerator
from common.queue.events import Event
from db.worldgen import generate_world
from refgame import handlers
from refgame.economy import storage_capacity
from refgame.models import Building, BuildOrder, TrainingOrder, Troop
from refgame.resources import STOCKS
from refgame.world import village_template
from tests.refgame.driver import DriverTx

T0 = 1_750_000_000_000
MINUTE = 60_000


@pytest.fixture
async def batches(engine: AsyncEngine) -> tuple[list[Event], list[Event]]:
    """Three villages (ids 1..3), their orders, and the two batches that finish them."""
    clock = ManualClock(T0)
    await generate_world(
        engine, stocks=STOCKS, players=3, template=village_template(1.0), shards=2, map_radius=8,
        seed=5, clock=clock,
    )  # fmt: skip
    async with AsyncSession(engine) as session, session.begin():
        levels = {
            (v, k): level
            for v, k, level in await session.execute(
                select(Building.village_id, Building.kind, Building.level)
            )
        }
        builds = [  # (village, kind, levels up): in run order
            (1, "woodcutter", 1),
            (2, "cropland", 1),
            (1, "woodcutter", 2),  # the same field again, a level higher
            (1, "warehouse", 1),
            (3, "granary", 1),
        ]
        build_ids = [
            (
                await session.execute(
                    insert(BuildOrder).returning(BuildOrder.id),
                    [{"village_id": v, "kind": k, "target_level": levels[v, k] + up,
                      "started_ms": T0, "done_ms": T0}],
                )
            ).scalar_one()
            for v, k, up in builds
        ]  # fmt: skip
        trainings = [(1, "legionnaire", 5), (2, "equites_caesaris", 400), (1, "legionnaire", 7)]
        training_ids = [
            (
                await session.execute(
                    insert(TrainingOrder).returning(TrainingOrder.id),
                    [{"village_id": v, "unit": u, "count": n, "started_ms": T0, "done_ms": T0}],
                )
            ).scalar_one()
            for v, u, n in trainings
        ]
    build_events = [
        _event(i, handlers.BUILD_DONE, v, T0 + (i + 1) * MINUTE, order)
        for i, ((v, _, _), order) in enumerate(zip(builds, build_ids, strict=True))
    ]
    build_events.append(_event(9, handlers.BUILD_DONE, 2, T0 + 9 * MINUTE, 999_999))  # gone
    train_events = [
        _event(10 + i, handlers.TRAIN_DONE, v, T0 + (10 + i) * MINUTE, order)
        for i, ((v, _, _), order) in enumerate(zip(trainings, training_ids, strict=True))
    ]
    return build_events, train_events


def _event(n: int, kind: str, village_id: int, due_ms: int, order_id: int) -> Event:
    return Event(n, kind, village_id, due_ms, 0, {"order_id": order_id}, 0, True)


async def _run(engine: AsyncEngine, batches: list[list[Event]]) -> dict[str, Any]:
    """Run each batch with its kind's handler in a transaction that is rolled back; return
    the world it made."""
    registry_handlers = handlers.SET_HANDLERS
    async with AsyncSession(engine) as session, session.begin():
        tx = DriverTx(session, T0, 1.0, IdGenerator(ManualClock(T0)))
        for batch in batches:
            await registry_handlers[batch[0].kind](tx, batch)  # type: ignore[arg-type]
        out = {
            "stocks": [
                tuple(r)
                for r in await session.execute(select(STOCKS.table).order_by(STOCKS.c.village_id))
            ],
            "buildings": sorted(
                tuple(r) for r in await session.execute(select(Building.__table__))
            ),
            "troops": sorted(tuple(r) for r in await session.execute(select(Troop.__table__))),
            "orders": [
                *(await session.execute(select(BuildOrder.id))).scalars(),
                *(await session.execute(select(TrainingOrder.id))).scalars(),
            ],
            "events": [
                (e["kind"], e["village_id"], e["due_ms"], msgpack.unpackb(e["payload"]))
                for e in tx.pending
            ],
            "players": sorted(tx.touched),
        }
        await session.rollback()
    return out


async def test_a_batch_of_orders_equals_running_them_one_by_one(
    engine: AsyncEngine, batches: tuple[list[Event], list[Event]]
) -> None:
    builds, trainings = batches
    before = await _run(engine, [])
    together = await _run(engine, [builds, trainings])
    alone = await _run(engine, [[event] for event in (*builds, *trainings)])
    assert together == alone

    level = {(v, k): n for v, k, n in together["buildings"]}
    was = {(v, k): n for v, k, n in before["buildings"]}
    assert level[1, "woodcutter"] == was[1, "woodcutter"] + 2
    assert level[1, "warehouse"] == was[1, "warehouse"] + 1
    stocks = {
        row[0]: dict(zip(STOCKS.table.c.keys(), row, strict=True)) for row in together["stocks"]
    }
    old = {row[0]: dict(zip(STOCKS.table.c.keys(), row, strict=True)) for row in before["stocks"]}
    assert stocks[1]["wood_rate"] > old[1]["wood_rate"]
    assert stocks[1]["warehouse_cap"] == to_fixed(storage_capacity(level[1, "warehouse"]))
    assert stocks[3]["granary_cap"] > old[3]["granary_cap"]
    troops = {(v, u): n for v, h, u, n in together["troops"] if v == h}
    was_troops = {(v, u): n for v, h, u, n in before["troops"] if v == h}
    assert troops[1, "legionnaire"] == was_troops.get((1, "legionnaire"), 0) + 12
    assert stocks[1]["crop_rate"] < old[1]["crop_rate"]
    # both armies now eat more than their villages grow: starvation is checked for each
    assert stocks[1]["crop_rate"] < 0 and stocks[2]["crop_rate"] < 0
    assert sorted((k, v) for k, v, _, _ in together["events"]) == [
        ("starvation", 1),
        ("starvation", 2),
    ]
    assert together["orders"] == []
    assert together["players"] == [1, 2, 3]


def _by_village(rows: list[tuple[Any, ...]]) -> dict[int, dict[str, Any]]:
    return {row[0]: dict(zip(STOCKS.table.c.keys(), row, strict=True)) for row in rows}
