"""Marches: map distance, travel time, recall and the march home.

The map is a square grid of integer coordinates without wrapping; the distance
is Euclidean. A march moves at the speed of its slowest unit (fields per hour,
multiplied by the world speed)::

    duration = ceil(distance × 3,600,000 / (slowest_speed × world_speed))   ms, at least 1

computed in exact integers (an integer square root), so every machine agrees.

Kinds: ``attack``, ``raid`` and ``reinforce`` are sent from a village with a
rally point (level ≥ 1); ``return`` brings troops (and loot) home. A sent march
may be recalled while less than ``RECALL_WINDOW_FRACTION`` of its travel time
has elapsed (strictly less); it then returns home taking as long as it has
travelled. A return march is never recalled. After a battle the survivors go
home at their own slowest speed; if none survived there is no return march. A
march whose target no longer exists turns around on arrival the same way.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from refgame.errors import InvalidMarch, NotRecallable, PrerequisiteMissing
from refgame.resources import MS_PER_HOUR, ceil_div, exact, speed
from refgame.units import UNITS, slowest_speed, validate_troops

Coord = tuple[int, int]
MarchKind = Literal["attack", "raid", "reinforce", "return"]

MARCH_KINDS: tuple[str, ...] = ("attack", "raid", "reinforce", "return")
SENDABLE_KINDS: tuple[str, ...] = ("attack", "raid", "reinforce")
RECALL_WINDOW_FRACTION = 0.5  # of the travel time; read exactly as 1/2
RALLY_POINT_LEVEL_TO_SEND = 1


@dataclass(frozen=True)
class MarchPlan:
    """A march to write as a ``marches`` row (``troops`` unit -> count, ``loot`` res -> units)."""

    kind: str
    troops: Mapping[str, int]
    depart_ms: int
    arrive_ms: int
    loot: Mapping[str, int] = field(default_factory=dict)

    @property
    def duration_ms(self) -> int:
        return self.arrive_ms - self.depart_ms


def distance_squared(a: Coord, b: Coord) -> int:
    return (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2


def distance(a: Coord, b: Coord) -> float:
    """The Euclidean distance, for display; travel times use ``distance_squared`` exactly."""
    return math.hypot(a[0] - b[0], a[1] - b[1])


def _ceil_sqrt(n: int) -> int:
    return 0 if n <= 0 else math.isqrt(n - 1) + 1


def travel_ms(dist_squared: int, fields_per_hour: int, world_speed: float) -> int:
    """ceil(sqrt(dist_squared) × 3,600,000 / (fields_per_hour × speed)), at least 1 ms."""
    num_squared, den = _ms_per_field(fields_per_hour, world_speed)
    # smallest n with n × den ≥ sqrt(d² × num²), i.e. n = ceil(ceil_sqrt(d² num²) / den)
    n = ceil_div(_ceil_sqrt(dist_squared * num_squared), den)
    return max(1, n)


@functools.lru_cache(maxsize=256)
def _ms_per_field(fields_per_hour: int, world_speed: float) -> tuple[int, int]:
    """ms per field as an exact fraction ``k``: (k.numerator², k.denominator)."""
    if fields_per_hour < 1:
        raise ValueError(f"a speed is >= 1 field per hour, got {fields_per_hour}")
    k = Fraction(MS_PER_HOUR) / (fields_per_hour * speed(world_speed))
    return k.numerator**2, k.denominator


def shortest_follow_up_ms(world_speed: float) -> int:
    """The shortest time from an event to a follow-up it schedules in another village:
    the fastest unit crossing one field (villages stand on distinct whole coordinates)."""
    return travel_ms(1, max(spec.speed for spec in UNITS.values()), world_speed)


def march_duration_ms(
    origin: Coord, target: Coord, troops: Mapping[str, int], world_speed: float
) -> int:
    """Travel time of ``troops`` from ``origin`` to ``target`` at their slowest unit's speed."""
    return travel_ms(distance_squared(origin, target), slowest_speed(troops), world_speed)


def march_arrival_ms(
    depart_ms: int, origin: Coord, target: Coord, troops: Mapping[str, int], world_speed: float
) -> int:
    return depart_ms + march_duration_ms(origin, target, troops, world_speed)


def plan_march(
    kind: str,
    troops: Mapping[str, object],
    origin: Coord,
    target: Coord,
    rally_point_level: int,
    now_ms: int,
    world_speed: float,
) -> MarchPlan:
    """Validate and time a march sent now; troop availability is the caller's check."""
    if kind not in SENDABLE_KINDS:
        raise InvalidMarch(
            f"unknown march kind {kind!r}; send one of {', '.join(SENDABLE_KINDS)}", kind=str(kind)
        )
    if rally_point_level < RALLY_POINT_LEVEL_TO_SEND:
        raise PrerequisiteMissing(
            f"sending troops needs a rally point (level {RALLY_POINT_LEVEL_TO_SEND})",
            requires={"rally_point": RALLY_POINT_LEVEL_TO_SEND},
        )
    clean = validate_troops(troops)
    if tuple(origin) == tuple(target):
        raise InvalidMarch("a march cannot target its own village")
    return MarchPlan(
        kind, clean, now_ms, march_arrival_ms(now_ms, origin, target, clean, world_speed)
    )


def recall_deadline_ms(depart_ms: int, arrive_ms: int) -> int:
    """The first ms at which a march can no longer be recalled."""
    return math.ceil(depart_ms + exact(RECALL_WINDOW_FRACTION) * (arrive_ms - depart_ms))


def check_recall(kind: str, depart_ms: int, arrive_ms: int, now_ms: int) -> None:
    """Raise ``NotRecallable`` unless the march may turn back at ``now_ms``."""
    if kind not in SENDABLE_KINDS:
        raise NotRecallable(f"a {kind} march cannot be recalled", kind=kind)
    deadline = recall_deadline_ms(depart_ms, arrive_ms)
    if now_ms >= deadline:
        pct = exact(RECALL_WINDOW_FRACTION) * 100
        raise NotRecallable(
            f"a march can be recalled only during the first {float(pct):g}% of its way; "
            "this one is past that point",
            deadline_ms=deadline,
        )


def recall_return_ms(depart_ms: int, now_ms: int) -> int:
    """When recalled troops are home: they take as long back as they have travelled."""
    return now_ms + max(0, now_ms - depart_ms)


def recall(
    kind: str, troops: Mapping[str, int], depart_ms: int, arrive_ms: int, now_ms: int
) -> MarchPlan:
    """The return march of a march recalled at ``now_ms`` (its arrival is cancelled)."""
    check_recall(kind, depart_ms, arrive_ms, now_ms)
    return MarchPlan("return", dict(troops), now_ms, recall_return_ms(depart_ms, now_ms))


def return_march(
    origin: Coord,
    target: Coord,
    survivors: Mapping[str, int],
    depart_ms: int,
    world_speed: float,
    loot: Mapping[str, int] | None = None,
) -> MarchPlan | None:
    """Survivors going home from ``target`` to ``origin``; ``None`` when nobody survived."""
    alive = {u: n for u, n in survivors.items() if n > 0}
    if not alive:
        return None
    arrive = march_arrival_ms(depart_ms, target, origin, alive, world_speed)
    return MarchPlan("return", alive, depart_ms, arrive, dict(loot or {}))
