from __future__ import annotations

import pytest

from common.amounts import to_fixed
from db.worldgen import stock_row
from refgame.buildings import BUILDINGS
from refgame.economy import total_upkeep
from refgame.resources import RESOURCES, STOCKS
from refgame.world import STARTING_TROOPS, village_caps, village_rates, village_template


@pytest.mark.parametrize("speed", [0.1, 0.5, 1, 1.5, 3, 100])
def test_template_is_consistent_with_the_rules(speed: float) -> None:
    t = village_template(speed)
    assert set(t.buildings) == set(BUILDINGS)  # one row per kind, level 0 when not built
    assert t.rates == village_rates(t.buildings, total_upkeep(t.troops), speed)
    assert (t.warehouse_cap, t.granary_cap) == village_caps(t.buildings)
    assert all(0 < t.stock[r] <= t.warehouse_cap for r in RESOURCES)
    assert t.rates["crop"] >= 0  # bots never start starving
    assert all(n > 0 for n in t.troops.values())
    for r in RESOURCES:
        assert isinstance(t.rates[r], int)


def test_bots_get_the_starting_troops_at_normal_speed() -> None:
    assert village_template(1).troops == STARTING_TROOPS
    assert village_template(1, with_troops=False).troops == {}
    slow = village_template(0.1)
    assert total_upkeep(slow.troops) < total_upkeep(STARTING_TROOPS)


def test_template_fits_the_world_generator() -> None:
    row = stock_row(STOCKS, 7, 3, 1_000, village_template(2))
    assert row["wood"] == to_fixed(750)
    assert row["warehouse_cap"] == to_fixed(village_template(2).warehouse_cap)
    assert row["crop_rate"] == village_template(2).rates["crop"]
