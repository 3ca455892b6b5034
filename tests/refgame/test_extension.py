"""The README's extension example works: a new table row flows through every rule."""

from __future__ import annotations

import pytest

from refgame import buildings, units
from refgame.battle import resolve_battle
from refgame.buildings import build_cost
from refgame.resources import Cost
from refgame.travel import plan_march
from refgame.units import train_duration_ms


@pytest.fixture
def scout(monkeypatch: pytest.MonkeyPatch) -> str:
    spec = units.UnitSpec(
        "equites_legati", "cavalry", attack=0, defense_infantry=20, defense_cavalry=10,
        speed=16, carry=0, upkeep=2, cost=Cost(140, 160, 20, 40), time_s=1360, barracks_level=5,
    )  # fmt: skip
    monkeypatch.setitem(units.UNITS, spec.name, spec)
    wall = buildings.BuildingSpec(
        "wall", max_level=20, cost=Cost(50, 60, 120, 50), cost_factor=1.25,
        time_s=1200, time_factor=1.2,
    )  # fmt: skip
    monkeypatch.setitem(buildings.BUILDINGS, "wall", wall)
    buildings.validate_tables()
    units.validate_tables()
    return spec.name


def test_a_new_unit_and_a_changed_building(scout: str) -> None:
    assert train_duration_ms(scout, 1, 5, 1) == 897_600  # 1360 s × 66 % at barracks 5
    plan = plan_march("reinforce", {scout: 2}, (0, 0), (0, 16), 1, 0, 1)
    assert plan.arrive_ms == 3_600_000
    r = resolve_battle({"legionnaire": 10}, {scout: 5}, 0, "attack", 1)
    assert r.defenders == {scout: 5}
    assert build_cost("wall", 1) == Cost(50, 60, 120, 50)
