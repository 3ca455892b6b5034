"""Economy: production rates, storage caps, exact stocks, upkeep and starvation.

Stocks are fixed-point (``common.amounts``: ``SCALE`` per unit), rates whole
units per hour, so a stock at any time is exact: ``accrue(stock, rate, dt, cap)``.

Rates. Each resource field produces ``FIELD_PRODUCTION[level]`` units/hour at
world speed 1, multiplied by the world speed and rounded half up
(``field_production``). The crop rate stored in ``village_stock`` is *net*:
crop production minus the upkeep of every troop whose home is the village,
wherever it stands (at home, reinforcing elsewhere, or marching). Upkeep is not
scaled by world speed.

Storage. Wood, clay and iron are capped by the warehouse, crop by the granary
(``STORAGE_CAPACITY[level]`` whole units each); gains beyond the cap are lost,
including loot brought home into a full village.

Starvation. With a negative net crop rate the crop stock falls and ``accrue``
holds it at 0 (never negative). At ``starvation_time_ms`` (the exact ms the
stock reaches 0, rounded up) the village's own troops starve: ``starve`` kills
the highest-upkeep units first (ties: by unit name) until the net crop rate is
≥ 0 again. Whoever changes a village's rate recomputes its starvation time.
"""

from __future__ import annotations

from collections.abc import Mapping

from common.amounts import accrue, to_fixed, to_units
from refgame.buildings import FIELD_KINDS, FIELD_PRODUCTION, STORAGE_CAPACITY, level_value
from refgame.errors import InvalidQuantity
from refgame.resources import RESOURCES, Cost, ceil_div, check_affordable, scale_rate
from refgame.units import total_upkeep, unit_spec

__all__ = [
    "deposit",
    "field_production",
    "production_rates",
    "starvation_time_ms",
    "starve",
    "stock_at",
    "storage_capacity",
    "total_upkeep",
    "village_caps",
    "village_rates",
    "visible_stock",
    "withdraw",
]


def field_production(level: int, world_speed: float) -> int:
    """Units per hour of a resource field at ``level``: table × world speed, rounded half up."""
    if level < 0:
        raise ValueError(f"a level is >= 0, got {level}")
    return scale_rate(level_value(FIELD_PRODUCTION, level), world_speed)


def production_rates(buildings: Mapping[str, int], world_speed: float) -> dict[str, int]:
    """Gross production per resource, units per hour (before troop upkeep)."""
    return {r: field_production(buildings.get(FIELD_KINDS[r], 0), world_speed) for r in RESOURCES}


def village_rates(
    buildings: Mapping[str, int], troops_upkeep: int, world_speed: float
) -> dict[str, int]:
    """The rates to store in ``village_stock``: production, crop net of ``troops_upkeep``."""
    if troops_upkeep < 0:
        raise ValueError(f"upkeep is >= 0, got {troops_upkeep}")
    rates = production_rates(buildings, world_speed)
    rates["crop"] -= troops_upkeep
    return rates


def storage_capacity(level: int) -> int:
    """Whole units one warehouse (per resource) or granary holds at ``level``."""
    return level_value(STORAGE_CAPACITY, level)


def village_caps(buildings: Mapping[str, int]) -> tuple[int, int]:
    """``(warehouse_cap, granary_cap)`` in whole units (``to_fixed`` them for ``village_stock``)."""
    return (
        storage_capacity(buildings.get("warehouse", 0)),
        storage_capacity(buildings.get("granary", 0)),
    )


def _cap(res: str, warehouse_cap: int, granary_cap: int) -> int:
    return granary_cap if res == "crop" else warehouse_cap


def stock_at(row: Mapping[str, int], now_ms: int) -> dict[str, int]:
    """Fixed-point stocks of a ``village_stock`` row interpolated to ``now_ms`` (the tick's rule).

    ``row`` has the columns ``updated_ms``, each resource, each ``<res>_rate``,
    ``warehouse_cap`` and ``granary_cap`` (fixed-point caps).
    """
    dt = now_ms - row["updated_ms"]
    return {
        r: accrue(row[r], row[f"{r}_rate"], dt, _cap(r, row["warehouse_cap"], row["granary_cap"]))
        for r in RESOURCES
    }


def visible_stock(stock_fixed: Mapping[str, int]) -> dict[str, int]:
    """Whole units a player sees (floor)."""
    return {r: to_units(stock_fixed.get(r, 0)) for r in RESOURCES}


def deposit(
    stock_fixed: Mapping[str, int],
    amounts: Mapping[str, int],
    warehouse_cap: int,
    granary_cap: int,
) -> dict[str, int]:
    """Fixed-point stocks after adding ``amounts`` (whole units); what exceeds a cap is lost.

    Caps are fixed-point, as in ``village_stock``. A stock already above its cap
    (it cannot be, but a cap could be lowered by a game) is left as it is.
    """
    out: dict[str, int] = {}
    for r in RESOURCES:
        n = amounts.get(r, 0)
        if n < 0:
            raise InvalidQuantity(f"cannot deposit a negative amount of {r}: {n}")
        cap = _cap(r, warehouse_cap, granary_cap)
        out[r] = max(stock_fixed[r], min(cap, stock_fixed[r] + to_fixed(n)))
    return out


def withdraw(stock_fixed: Mapping[str, int], cost: Cost) -> dict[str, int]:
    """Fixed-point stocks after paying ``cost``; ``InsufficientResources`` if any would go < 0."""
    check_affordable(cost, visible_stock(stock_fixed))
    return {r: stock_fixed[r] - to_fixed(getattr(cost, r)) for r in RESOURCES}


def starvation_time_ms(crop_stock_fixed: int, net_crop_rate: int, now_ms: int) -> int | None:
    """When the crop stock reaches 0 (ms, rounded up), or ``None`` if it never does.

    ``crop_stock_fixed`` is the stock at ``now_ms``; a rate ≥ 0 never starves;
    an empty granary with a negative rate starves at ``now_ms``.
    """
    if net_crop_rate >= 0:
        return None
    return now_ms + ceil_div(max(0, crop_stock_fixed), -net_crop_rate)


def starve(troops: Mapping[str, int], deficit_per_hour: int) -> dict[str, int]:
    """Deaths per unit that bring a crop deficit back to ≥ 0, highest upkeep first.

    ``troops`` are all the starving village's own troops (``unit -> count``);
    ``deficit_per_hour`` is ``-net_crop_rate``. Within one unit kind only as
    many die as needed (rounded up); units without upkeep never starve. When
    every eating unit is dead and a deficit remains, all of them die.
    """
    if deficit_per_hour <= 0:
        return {}
    order = sorted(
        ((u, n) for u, n in troops.items() if n > 0 and unit_spec(u).upkeep > 0),
        key=lambda un: (-unit_spec(un[0]).upkeep, un[0]),
    )
    deaths: dict[str, int] = {}
    left = deficit_per_hour
    for unit, count in order:
        upkeep = unit_spec(unit).upkeep
        dead = min(count, ceil_div(left, upkeep))
        deaths[unit] = dead
        left -= dead * upkeep
        if left <= 0:
            break
    return deaths
