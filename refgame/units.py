"""Units: the troop table, training and troop-count validation.

Every unit trains in the barracks (the reference game has no stable) but the
settler, who trains in the residence; a unit may need a minimum level of its
building. A training order pays ``cost × count`` when
placed and delivers all its units at ``done_ms``. Orders of one village run one
after another, at most ``TRAINING_QUEUE_LIMIT`` at once::

    duration = ceil(count × time_s × 1000 × barracks_pct / 100 / speed)   ms, at least 1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Literal

from refgame.buildings import BARRACKS_TIME_PCT, BUILDINGS, level_value
from refgame.errors import (
    InsufficientTroops,
    InvalidQuantity,
    PrerequisiteMissing,
    QueueFull,
    UnknownUnit,
)
from refgame.resources import MS_PER_SECOND, Cost, check_count, scale_duration_ms

Category = Literal["infantry", "cavalry"]
SETTLER_RESIDENCE_LEVEL = 3  # settlers train from this residence level on


@dataclass(frozen=True)
class UnitSpec:
    """One row of the unit table."""

    name: str
    category: Category  # decides which defense value answers its attack
    attack: int
    defense_infantry: int
    defense_cavalry: int
    speed: int  # map fields per hour at world speed 1
    carry: int  # whole resource units
    upkeep: int  # crop per hour, charged to the home village
    cost: Cost
    time_s: int  # training time of one unit at barracks level 1 and world speed 1
    barracks_level: int = 1  # the level of ``trained_in`` needed to train it
    trained_in: str = "barracks"  # the building that trains it (its level sets the time)


# fmt: off
_U, _C = UnitSpec, Cost
UNITS: dict[str, UnitSpec] = {u.name: u for u in (
    # name                  category  attack def_inf def_cav speed carry upkeep cost time_s barracks
    _U("legionnaire",         "infantry", 40, 35,  50,  6,  50, 1, _C(120, 100, 150, 30), 1600),
    _U("praetorian",          "infantry", 30, 65,  35,  5,  20, 1, _C(100, 130, 160, 70), 1760),
    _U("imperian",            "infantry", 70, 40,  25,  7,  50, 1, _C(150, 160, 210, 80), 1920, 3),
    _U("equites_imperatoris", "cavalry", 120, 65,  50, 14, 100, 3, _C(550, 440, 320, 100), 2640, 5),
    _U("equites_caesaris",    "cavalry", 180, 80, 105, 10,  70, 4, _C(550, 640, 800, 180), 3520, 9),
    # founds villages (refgame.settling); carries nothing, so a raid of settlers loots nothing
    _U("settler",             "infantry",  0, 20,  20,  5,   0, 1, _C(750, 650, 800, 500), 7200,
       SETTLER_RESIDENCE_LEVEL, "residence"),
)}
# fmt: on

MAX_TRAIN_PER_ORDER = 10_000  # units in one training order
MAX_TROOPS_PER_UNIT = 1_000_000_000  # units of one kind in one march (a sanity bound)
TRAINING_QUEUE_LIMIT = 5  # training orders per village, the running one included


@dataclass(frozen=True)
class TrainingPlan:
    """What ``plan_training`` decided: pay ``cost`` now; the units arrive at ``done_ms``."""

    unit: str
    count: int
    cost: Cost
    start_ms: int
    done_ms: int


def unit_spec(unit: str) -> UnitSpec:
    try:
        return UNITS[unit]
    except (KeyError, TypeError):
        known = ", ".join(UNITS)
        raise UnknownUnit(f"unknown unit {unit!r}; known units: {known}", unit=str(unit)) from None


def train_duration_ms(unit: str, count: int, barracks_level: int, world_speed: float) -> int:
    """How long training ``count`` units takes, in ms; ``barracks_level``: the level of the
    unit's building (``trained_in``), at least the unit's ``barracks_level``."""
    spec = unit_spec(unit)
    check_count(count, what=f"the number of {unit} to train", maximum=MAX_TRAIN_PER_ORDER)
    if barracks_level < spec.barracks_level:
        raise PrerequisiteMissing(
            f"training {unit} needs {spec.trained_in} level {spec.barracks_level}; "
            f"this village has level {barracks_level}",
            unit=unit,
            requires={spec.trained_in: spec.barracks_level},
        )
    pct = level_value(BARRACKS_TIME_PCT, barracks_level)
    return _train_ms(count * spec.time_s * pct, world_speed)


@lru_cache(maxsize=16384)  # exact fractions are slow; cached by the values, not the unit
def _train_ms(unit_s_pct: int, world_speed: float) -> int:
    return scale_duration_ms(Fraction(unit_s_pct * MS_PER_SECOND, 100), world_speed)


def train_cost(unit: str, count: int) -> Cost:
    check_count(count, what=f"the number of {unit} to train", maximum=MAX_TRAIN_PER_ORDER)
    return unit_spec(unit).cost * count


def plan_training(
    unit: str,
    count: int,
    barracks_level: int,
    queued_done_ms: Sequence[int],
    now_ms: int,
    world_speed: float,
) -> TrainingPlan:
    """Validate and time a training order queued behind ``queued_done_ms``."""
    if len(queued_done_ms) >= TRAINING_QUEUE_LIMIT:
        raise QueueFull(
            f"the training queue holds at most {TRAINING_QUEUE_LIMIT} orders; "
            "wait for one to finish",
            limit=TRAINING_QUEUE_LIMIT,
        )
    duration = train_duration_ms(unit, count, barracks_level, world_speed)
    start = max([now_ms, *queued_done_ms])
    return TrainingPlan(unit, count, train_cost(unit, count), start, start + duration)


def validate_troops(troops: Mapping[str, object]) -> dict[str, int]:
    """A clean ``unit -> count`` of troops to send: known units, whole counts ≥ 0, some > 0.

    Zero counts are dropped; an empty result is refused with ``InvalidQuantity``.
    """
    if not isinstance(troops, Mapping):
        raise InvalidQuantity("troops must be an object of unit -> count")
    clean: dict[str, int] = {}
    for unit, count in troops.items():
        unit_spec(unit)
        if type(count) is int and count == 0:
            continue
        clean[unit] = check_count(count, what=f"the number of {unit}", maximum=MAX_TROOPS_PER_UNIT)
    if not clean:
        raise InvalidQuantity("send at least one unit")
    return clean


def check_troops_available(wanted: Mapping[str, int], available: Mapping[str, int]) -> None:
    """Raise ``InsufficientTroops`` unless ``available`` holds every count of ``wanted``."""
    missing = {u: n - available.get(u, 0) for u, n in wanted.items() if n > available.get(u, 0)}
    if missing:
        listed = ", ".join(f"{n} {u}" for u, n in missing.items())
        raise InsufficientTroops(f"not enough troops at home: {listed} missing", missing=missing)


def total_upkeep(troops: Mapping[str, int]) -> int:
    """Crop per hour that ``troops`` eat."""
    return sum(unit_spec(u).upkeep * n for u, n in troops.items())


def carry_capacity(troops: Mapping[str, int]) -> int:
    """Resource units ``troops`` can carry home."""
    return sum(unit_spec(u).carry * n for u, n in troops.items())


def slowest_speed(troops: Mapping[str, int]) -> int:
    """Fields per hour of the slowest unit with a count > 0."""
    speeds = [unit_spec(u).speed for u, n in troops.items() if n > 0]
    if not speeds:
        raise InvalidQuantity("a march needs at least one unit")
    return min(speeds)


def validate_tables() -> None:
    """Raise ``ValueError`` if a unit row is unusable."""
    for spec in UNITS.values():
        if spec.category not in ("infantry", "cavalry"):
            raise ValueError(f"{spec.name}: category must be infantry or cavalry")
        numbers = (spec.attack, spec.defense_infantry, spec.defense_cavalry, spec.carry)
        if min(numbers) < 0 or spec.upkeep < 0:
            raise ValueError(f"{spec.name}: attack, defense, carry and upkeep must be >= 0")
        if spec.speed < 1 or spec.time_s < 1 or spec.barracks_level < 1:
            raise ValueError(f"{spec.name}: speed, time_s and barracks_level must be >= 1")
        if spec.trained_in not in BUILDINGS:
            raise ValueError(f"{spec.name}: trained_in must be a building kind")
