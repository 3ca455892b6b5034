"""Flight: distance between planets, duration by speed, fuel, recall; pure rules.

Planets sit on the framework's map (integer x, y). The distance in flight units
is ``1,000 + 100 × ceil(euclidean fields)``. OGame's duration::

    seconds = 10 + 35,000 / speed_pct × sqrt(10 × distance / fleet_speed)

divided by the world speed, computed on integers (an integer square root at
10^-6 precision) so every machine agrees. Fuel (deuterium, paid at departure)::

    1 + ceil(sum(ship fuel × count) × distance / 35,000 × (1 + speed_pct / 100)^2)

A recalled fleet turns around where it is: it flies home for as long as it
has flown out. Every flight lands at least one millisecond after it starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from examples.spacegame.errors import InvalidFleet, NotRecallable
from examples.spacegame.ships import fleet_fuel_rate

Coord = tuple[int, int]
SPEED_STEPS: tuple[int, ...] = tuple(range(10, 101, 10))  # percent of the fleet's speed
MISSIONS: tuple[str, ...] = ("transport", "attack")  # sendable; "return" follows them


def distance(a: Coord, b: Coord) -> int:
    d2 = (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2
    if d2 == 0:
        raise InvalidFleet("the target is the origin")
    root = math.isqrt(d2)
    fields = root if root * root == d2 else root + 1
    return 1000 + 100 * fields


def _check_pct(speed_pct: int) -> None:
    if speed_pct not in SPEED_STEPS:
        raise InvalidFleet("speed_pct is one of 10, 20, ..., 100")


def flight_ms(dist: int, fleet_speed: int, speed_pct: int, world_speed: float) -> int:
    _check_pct(speed_pct)
    root = math.isqrt(10 * dist * 10**12 // fleet_speed)  # sqrt(10 × distance / speed) × 10^6
    ms = 10_000 + -(-35 * root // speed_pct)  # 35,000 / pct × sqrt s, in ms
    return max(1, math.ceil(ms / world_speed))


def fuel(ships: Mapping[str, int], dist: int, speed_pct: int) -> int:
    _check_pct(speed_pct)
    base = fleet_fuel_rate(ships) * dist * (100 + speed_pct) ** 2
    return 1 + -(-base // (35_000 * 10_000))


@dataclass(frozen=True)
class Leg:
    depart_ms: int
    arrive_ms: int


def recall(depart_ms: int, arrive_ms: int, now_ms: int) -> Leg:
    """The way home of a fleet recalled at ``now_ms`` on its way out."""
    if not depart_ms <= now_ms < arrive_ms:
        raise NotRecallable("the fleet is not on its way out")
    return Leg(now_ms, now_ms + max(1, now_ms - depart_ms))


def way_home(depart_ms: int, arrive_ms: int) -> Leg:
    """The return leg after a mission: as long as the way out."""
    return Leg(arrive_ms, arrive_ms + (arrive_ms - depart_ms))
