from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.amounts import SCALE, accrue, to_fixed
from refgame.buildings import FIELD_PRODUCTION, STORAGE_CAPACITY
from refgame.economy import (
    deposit,
    field_production,
    production_rates,
    starvation_time_ms,
    starve,
    stock_at,
    storage_capacity,
    total_upkeep,
    village_caps,
    village_rates,
    visible_stock,
    withdraw,
)
from refgame.errors import InsufficientResources, InvalidQuantity
from refgame.resources import RESOURCES, Cost
from refgame.units import UNITS

FIELDS = {"woodcutter": 1, "clay_pit": 2, "iron_mine": 3, "cropland": 4}


def test_field_production_follows_the_table_and_speed() -> None:
    assert [field_production(lvl, 1) for lvl in range(len(FIELD_PRODUCTION))] == list(
        FIELD_PRODUCTION
    )
    assert field_production(1, 3) == 3 * FIELD_PRODUCTION[1]
    assert field_production(0, 1.5) == 8  # 5 × 1.5 = 7.5 rounds half up
    with pytest.raises(ValueError):
        field_production(-1, 1)


def test_village_rates_net_crop_of_upkeep() -> None:
    gross = production_rates(FIELDS, 2)
    assert gross == {
        r: 2 * FIELD_PRODUCTION[lvl] for r, lvl in zip(RESOURCES, (1, 2, 3, 4), strict=True)
    }
    net = village_rates(FIELDS, 500, 2)
    assert net["crop"] == gross["crop"] - 500 < 0  # may be negative
    assert {r: net[r] for r in ("wood", "clay", "iron")} == {
        r: gross[r] for r in ("wood", "clay", "iron")
    }
    assert village_rates({}, 0, 1) == {r: FIELD_PRODUCTION[0] for r in RESOURCES}


def test_caps_by_level() -> None:
    assert village_caps({"warehouse": 3, "granary": 0}) == (
        STORAGE_CAPACITY[3],
        STORAGE_CAPACITY[0],
    )
    assert storage_capacity(99) == STORAGE_CAPACITY[-1]


@given(
    stock=st.integers(0, 10**6),
    rate=st.integers(-(10**5), 10**5),
    cap_units=st.integers(0, 10**6),
    cuts=st.lists(st.integers(0, 10**8), max_size=20),
    total=st.integers(0, 10**8),
)
def test_accrue_split_at_any_ticks_equals_accrue_once(
    stock: int, rate: int, cap_units: int, cuts: list[int], total: int
) -> None:
    cap = to_fixed(cap_units)
    start = min(to_fixed(stock), cap)
    points = sorted({c for c in cuts if c <= total} | {total})
    value, t = start, 0
    for p in points:
        value = accrue(value, rate, p - t, cap)
        value = accrue(value, rate, 0, cap)  # a doubled tick changes nothing
        t = p
    assert value == accrue(start, rate, total, cap)


def _row(now: int, **over: int) -> dict[str, int]:
    row = {"updated_ms": now, "warehouse_cap": to_fixed(1000), "granary_cap": to_fixed(500)}
    for r in RESOURCES:
        row[r] = to_fixed(100)
        row[f"{r}_rate"] = 100
    row.update(over)
    return row


def test_stock_at_interpolates_and_caps() -> None:
    now = 1_000_000
    row = _row(now, crop_rate=-50)
    one_hour = stock_at(row, now + 3_600_000)
    assert visible_stock(one_hour) == {"wood": 200, "clay": 200, "iron": 200, "crop": 50}
    much_later = stock_at(row, now + 100 * 3_600_000)
    assert visible_stock(much_later) == {"wood": 1000, "clay": 1000, "iron": 1000, "crop": 0}
    # the exact fixed-point value, not a rounded one
    assert stock_at(row, now + 1)["wood"] == to_fixed(100) + 100
    assert stock_at(row, now - 5) == {r: row[r] for r in RESOURCES}


def test_deposit_overflow_is_lost() -> None:
    stock = {r: to_fixed(900) for r in RESOURCES}
    after = deposit(stock, {"wood": 50, "clay": 500, "crop": 1}, to_fixed(1000), to_fixed(900))
    assert visible_stock(after) == {"wood": 950, "clay": 1000, "iron": 900, "crop": 900}
    with pytest.raises(InvalidQuantity):
        deposit(stock, {"wood": -1}, to_fixed(1000), to_fixed(1000))


def test_withdraw() -> None:
    stock = {r: to_fixed(100) + 7 for r in RESOURCES}
    after = withdraw(stock, Cost(100, 0, 1, 0))
    assert after["wood"] == 7 and after["iron"] == to_fixed(99) + 7
    with pytest.raises(InsufficientResources):
        withdraw(stock, Cost(101, 0, 0, 0))


def test_starvation_time() -> None:
    assert starvation_time_ms(to_fixed(100), 0, 5) is None
    assert starvation_time_ms(to_fixed(100), 10, 5) is None
    assert starvation_time_ms(0, -1, 5) == 5
    assert starvation_time_ms(to_fixed(100), -100, 0) == 3_600_000  # one hour exactly
    assert starvation_time_ms(10, -3, 0) == 4  # 10 / 3 = 3.33 ms, rounded up


@given(st.integers(0, 10**12), st.integers(-(10**6), -1), st.integers(0, 10**12))
def test_starvation_time_is_the_first_empty_ms(crop: int, rate: int, now: int) -> None:
    t = starvation_time_ms(crop, rate, now)
    assert t is not None
    cap = crop + SCALE
    assert accrue(crop, rate, t - now, cap) == 0
    if t > now:
        assert accrue(crop, rate, t - now - 1, cap) > 0


def test_starve_kills_highest_upkeep_first() -> None:
    troops = {"legionnaire": 10, "equites_imperatoris": 2, "equites_caesaris": 1}
    # deficit 5: one equites_caesaris (4), then one equites_imperatoris (3)
    assert starve(troops, 5) == {"equites_caesaris": 1, "equites_imperatoris": 1}
    assert starve(troops, 0) == {}
    assert starve(troops, -3) == {}
    # a deficit larger than all upkeep kills everybody
    assert starve(troops, 10**6) == troops


units = st.sampled_from(sorted(UNITS))


@given(st.dictionaries(units, st.integers(0, 1000)), st.integers(1, 10**5))
def test_starve_restores_a_non_negative_crop_rate(troops: dict[str, int], deficit: int) -> None:
    deaths = starve(troops, deficit)
    assert all(0 < deaths[u] <= troops[u] for u in deaths)
    killed = total_upkeep(deaths)
    if killed < deficit:  # only when nobody is left to starve
        assert deaths == {u: n for u, n in troops.items() if n > 0}
    else:
        # minimal: sparing one unit of the last kind hit would leave a deficit
        last = max(deaths, key=lambda u: (-UNITS[u].upkeep, u))  # starve's order
        assert killed - UNITS[last].upkeep < deficit
