"""Resources, costs, exact numbers and world speed: the arithmetic every rule uses.

Rounding rule (one for the whole game): formulas run on exact fractions, never
on binary floats. A float written in a table or passed as ``world_speed`` is
read as the decimal it prints as (``1.28`` is exactly 128/100), so results are
the same bit for bit on every machine. Each formula rounds once, at the end:

* production rates: half up to whole units per hour (``scale_rate``);
* durations: up to the next whole millisecond, at least 1 ms (``scale_duration_ms``);
* costs: half up to whole units (``buildings.build_cost``).

World speed multiplies production and divides durations (building, training,
marching) here and only here. It does not change costs, storage caps or upkeep.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from common.amounts import to_units
from gameapi.game import Resource
from gameapi.stocks import stocks_for
from refgame.errors import InsufficientResources, InvalidQuantity

# The game's resources (``village_stock`` columns wood, wood_rate, ..., warehouse_cap,
# granary_cap; the order is the display order). Wood, clay and iron share the warehouse;
# crop has the granary, and its rate is net of troop upkeep, so it may decline.
RESOURCE_TYPES: tuple[Resource, ...] = (
    Resource("wood", "warehouse"),
    Resource("clay", "warehouse"),
    Resource("iron", "warehouse"),
    Resource("crop", "granary", may_decline=True),
)
RESOURCES: tuple[str, ...] = tuple(r.name for r in RESOURCE_TYPES)
STOCKS = stocks_for(RESOURCE_TYPES)  # the statements on refgame's ``village_stock``

MS_PER_HOUR = 3_600_000
MS_PER_SECOND = 1_000

Number = int | float | Fraction


@lru_cache(maxsize=1024)
def _exact_float(value: float) -> Fraction:
    return Fraction(repr(value))


def exact(value: Number) -> Fraction:
    """``value`` as an exact fraction; a float counts as the decimal it prints as."""
    if isinstance(value, bool):
        raise TypeError("a bool is not a number here")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    return _exact_float(value)


def round_half_up(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def ceil_div(num: int, den: int) -> int:
    """``ceil(num / den)`` for ``den > 0``, in integers."""
    return -(-num // den)


def speed(world_speed: float) -> Fraction:
    """The world speed as an exact fraction; it must be a finite number > 0."""
    try:
        s = exact(world_speed)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"world speed must be a finite number > 0, got {world_speed!r}") from exc
    if s <= 0:
        raise ValueError(f"world speed must be a finite number > 0, got {world_speed!r}")
    return s


def scale_rate(per_hour: Number, world_speed: float) -> int:
    """A production rate at ``world_speed``: ``per_hour × speed``, rounded half up."""
    return round_half_up(exact(per_hour) * speed(world_speed))


def scale_duration_ms(base_ms: Number, world_speed: float) -> int:
    """A duration at ``world_speed``: ``base_ms / speed``, rounded up, at least 1 ms."""
    return max(1, math.ceil(exact(base_ms) / speed(world_speed)))


@dataclass(frozen=True)
class Cost:
    """An amount of each resource in whole units."""

    wood: int = 0
    clay: int = 0
    iron: int = 0
    crop: int = 0

    @classmethod
    def of(cls, amounts: Mapping[str, int]) -> Cost:
        return cls(**{r: int(amounts.get(r, 0)) for r in RESOURCES})

    def as_dict(self) -> dict[str, int]:
        return {r: getattr(self, r) for r in RESOURCES}

    def __mul__(self, n: int) -> Cost:
        return Cost(*(getattr(self, r) * n for r in RESOURCES))

    __rmul__ = __mul__

    def __add__(self, other: Cost) -> Cost:
        return Cost(*(getattr(self, r) + getattr(other, r) for r in RESOURCES))

    @property
    def total(self) -> int:
        return sum(getattr(self, r) for r in RESOURCES)

    def missing(self, stock_units: Mapping[str, int]) -> dict[str, int]:
        """Units lacking in ``stock_units`` (whole units), per resource; empty when affordable."""
        short = {r: getattr(self, r) - int(stock_units.get(r, 0)) for r in RESOURCES}
        return {r: n for r, n in short.items() if n > 0}


def check_affordable(cost: Cost, stock_units: Mapping[str, int]) -> None:
    """Raise ``InsufficientResources`` unless ``stock_units`` covers ``cost``."""
    missing = cost.missing(stock_units)
    if missing:
        listed = ", ".join(f"{n} {r}" for r, n in missing.items())
        raise InsufficientResources(
            f"not enough resources: {listed} missing; wait for production or lower the quantity",
            missing=missing,
        )


async def stock_units_at(session: AsyncSession, village_id: int, at_ms: int) -> dict[str, int]:
    """The village's stock settled at ``at_ms``, in whole units (rounded down), per resource."""
    dialect = session.get_bind().dialect.name
    values = STOCKS.settled_values(at_ms, dialect)
    row = (
        await session.execute(
            select(*(values[r].label(r) for r in RESOURCES)).where(
                STOCKS.c.village_id == village_id
            )
        )
    ).one()
    return {r: to_units(int(getattr(row, r))) for r in RESOURCES}


def check_count(value: object, *, what: str, maximum: int) -> int:
    """``value`` if it is a whole number in ``1..maximum``, else ``InvalidQuantity``.

    Bools, floats (even ``3.0``) and strings are refused: JSON integers only.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidQuantity(f"{what} must be a whole number, got {value!r}", value=repr(value))
    if value < 1:
        raise InvalidQuantity(f"{what} must be at least 1, got {value}", value=value)
    if value > maximum:
        raise InvalidQuantity(f"{what} must be at most {maximum}, got {value}", value=value)
    return value
