"""The space game's economy, ships and flight rules (pure functions)."""

from __future__ import annotations

import pytest

from examples.spacegame import economy, ships, travel
from examples.spacegame.errors import (
    InvalidFleet,
    MaxLevel,
    NotRecallable,
    RequirementMissing,
    UnknownName,
)


def test_costs_grow_by_the_factor() -> None:
    mine = economy.building("metal_mine")
    assert mine.cost(1) == {"metal": 60, "crystal": 15, "deuterium": 0}
    assert mine.cost(2) == {"metal": 90, "crystal": 22, "deuterium": 0}
    assert economy.building("crystal_mine").cost(3) == {"metal": 122, "crystal": 61, "deuterium": 0}
    with pytest.raises(MaxLevel):
        mine.cost(economy.MAX_LEVEL + 1)
    with pytest.raises(UnknownName):
        economy.building("barracks")


def test_production_by_level_and_world_speed() -> None:
    assert economy.production({}, 20, 1.0) == {"metal": 30, "crystal": 15, "deuterium": 0}
    # OGame: a level-1 metal mine makes 30 × 1 × 1.1 = 33 on top of the base 30
    assert economy.production({"metal_mine": 1}, 20, 1.0)["metal"] == 63
    assert economy.production({"metal_mine": 1}, 20, 2.0)["metal"] == 126
    assert economy.production({"crystal_mine": 2}, 20, 1.0)["crystal"] == 15 + 48


def test_deuterium_depends_on_temperature_and_is_never_negative() -> None:
    cold = economy.production({"deuterium_synthesizer": 5}, -40, 1.0)["deuterium"]
    hot = economy.production({"deuterium_synthesizer": 5}, 80, 1.0)["deuterium"]
    assert cold > hot > 0
    assert economy.production({"deuterium_synthesizer": 5}, 400, 1.0)["deuterium"] == 0


def test_temperature_is_fixed_by_the_planet() -> None:
    temps = {economy.planet_temperature(i) for i in range(1, 500)}
    assert min(temps) >= economy.TEMPERATURE_MIN and max(temps) <= economy.TEMPERATURE_MAX
    assert len(temps) > 50
    assert economy.planet_temperature(7) == economy.planet_temperature(7)


def test_each_resource_has_its_own_storage() -> None:
    assert economy.storage_capacity(0) == 10_000
    assert economy.storage_capacity(1) == 20_000
    assert economy.storage_capacity(2) == 40_000
    caps = economy.capacities({"crystal_storage": 1})
    assert caps == {"metal": 10_000, "crystal": 20_000, "deuterium": 10_000}


def test_times_shrink_with_factories_and_world_speed() -> None:
    cost = {"metal": 2500, "crystal": 2500, "deuterium": 0}
    assert economy.build_time_ms(cost, 0, 1.0) == 2 * 3_600_000
    assert economy.build_time_ms(cost, 1, 1.0) == 3_600_000
    assert economy.build_time_ms(cost, 1, 10.0) == 360_000
    assert economy.research_time_ms(cost, 4, 1.0) == 3_600_000
    assert economy.ship_time_ms(cost, 3, 2, 1.0) == 2 * 3_600_000
    assert economy.build_time_ms({"metal": 1, "crystal": 0}, 0, 1e6) == economy.MIN_DURATION_MS


def test_requirements() -> None:
    shipyard = economy.building("shipyard")
    with pytest.raises(RequirementMissing):
        economy.check_requirements(shipyard.requires, {}, {})
    economy.check_requirements(shipyard.requires, {"robotics_factory": 1}, {})
    with pytest.raises(RequirementMissing):
        ships.check_can_build("light_fighter", {"shipyard": 1}, {})
    ships.check_can_build("light_fighter", {"shipyard": 1}, {"combustion_drive": 1})


def test_fleet_validation_cargo_and_speed() -> None:
    fleet = ships.validate_fleet({"small_cargo": 2, "light_fighter": 0, "cruiser": 1})
    assert fleet == {"small_cargo": 2, "cruiser": 1}
    assert ships.cargo_capacity(fleet) == 10_800
    assert ships.fleet_speed(fleet, 0) == 5000
    assert ships.fleet_speed(fleet, 3) == 6500
    for bad in ({}, {"light_fighter": 0}, {"light_fighter": -1}, {"x": 1}):
        with pytest.raises((InvalidFleet, UnknownName)):
            ships.validate_fleet(bad)
    with pytest.raises(InvalidFleet):
        ships.validate_fleet({"light_fighter": ships.MAX_FLEET + 1})


def test_distance_and_flight_time() -> None:
    assert travel.distance((0, 0), (3, 4)) == 1500
    assert travel.distance((0, 0), (1, 1)) == 1200  # sqrt(2) rounds up to 2 fields
    with pytest.raises(InvalidFleet):
        travel.distance((5, 5), (5, 5))
    # 10 + 350 × sqrt(10 × 1500 / 12500) = 10 + 350 × 1.095445 s at 100 %
    full = travel.flight_ms(1500, 12500, 100, 1.0)
    assert full == 10_000 + 383_406
    assert travel.flight_ms(1500, 12500, 50, 1.0) > full
    assert travel.flight_ms(1500, 12500, 100, 2.0) == (full + 1) // 2
    with pytest.raises(InvalidFleet):
        travel.flight_ms(1500, 12500, 55, 1.0)


def test_fuel() -> None:
    # 20 × 1500 × 4 / 35,000 ≈ 3.43: 1 + 4
    assert travel.fuel({"light_fighter": 1}, 1500, 100) == 5
    fighter = {"light_fighter": 1}
    assert travel.fuel(fighter, 1500, 10) < travel.fuel(fighter, 1500, 100)


def test_recall_turns_around_where_the_fleet_is() -> None:
    leg = travel.recall(1_000, 11_000, 4_000)
    assert (leg.depart_ms, leg.arrive_ms) == (4_000, 7_000)
    assert travel.recall(1_000, 11_000, 1_000).arrive_ms == 1_001
    for late in (11_000, 12_000, 999):
        with pytest.raises(NotRecallable):
            travel.recall(1_000, 11_000, late)
    home = travel.way_home(1_000, 11_000)
    assert (home.depart_ms, home.arrive_ms) == (11_000, 21_000)
