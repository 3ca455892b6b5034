"""Exact resource arithmetic.

Stocks are integers in *fixed-point units*: ``SCALE`` of them make one
resource unit. Rates are integers in whole units per hour. Because one hour is
3,600,000 ms, ``rate_per_hour * dt_ms`` is exactly the gain in fixed-point
units: no division, so no rounding, so ticks that run late, twice or not at
all give bit-identical stocks. Players see ``stock // SCALE`` (floor).
"""

from __future__ import annotations

SCALE = 3_600_000  # fixed-point units per resource unit (ms per hour)


def to_fixed(units: int) -> int:
    return units * SCALE


def to_units(fixed: int) -> int:
    return fixed // SCALE


def accrue(stock: int, rate_per_hour: int, dt_ms: int, cap: int) -> int:
    """Stock after ``dt_ms`` of production, capped at ``cap`` and floored at 0.

    The same rule as the tick's SQL: ``max(0, min(cap, stock + rate * dt))``.
    """
    if dt_ms <= 0:
        return stock
    return max(0, min(cap, stock + rate_per_hour * dt_ms))
