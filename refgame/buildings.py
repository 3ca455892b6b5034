"""Buildings: the table of kinds, what each level does, costs, durations and the build queue.

A village has one ``buildings`` row per kind with its level (a missing row is
level 0). The four resource fields are buildings too: one row per resource
stands for all of the village's fields of that resource.

Costs and durations grow geometrically with the level::

    cost(L)     = round_half_up(cost_1 × cost_factor^(L-1))                  whole units
    duration(L) = ceil(time_1 × time_factor^(L-1) × main_building_pct / 100 / speed)   ms

The build queue: at most ``BUILD_QUEUE_LIMIT`` orders per village, running one
after another (an order starts when the previous one is done). Resources are
paid when the order is placed. Prerequisites count built levels only; the
maximum level counts queued levels too.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from refgame.errors import MaxLevel, PrerequisiteMissing, QueueFull, UnknownBuilding
from refgame.resources import (
    MS_PER_SECOND,
    Cost,
    exact,
    round_half_up,
    scale_duration_ms,
)


@dataclass(frozen=True)
class BuildingSpec:
    """One row of the buildings table; ``cost`` and ``time_s`` are those of level 1."""

    kind: str
    max_level: int
    cost: Cost
    cost_factor: float
    time_s: int  # at main building level 1 and world speed 1
    time_factor: float
    requires: Mapping[str, int] = field(default_factory=dict)  # kind -> built level


# The resource field of each resource.
FIELD_KINDS: dict[str, str] = {
    "wood": "woodcutter",
    "clay": "clay_pit",
    "iron": "iron_mine",
    "crop": "cropland",
}


def _field(kind: str, cost: Cost, time_s: int) -> BuildingSpec:
    return BuildingSpec(kind, 10, cost, 1.67, time_s, 1.5)


def _building(
    kind: str, cost: Cost, time_s: int, requires: Mapping[str, int] | None = None
) -> BuildingSpec:
    return BuildingSpec(kind, 20, cost, 1.28, time_s, 1.2, requires or {})


BUILDINGS: dict[str, BuildingSpec] = {
    s.kind: s
    for s in (
        _field("woodcutter", Cost(40, 100, 50, 60), 260),
        _field("clay_pit", Cost(80, 40, 80, 50), 220),
        _field("iron_mine", Cost(100, 80, 30, 60), 450),
        _field("cropland", Cost(70, 90, 70, 20), 150),
        _building("main_building", Cost(70, 40, 60, 20), 1500),
        _building("warehouse", Cost(130, 160, 90, 40), 1600, {"main_building": 1}),
        _building("granary", Cost(80, 100, 70, 20), 1280, {"main_building": 1}),
        _building(
            "barracks", Cost(210, 140, 260, 120), 2000, {"main_building": 3, "rally_point": 1}
        ),
        _building("wall", Cost(70, 90, 170, 70), 1600),
        _building("rally_point", Cost(110, 160, 90, 70), 1000),
        # trains settlers (refgame.units.SETTLER_RESIDENCE_LEVEL)
        _building("residence", Cost(580, 460, 350, 180), 2000, {"main_building": 3}),
        _building(
            "marketplace",
            Cost(80, 70, 120, 70),
            1800,
            {"main_building": 3, "warehouse": 1, "granary": 1},
        ),
    )
}

# What levels do. Index = level; levels past the end of a table use its last entry.
# Production of a resource field, whole units per hour at world speed 1 (Travian's
# one-field table × 5, as one row stands for five fields).
FIELD_PRODUCTION: tuple[int, ...] = (5, 25, 45, 75, 110, 165, 250, 350, 500, 725, 1000)
# Capacity of the warehouse (wood, clay, iron each) and of the granary (crop), whole units.
STORAGE_CAPACITY: tuple[int, ...] = (
    800, 1200, 1700, 2300, 3100, 4000, 5000, 6300, 7800, 9600, 11800,
    14400, 17600, 21400, 25900, 31300, 37900, 45700, 55100, 66400, 80000,
)  # fmt: skip
# Defense bonus of the wall, percent (≈ 1.03^level − 1).
WALL_DEFENSE_PCT: tuple[int, ...] = (
    0, 3, 6, 9, 13, 16, 19, 23, 27, 30, 34, 38, 43, 47, 51, 56, 60, 65, 70, 75, 81,
)  # fmt: skip
# Build time in percent of the base, by main building level (≈ 0.964^(level−1)).
MAIN_BUILDING_TIME_PCT: tuple[int, ...] = (
    100, 100, 96, 93, 90, 86, 83, 80, 77, 75, 72, 69, 67, 64, 62, 60, 58, 56, 54, 52, 50,
)  # fmt: skip
# Training time in percent of the base, by barracks level (≈ 0.9^(level−1)); 0 = cannot train.
BARRACKS_TIME_PCT: tuple[int, ...] = (
    0, 100, 90, 81, 73, 66, 59, 53, 48, 43, 39, 35, 31, 28, 25, 23, 21, 19, 17, 15, 14,
)  # fmt: skip

BUILD_QUEUE_LIMIT = 2  # orders per village, the running one included


class QueuedBuild(Protocol):
    """A build order waiting or running; ``db.models.BuildOrder`` rows fit."""

    @property
    def kind(self) -> str: ...
    @property
    def target_level(self) -> int: ...
    @property
    def done_ms(self) -> int: ...


@dataclass(frozen=True)
class BuildOrderInfo:
    """A queued build order when there is no DB row at hand."""

    kind: str
    target_level: int
    done_ms: int


@dataclass(frozen=True)
class BuildPlan:
    """What ``plan_build`` decided: pay ``cost`` now; the level is reached at ``done_ms``."""

    kind: str
    target_level: int
    cost: Cost
    start_ms: int
    done_ms: int


def level_value(table: Sequence[int], level: int) -> int:
    """``table[level]``, with levels past the end reading the last entry."""
    return table[max(0, min(level, len(table) - 1))]


def building_spec(kind: str) -> BuildingSpec:
    try:
        return BUILDINGS[kind]
    except (KeyError, TypeError):
        known = ", ".join(BUILDINGS)
        raise UnknownBuilding(
            f"unknown building {kind!r}; known buildings: {known}", kind=str(kind)
        ) from None


def _check_level(spec: BuildingSpec, level: int) -> None:
    if level < 1:
        raise ValueError(f"building levels start at 1, got {level}")
    if level > spec.max_level:
        raise MaxLevel(
            f"{spec.kind} cannot go past level {spec.max_level}",
            kind=spec.kind,
            max_level=spec.max_level,
        )


def build_cost(kind: str, level: int) -> Cost:
    """The cost of raising ``kind`` to ``level``, whole units rounded half up."""
    spec = building_spec(kind)
    _check_level(spec, level)
    return _grown_cost(spec.cost, spec.cost_factor, level)


# Exact fractions are slow and every command asks again: the arithmetic is cached by its
# inputs' values (not by kind), so a changed table never meets a stale answer.
@lru_cache(maxsize=4096)
def _grown_cost(base: Cost, factor: float, level: int) -> Cost:
    growth = exact(factor) ** (level - 1)
    return Cost.of({r: round_half_up(n * growth) for r, n in base.as_dict().items()})


def build_duration_ms(kind: str, level: int, main_building_level: int, world_speed: float) -> int:
    """How long raising ``kind`` to ``level`` takes, in ms (rounded up, at least 1)."""
    spec = building_spec(kind)
    _check_level(spec, level)
    pct = level_value(MAIN_BUILDING_TIME_PCT, main_building_level)
    return _build_ms(spec.time_s, spec.time_factor, level, pct, world_speed)


@lru_cache(maxsize=16384)
def _build_ms(time_s: int, factor: float, level: int, pct: int, world_speed: float) -> int:
    base_ms = time_s * MS_PER_SECOND * exact(factor) ** (level - 1) * pct / 100
    return scale_duration_ms(base_ms, world_speed)


def queued_level(kind: str, buildings: Mapping[str, int], queued: Sequence[QueuedBuild]) -> int:
    """The level ``kind`` will have once the built level and all queued orders are done."""
    levels = [buildings.get(kind, 0)] + [o.target_level for o in queued if o.kind == kind]
    return max(levels)


def can_build(kind: str, buildings: Mapping[str, int], queued: Sequence[QueuedBuild] = ()) -> int:
    """The level an order for ``kind`` would reach now; raises the rule it breaks otherwise.

    Checks, in order: the kind exists, the queue has room, the next level
    (after queued ones) is within the maximum, the prerequisites are built.
    """
    spec = building_spec(kind)
    if len(queued) >= BUILD_QUEUE_LIMIT:
        raise QueueFull(
            f"the build queue holds at most {BUILD_QUEUE_LIMIT} orders; "
            "wait for the running one to finish",
            limit=BUILD_QUEUE_LIMIT,
        )
    target = queued_level(kind, buildings, queued) + 1
    if target > spec.max_level:
        raise MaxLevel(
            f"{kind} is already at (or queued to) its maximum level {spec.max_level}",
            kind=kind,
            max_level=spec.max_level,
        )
    missing = {k: n for k, n in spec.requires.items() if buildings.get(k, 0) < n}
    if missing:
        need = ", ".join(f"{k} level {n}" for k, n in missing.items())
        raise PrerequisiteMissing(f"{kind} needs {need} first", kind=kind, requires=missing)
    return target


def build_start_ms(queued: Sequence[QueuedBuild], now_ms: int) -> int:
    """When a new order starts: now, or when the last queued order is done."""
    return max([now_ms] + [o.done_ms for o in queued])


def plan_build(
    kind: str,
    buildings: Mapping[str, int],
    queued: Sequence[QueuedBuild],
    now_ms: int,
    world_speed: float,
) -> BuildPlan:
    """Validate and time a build order; the duration uses the built main building level."""
    target = can_build(kind, buildings, queued)
    start = build_start_ms(queued, now_ms)
    duration = build_duration_ms(kind, target, buildings.get("main_building", 0), world_speed)
    return BuildPlan(kind, target, build_cost(kind, target), start, start + duration)


def validate_tables() -> None:
    """Raise ``ValueError`` if the tables contradict each other (run it after editing them)."""
    for res, kind in FIELD_KINDS.items():
        if kind not in BUILDINGS:
            raise ValueError(f"the field of {res} ({kind}) is not in BUILDINGS")
    for spec in BUILDINGS.values():
        for k in spec.requires:
            if k not in BUILDINGS:
                raise ValueError(f"{spec.kind} requires unknown building {k}")
        if exact(spec.cost_factor) <= 1 or exact(spec.time_factor) <= 1:
            raise ValueError(f"{spec.kind}: cost and time factors must be > 1")
        costs = [build_cost(spec.kind, lvl).total for lvl in range(1, spec.max_level + 1)]
        if any(b <= a for a, b in itertools.pairwise(costs)):
            raise ValueError(f"{spec.kind}: costs must grow strictly with the level")
    fields_max = max(BUILDINGS[k].max_level for k in FIELD_KINDS.values())
    storage_max = max(BUILDINGS[k].max_level for k in ("warehouse", "granary"))
    tables = {
        "FIELD_PRODUCTION": (FIELD_PRODUCTION, fields_max),
        "STORAGE_CAPACITY": (STORAGE_CAPACITY, storage_max),
        "WALL_DEFENSE_PCT": (WALL_DEFENSE_PCT, BUILDINGS["wall"].max_level),
        "MAIN_BUILDING_TIME_PCT": (MAIN_BUILDING_TIME_PCT, BUILDINGS["main_building"].max_level),
        "BARRACKS_TIME_PCT": (BARRACKS_TIME_PCT, BUILDINGS["barracks"].max_level),
    }
    for name, (table, max_level) in tables.items():
        if len(table) != max_level + 1:
            raise ValueError(f"{name} needs one entry per level 0..{max_level}")
