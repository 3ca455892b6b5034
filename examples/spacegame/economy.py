"""Buildings, research, production, storage and times: pure rules, no I/O.

Costs grow by a factor per level (``cost(L) = base × factor^(L-1)``, rounded
down), production and storage follow OGame's formulas on exact fractions
(storage uses ``exp``; its result is floored to a multiple of 5,000, far from
any rounding edge). World speed multiplies production and divides every
duration. Rates are whole units per hour and never negative: a deuterium
synthesizer on a planet hotter than 360 °C produces nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from examples.spacegame.errors import MaxLevel, RequirementMissing, UnknownName

RESOURCES: tuple[str, ...] = ("metal", "crystal", "deuterium")
MS_PER_HOUR = 3_600_000
MAX_LEVEL = 40
MIN_DURATION_MS = 1_000  # nothing finishes in the same second it starts
BASE_RATES: Mapping[str, int] = {"metal": 30, "crystal": 15, "deuterium": 0}  # a bare planet
TEMPERATURE_MIN, TEMPERATURE_MAX = -40, 80  # °C, a planet's maximum temperature

Cost = Mapping[str, int]


@dataclass(frozen=True)
class Upgradable:
    """A building or a research: its level-1 cost, growth factor and requirements."""

    name: str
    base_cost: Cost
    factor: Fraction
    requires: Mapping[str, int] = field(default_factory=dict)

    def cost(self, level: int) -> dict[str, int]:
        """What raising it to ``level`` (from ``level - 1``) costs."""
        if not 1 <= level <= MAX_LEVEL:
            raise MaxLevel(f"{self.name} has levels 1 to {MAX_LEVEL}", level=level)
        grow = self.factor ** (level - 1)
        return {r: math.floor(self.base_cost.get(r, 0) * grow) for r in RESOURCES}


def _u(name: str, m: int, c: int, d: int, factor: str, **requires: int) -> Upgradable:
    return Upgradable(name, {"metal": m, "crystal": c, "deuterium": d}, Fraction(factor), requires)


BUILDINGS: Mapping[str, Upgradable] = {
    b.name: b
    for b in (
        _u("metal_mine", 60, 15, 0, "3/2"),
        _u("crystal_mine", 48, 24, 0, "8/5"),
        _u("deuterium_synthesizer", 225, 75, 0, "3/2"),
        _u("metal_storage", 1000, 0, 0, "2"),
        _u("crystal_storage", 1000, 500, 0, "2"),
        _u("deuterium_tank", 1000, 1000, 0, "2"),
        _u("robotics_factory", 400, 120, 200, "2"),
        _u("shipyard", 400, 200, 100, "2", robotics_factory=1),
        _u("research_lab", 200, 400, 200, "2"),
    )
}
STORAGE_OF: Mapping[str, str] = {
    "metal": "metal_storage",
    "crystal": "crystal_storage",
    "deuterium": "deuterium_tank",
}

# research belongs to the player; every level adds 10 % (drive: speed, weapons/shielding/armour)
RESEARCH: Mapping[str, Upgradable] = {
    t.name: t
    for t in (
        _u("combustion_drive", 400, 0, 600, "2", research_lab=1),
        _u("weapons_tech", 800, 200, 0, "2", research_lab=1),
        _u("shielding_tech", 200, 600, 0, "2", research_lab=1),
        _u("armour_tech", 1000, 0, 0, "2", research_lab=1),
    )
}


def building(name: str) -> Upgradable:
    try:
        return BUILDINGS[name]
    except KeyError:
        raise UnknownName("no such building", name=name[:40]) from None


def research(name: str) -> Upgradable:
    try:
        return RESEARCH[name]
    except KeyError:
        raise UnknownName("no such research", name=name[:40]) from None


def check_requirements(
    requires: Mapping[str, int], buildings: Mapping[str, int], techs: Mapping[str, int]
) -> None:
    """Raise RequirementMissing naming the first unmet requirement (buildings or research)."""
    for name, level in requires.items():
        have = buildings.get(name, 0) if name in BUILDINGS else techs.get(name, 0)
        if have < level:
            raise RequirementMissing(f"needs {name} level {level}", name=name, level=level)


def planet_temperature(place_id: int) -> int:
    """A planet's maximum temperature, fixed by its id (Knuth's multiplicative hash)."""
    span = TEMPERATURE_MAX - TEMPERATURE_MIN + 1
    return TEMPERATURE_MIN + ((place_id * 2_654_435_761) >> 8) % span


def production(levels: Mapping[str, int], temperature: int, world_speed: float) -> dict[str, int]:
    """Units per hour of each resource: the planet's base plus its mines, times world speed."""
    grow = Fraction(11, 10)
    m, c, d = (levels.get(b, 0) for b in ("metal_mine", "crystal_mine", "deuterium_synthesizer"))
    raw = {
        "metal": BASE_RATES["metal"] + 30 * m * grow**m,
        "crystal": BASE_RATES["crystal"] + 20 * c * grow**c,
        # OGame's 1.44 - 0.004 × T, as (360 - T) / 250; never below zero
        "deuterium": max(Fraction(0), 10 * d * grow**d * Fraction(360 - temperature, 250)),
    }
    speed = Fraction(world_speed)
    return {r: math.floor(raw[r] * speed) for r in RESOURCES}


def storage_capacity(level: int) -> int:
    """Units a storage of ``level`` holds (level 0: the planet's own 10,000)."""
    return 5000 * math.floor(2.5 * math.exp(20 * level / 33))


def capacities(levels: Mapping[str, int]) -> dict[str, int]:
    """Cap of each resource (each has its own storage building)."""
    return {r: storage_capacity(levels.get(STORAGE_OF[r], 0)) for r in RESOURCES}


def _duration_ms(hours: Fraction, world_speed: float) -> int:
    return max(MIN_DURATION_MS, math.ceil(hours * MS_PER_HOUR / Fraction(world_speed)))


def build_time_ms(cost: Cost, robotics_level: int, world_speed: float) -> int:
    """OGame: (metal + crystal) / (2,500 × (1 + robotics factory)) hours."""
    hours = Fraction(cost["metal"] + cost["crystal"], 2500 * (1 + robotics_level))
    return _duration_ms(hours, world_speed)


def research_time_ms(cost: Cost, lab_level: int, world_speed: float) -> int:
    """OGame: (metal + crystal) / (1,000 × (1 + research lab)) hours."""
    hours = Fraction(cost["metal"] + cost["crystal"], 1000 * (1 + lab_level))
    return _duration_ms(hours, world_speed)


def ship_time_ms(cost: Cost, count: int, shipyard_level: int, world_speed: float) -> int:
    """A shipyard order of ``count`` ships: (metal + crystal) / (2,500 × (1 + shipyard)) each."""
    hours = Fraction(count * (cost["metal"] + cost["crystal"]), 2500 * (1 + shipyard_level))
    return _duration_ms(hours, world_speed)


def times(cost: Cost, n: int) -> dict[str, int]:
    return {r: cost.get(r, 0) * n for r in RESOURCES}
