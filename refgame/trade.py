"""Trade: merchants carry resources from one village to another and walk back.

A village's marketplace gives it ``MERCHANTS_PER_LEVEL`` merchants per level; each
carries up to ``MERCHANT_CAPACITY`` units (of any mix of resources). A shipment of
``total`` units takes ``ceil(total / MERCHANT_CAPACITY)`` merchants, busy from the send
until they are home again. Merchants walk at ``MERCHANT_SPEED`` fields per hour (times
the world speed), on the map's distance rule (``travel.travel_ms``); the way back takes
as long as the way there.

On arrival the target takes what fits under its warehouse and granary caps at that ms
(whole units, per resource); the rest is lost (as with loot brought home into a full
village) and both players' trade reports say how much of what.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from common.amounts import SCALE
from refgame.errors import InsufficientMerchants, InvalidQuantity, InvalidTrade, PrerequisiteMissing
from refgame.resources import RESOURCES, ceil_div
from refgame.travel import Coord, distance_squared, travel_ms

MERCHANTS_PER_LEVEL = 1  # Travian: one merchant per marketplace level
MERCHANT_CAPACITY = 500  # units one merchant carries (Travian's Romans)
MERCHANT_SPEED = 16  # fields per hour at world speed 1 (Travian's Romans)
MAX_SHIPMENT = 1_000_000_000  # units of one resource in one request (a sanity bound)


@dataclass(frozen=True)
class TradePlan:
    """A shipment to write as a ``trades`` row: ``resources`` in whole units."""

    resources: Mapping[str, int]
    merchants: int
    depart_ms: int
    arrive_ms: int

    @property
    def duration_ms(self) -> int:
        return self.arrive_ms - self.depart_ms

    @property
    def return_ms(self) -> int:
        return self.arrive_ms + self.duration_ms


def merchants_total(marketplace_level: int) -> int:
    """Merchants a village has with its marketplace at ``marketplace_level``."""
    return max(0, marketplace_level) * MERCHANTS_PER_LEVEL


def merchants_needed(amounts: Mapping[str, int]) -> int:
    """Merchants it takes to carry ``amounts`` (whole units): ceil(total / capacity)."""
    return ceil_div(sum(amounts.values()), MERCHANT_CAPACITY)


def trade_duration_ms(origin: Coord, target: Coord, world_speed: float) -> int:
    """One way of a merchant from ``origin`` to ``target``, ms (rounded up, at least 1)."""
    return travel_ms(distance_squared(origin, target), MERCHANT_SPEED, world_speed)


def validate_amounts(amounts: Mapping[str, object]) -> dict[str, int]:
    """Whole non-negative units per known resource, at least one above 0 (zeros dropped)."""
    unknown = sorted(set(amounts) - set(RESOURCES))
    if unknown:
        raise InvalidQuantity(
            f"unknown resource(s) {', '.join(map(str, unknown))}; send {', '.join(RESOURCES)}"
        )
    clean: dict[str, int] = {}
    for res, n in amounts.items():
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_SHIPMENT:
            raise InvalidQuantity(
                f"{res} must be a whole number in 0..{MAX_SHIPMENT}, got {n!r}", value=repr(n)
            )
        if n:
            clean[res] = n
    if not clean:
        raise InvalidQuantity("send at least one unit of some resource")
    return clean


def plan_trade(
    amounts: Mapping[str, object],
    origin: Coord,
    target: Coord,
    marketplace_level: int,
    busy_merchants: int,
    now_ms: int,
    world_speed: float,
) -> TradePlan:
    """Validate and time a shipment sent now; the stock is the caller's check."""
    clean = validate_amounts(amounts)
    if tuple(origin) == tuple(target):
        raise InvalidTrade("a village cannot send resources to itself")
    total = merchants_total(marketplace_level)
    if total < 1:
        raise PrerequisiteMissing(
            "sending resources needs a marketplace (level 1)", requires={"marketplace": 1}
        )
    needed = merchants_needed(clean)
    free = max(0, total - busy_merchants)
    if needed > free:
        raise InsufficientMerchants(
            f"{needed} merchants needed ({MERCHANT_CAPACITY} units each), {free} of {total} "
            "are free; wait for merchants to return or send less",
            needed=needed,
            free=free,
            total=total,
        )
    arrive = now_ms + trade_duration_ms(origin, target, world_speed)
    return TradePlan(clean, needed, now_ms, arrive)


def split_delivery(
    sent: Mapping[str, int], space_fixed: Mapping[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    """``(delivered, lost)`` whole units: each resource up to the whole units of room
    (``space_fixed``, fixed-point) in the target's storage; the rest is lost."""
    delivered: dict[str, int] = {}
    lost: dict[str, int] = {}
    for res in RESOURCES:
        n = int(sent.get(res, 0))
        fits = min(n, max(0, space_fixed.get(res, 0)) // SCALE)
        delivered[res] = fits
        lost[res] = n - fits
    return delivered, lost
