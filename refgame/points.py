"""Battle points: what the attack and defence rankings count.

Travian's rule: a battle is worth the upkeep (crop per hour) of the troops each
side killed, so a kill counts by what the unit cost to keep, not by head count::

    attack points  (to the attacker's player)       = Σ defender losses × upkeep
    defence points (to the defended village's owner) = Σ attacker losses × upkeep

Raids count like attacks. The defended village's owner gets all defence points,
also for kills made by reinforcements standing there. A battle between two
villages of one player, or against an abandoned village's side (no owner),
gives that side nothing. Points are added in the battle's own transaction
(``BatchState.add_points``), so they are exact however late the march ran.
"""

from __future__ import annotations

from dataclasses import dataclass

from refgame.battle import BattleResult
from refgame.units import total_upkeep


@dataclass(frozen=True, slots=True)
class BattlePoints:
    attack: int  # to the attacker's player
    defence: int  # to the defended village's owner


def battle_points(result: BattleResult) -> BattlePoints:
    """The points of a battle: the upkeep of the troops each side killed."""
    return BattlePoints(total_upkeep(result.defender_losses), total_upkeep(result.attacker_losses))


def award(
    points: BattlePoints, attacker: int | None, defender: int | None
) -> list[tuple[int, int, int]]:
    """``(player_id, attack points, defence points)`` rows for the players who earn them."""
    if attacker is not None and attacker == defender:
        return []  # a player's own villages fighting each other earn nothing
    rows = []
    if attacker is not None and points.attack:
        rows.append((attacker, points.attack, 0))
    if defender is not None and points.defence:
        rows.append((defender, 0, points.defence))
    return rows
