"""Exact resources: the tick, settle, spend and deposit agree with the closed form."""

from __future__ import annotations

import asyncio
import random

import pytest
from sqlalchemy import BigInteger, bindparam, delete, insert, select, union_all

from common.amounts import SCALE, accrue
from db import driver
from db.models import Village
from db.stock import RateChange
from refgame.resources import STOCKS as stock

T0 = 1_700_000_000_000
CAP = 1_000 * SCALE
RATES = {"wood": 37, "clay": 101, "iron": 3, "crop": -13}  # odd rates: no lucky rounding


async def _make_villages(engine, count: int, shards: int = 4, start: int = 500) -> None:
    rows = [
        {
            "village_id": v,
            "shard": v % shards,
            "updated_ms": T0,
            **{res: start * SCALE for res in stock.names},
            **{f"{res}_rate": RATES[res] + v for res in stock.names},
            "warehouse_cap": CAP,
            "granary_cap": CAP,
        }
        for v in range(1, count + 1)
    ]
    async with engine.begin() as conn:
        await conn.execute(
            insert(Village),
            [
                {"id": v, "name": f"v{v}", "x": v, "y": 0, "created_ms": T0}
                for v in range(1, count + 1)
            ],
        )
        await conn.execute(insert(stock.table), rows)


async def _stocks(engine) -> dict[int, tuple[int, ...]]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(stock.c.village_id, *(stock.c[r] for r in stock.names)))
        return {r[0]: tuple(r[1:]) for r in rows}


def closed_form(village_id: int, t: int, start: int = 500) -> tuple[int, ...]:
    return tuple(accrue(start * SCALE, RATES[res] + village_id, t - T0, CAP) for res in stock.names)


async def test_ticks_late_doubled_or_skipped_give_the_closed_form(engine) -> None:
    await _make_villages(engine, 40)
    rng = random.Random(7)
    now = T0
    for _ in range(60):
        now += rng.choice([0, 1, 999, 1000, 1000, 1001, 3_333, 60_000])
        shard = rng.randrange(4)
        for _repeat in range(rng.choice([0, 1, 1, 2])):  # skipped, normal or doubled
            async with engine.connect() as conn:
                await stock.tick_shard(conn, shard, now)
    end = now + 12_345
    async with engine.begin() as conn:
        await stock.settle(conn, list(range(1, 41)), end)
    got = await _stocks(engine)
    assert got == {v: closed_form(v, end) for v in range(1, 41)}


async def test_stock_is_capped_and_never_negative(engine) -> None:
    await _make_villages(engine, 2)
    ten_days = 10 * 24 * 3600 * 1000
    for shard in range(4):
        async with engine.connect() as conn:
            await stock.tick_shard(conn, shard, T0 + ten_days)
    got = await _stocks(engine)
    assert got[1] == (CAP, CAP, CAP, 0)  # crop net -12/h ran out long ago


async def test_tick_of_an_empty_shard_changes_nothing(engine) -> None:
    await _make_villages(engine, 3, shards=4)  # ids 1..3: shard 0 is empty
    async with engine.connect() as conn:
        assert (await stock.tick_shard(conn, 0, T0 + 1000)).rows == 0
    assert (await _stocks(engine))[1] == closed_form(1, T0)


async def test_spend_uses_the_interpolated_stock_and_refuses_overdraft(engine) -> None:
    await _make_villages(engine, 1, start=0)
    hour = 3_600_000
    async with engine.begin() as conn:
        # after one hour village 1 has 38 wood: 38 is affordable, 39 is not
        assert await stock.spend(conn, 1, {"wood": 39 * SCALE}, T0 + hour) is None
        assert await stock.spend(conn, 1, {"wood": 38 * SCALE}, T0 + hour) == T0 + hour
    got = await _stocks(engine)
    assert got[1][0] == 0
    assert got[1][1] == 102 * SCALE  # clay settled at the spend time


async def test_deposit_is_capped(engine) -> None:
    await _make_villages(engine, 1, start=900)
    async with engine.begin() as conn:
        await stock.deposit(conn, 1, {"wood": 300 * SCALE, "iron": 5 * SCALE}, T0)
    got = await _stocks(engine)
    assert got[1][0] == CAP and got[1][2] == 905 * SCALE


async def test_rate_change_settles_first(engine) -> None:
    await _make_villages(engine, 1, start=0)
    hour = 3_600_000
    async with engine.begin() as conn:
        await stock.set_rates(conn, 1, {"wood": 100}, T0 + hour)
    async with engine.begin() as conn:
        await stock.settle(conn, [1], T0 + 2 * hour)
    assert (await _stocks(engine))[1][0] == (38 + 100) * SCALE


async def test_add_rates_settles_then_adds_and_gives_the_row_back(engine) -> None:
    """A change of production in one statement: settled at its time with the old rates, the
    deltas added to the rates as stored (no read first), the row returned as ``read``'s."""
    await _make_villages(engine, 1, start=0)
    hour = 3_600_000
    async with engine.begin() as conn:
        row = await stock.add_rates(
            conn, 1, {"wood": 62, "crop": -5}, T0 + hour, caps={"warehouse": 2_000}
        )
    assert list(row) == [c.key for c in stock.table.c]
    assert row["updated_ms"] == T0 + hour
    assert (row["wood"], row["wood_rate"]) == (38 * SCALE, 100)
    assert (row["crop"], row["crop_rate"]) == (0, -17)  # declined to 0 with the old rate
    assert row["clay_rate"] == RATES["clay"] + 1  # untouched
    assert row["warehouse_cap"] == 2_000 * SCALE
    async with engine.begin() as conn:
        assert (await stock.read(conn, 1)) == row
        # a row settled later than the change keeps its time and stock: only the rate moves
        late = await stock.add_rates(conn, 1, {"wood": 1}, T0)
        assert (late["updated_ms"], late["wood"], late["wood_rate"]) == (T0 + hour, 38 * SCALE, 101)
        with pytest.raises(KeyError, match="village 2 has no stock row"):
            await stock.add_rates(conn, 2, {"wood": 1}, T0)
        with pytest.raises(KeyError, match="unknown resource"):
            await stock.add_rates(conn, 1, {"gold": 1}, T0)
    with pytest.raises(ValueError, match="may not decline"):
        async with engine.begin() as conn:
            await stock.add_rates(conn, 1, {"iron": -10}, T0 + hour)
    async with engine.connect() as conn:
        assert (await stock.read(conn, 1))["iron_rate"] == RATES["iron"] + 1  # rolled back


async def test_add_rates_many_gives_what_one_add_rates_after_another_gives(
    engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many changes, each at its own time, a village changed three times among them: the
    rows are those of the changes made one by one, in order; on PostgreSQL in one statement
    per time a village recurs, not one per change."""
    await _make_villages(engine, 3, start=10)
    hour = 3_600_000
    changes = [
        RateChange(1, T0 + hour, {"wood": 5}),
        RateChange(2, T0 + hour, {"crop": -40}, {"granary": 3_000}),
        RateChange(1, T0 + 2 * hour, {"wood": 7, "clay": -1}, {"warehouse": 2_000}),
        RateChange(3, T0 + hour // 2, {}),
        RateChange(1, T0 + hour // 2, {"iron": 2}),  # earlier than the row: only the rate
    ]

    class Undo(Exception):
        pass

    one_by_one = []
    with pytest.raises(Undo):
        async with engine.begin() as conn:
            for ch in changes:
                row = await stock.add_rates(conn, ch.village_id, ch.deltas, ch.at_ms, ch.caps)
                one_by_one.append(row)
            raise Undo
    statements = 0
    counted = driver.rows

    async def counting(*args, **kwargs):
        nonlocal statements
        statements += 1
        return await counted(*args, **kwargs)

    monkeypatch.setattr(driver, "rows", counting)
    async with engine.begin() as conn:
        assert await stock.add_rates_many(conn, changes) == one_by_one
        assert statements == (3 if conn.dialect.name == "postgresql" else len(changes))
        assert await stock.add_rates_many(conn, []) == []
        with pytest.raises(KeyError, match="village 4 has no stock row"):
            await stock.add_rates_many(conn, [RateChange(1, T0, {}), RateChange(4, T0, {})])
        with pytest.raises(KeyError, match="unknown resource"):
            await stock.add_rates_many(conn, [RateChange(1, T0, {"gold": 1})])
    with pytest.raises(ValueError, match="may not decline"):
        async with engine.begin() as conn:
            await stock.add_rates_many(conn, [RateChange(2, T0, {"iron": -1_000})])


async def test_concurrent_spends_never_spend_twice(engine, settings) -> None:
    await _make_villages(engine, 1, start=100)  # 100 wood: exactly 10 spends of 10 fit
    sem = asyncio.Semaphore(50)

    async def one_spend() -> bool:
        async with sem, engine.begin() as conn:
            return await stock.spend(conn, 1, {"wood": 10 * SCALE}, T0) is not None

    results = await asyncio.gather(*(one_spend() for _ in range(50)))
    assert sum(results) == 10
    assert (await _stocks(engine))[1][0] == 0


async def test_tick_settles_no_village_past_the_earliest_pending_event(engine) -> None:
    """A pending event's follow-ups may change any village's production from its due time
    on: the tick stops there (the horizon), and holds the event's own village before it.
    A failing event holds only its own village; a dead one holds nothing (``db.events``)."""
    from db.models import ScheduledEvent

    await _make_villages(engine, 8, shards=1)

    async def pending(village_id: int, due_ms: int, **state: int) -> None:
        async with engine.begin() as conn:
            await conn.execute(delete(ScheduledEvent))
            await conn.execute(
                insert(ScheduledEvent).values(
                    id=village_id, kind="build_done", village_id=village_id, due_ms=due_ms,
                    priority=0, payload=b"", created_ms=T0, **state,
                )
            )  # fmt: skip

    async def tick(now_ms: int) -> dict[int, int]:
        async with engine.connect() as conn:
            await stock.tick_shard(conn, 0, now_ms)
            rows = await conn.execute(select(stock.c.village_id, stock.c.updated_ms))
            return dict(rows.all())  # type: ignore[arg-type]

    await pending(3, T0 + 500)
    updated = await tick(T0 + 1000)
    assert updated[3] == T0  # held until its event has run
    assert all(updated[v] == T0 + 500 for v in updated if v != 3)  # the horizon

    await pending(5, T0 + 1000, attempts=1)  # failing: it waits for a retry
    updated = await tick(T0 + 2000)
    assert updated[5] == T0 + 500 and updated[3] == T0 + 2000
    assert all(updated[v] == T0 + 2000 for v in updated if v != 5)

    await pending(5, T0 + 1000, attempts=5, dead_ms=T0 + 1500)  # dead: it waits for an operator
    updated = await tick(T0 + 3000)
    assert all(updated[v] == T0 + 3000 for v in updated)


async def test_read_gives_the_row_as_stored_by_column_name(engine) -> None:
    await _make_villages(engine, 2, start=7)
    async with engine.connect() as conn:
        row = await stock.read(conn, 2)
        with pytest.raises(KeyError, match="village 3 has no stock row"):
            await stock.read(conn, 3)
    assert list(row) == [c.key for c in stock.table.c]
    assert row["village_id"] == 2 and row["updated_ms"] == T0
    assert row["wood"] == 7 * SCALE and row["crop_rate"] == RATES["crop"] + 2


async def test_spend_at_holds_only_on_the_stock_as_a_read_settled_it(engine) -> None:
    """A command's read settles the stock at the horizon, or at the row's own later time;
    its closing statement spends at exactly that time, and not once the row moved past it."""
    await _make_villages(engine, 1, start=0)
    hour = 3_600_000
    vid, now = bindparam("v", type_=BigInteger), bindparam("now", type_=BigInteger)
    async with engine.connect() as conn:
        dialect = conn.dialect.name
        read = union_all(*stock.settled_rows("s", vid, now, dialect))
        seen = {r[1]: (r[2], r[3]) for r in await conn.execute(read, {"v": 1, "now": T0 + hour})}
        assert seen["wood"] == (38 * SCALE, T0 + hour)
        # a row settled later than the horizon: its own time, its stock as stored
        assert {r[3] for r in await conn.execute(read, {"v": 1, "now": T0 - 5})} == {T0}
    spend = {"wood": 38 * SCALE}
    async with engine.begin() as conn:
        assert not (
            await conn.execute(*stock.spend_at(1, {"wood": 39 * SCALE}, T0 + hour, dialect))
        ).all()
        assert (await conn.execute(*stock.spend_at(1, spend, T0 + hour, dialect))).all()
        # settled at T0 + hour now: a read from before that is stale
        assert not (
            await conn.execute(*stock.spend_at(1, {"wood": 0}, T0 + hour - 1, dialect))
        ).all()
    got = await _stocks(engine)
    assert got[1][0] == 0 and got[1][1] == 102 * SCALE
