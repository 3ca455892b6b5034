"""Ships: cost, combat values, speed, cargo and fuel (OGame's figures); pure rules.

Hull points are a tenth of the structure (metal + crystal cost), as in OGame.
Research adds 10 % per level: combustion drive to speed, weapons, shielding
and armour technology to attack, shield and hull.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from examples.spacegame.economy import RESOURCES, check_requirements
from examples.spacegame.errors import InvalidFleet, UnknownName

MAX_ORDER = 10_000  # ships per shipyard order
MAX_FLEET = 50_000  # ships per fleet: a battle simulates every ship


@dataclass(frozen=True)
class Ship:
    name: str
    cost: Mapping[str, int]
    shield: int
    attack: int
    speed: int
    cargo: int
    fuel: int  # deuterium per flight unit, see travel.fuel
    requires: Mapping[str, int] = field(default_factory=dict)

    @property
    def hull(self) -> int:
        return (self.cost["metal"] + self.cost["crystal"]) // 10


def _s(name: str, m: int, c: int, d: int, *stats: int, **requires: int) -> Ship:
    shield, attack, speed, cargo, fuel = stats
    cost = {"metal": m, "crystal": c, "deuterium": d}
    return Ship(name, cost, shield, attack, speed, cargo, fuel, requires)


SHIPS: Mapping[str, Ship] = {
    s.name: s
    for s in (
        _s("small_cargo", 2000, 2000, 0, 10, 5, 5000, 5000, 10, shipyard=2, combustion_drive=2),
        _s("light_fighter", 3000, 1000, 0, 10, 50, 12500, 50, 20, shipyard=1, combustion_drive=1),
        _s("heavy_fighter", 6000, 4000, 0, 25, 150, 10000, 100, 75, shipyard=3, armour_tech=2),
        _s("cruiser", 20000, 7000, 2000, 50, 400, 15000, 800, 300, shipyard=5, weapons_tech=3),
    )
}


def ship(name: str) -> Ship:
    try:
        return SHIPS[name]
    except KeyError:
        raise UnknownName("no such ship", name=name[:40]) from None


def check_can_build(name: str, buildings: Mapping[str, int], techs: Mapping[str, int]) -> Ship:
    spec = ship(name)
    check_requirements(spec.requires, buildings, techs)
    return spec


def validate_fleet(ships: Mapping[str, int]) -> dict[str, int]:
    """The fleet without zero counts; raises InvalidFleet for unknown ships, bad or no counts."""
    fleet: dict[str, int] = {}
    for name, count in ships.items():
        ship(name)
        if not isinstance(count, int) or count < 0:
            raise InvalidFleet("ship counts are whole numbers >= 0", ship=name)
        if count:
            fleet[name] = count
    if not fleet:
        raise InvalidFleet("a fleet needs at least one ship")
    if sum(fleet.values()) > MAX_FLEET:
        raise InvalidFleet(f"a fleet has at most {MAX_FLEET} ships")
    return fleet


def cargo_capacity(ships: Mapping[str, int]) -> int:
    return sum(SHIPS[n].cargo * c for n, c in ships.items())


def fleet_speed(ships: Mapping[str, int], combustion_level: int) -> int:
    """The slowest ship's speed, plus 10 % per combustion drive level."""
    slowest = min(SHIPS[n].speed for n, c in ships.items() if c > 0)
    return slowest * (10 + combustion_level) // 10


def fleet_fuel_rate(ships: Mapping[str, int]) -> int:
    return sum(SHIPS[n].fuel * c for n, c in ships.items())


def total_resources(cargo: Mapping[str, int]) -> int:
    return sum(cargo.get(r, 0) for r in RESOURCES)
