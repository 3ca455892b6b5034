"""Battle: OGame's round model, deterministic from a stored seed; loot; pure rules.

Every ship is simulated. Up to ``ROUNDS`` rounds; in each, every ship of both
sides (those alive at the round's start) fires once at a random enemy ship:

- a shot weaker than 1 % of the target's current shield bounces off;
- otherwise the shield absorbs what it can and the rest goes to the hull;
- a ship whose hull falls below 70 % of its full hull explodes with probability
  ``1 - hull / full hull`` (one draw per hit).

After the round the destroyed ships are removed and the shields recharge. The
fight ends when a side has no ships or after the last round: the attacker wins
if only it has ships left, the defender if only it has, anything else is a
draw. Research adds 10 % per level to attack (weapons), shield (shielding) and
hull (armour); values are kept in tenths so everything is integer.

The random draws come from ``random.Random(seed)`` with ``randrange`` only,
which gives the same sequence on every platform and Python version since 3.2:
a report keeps the inputs and the seed, and ``fight`` replays it exactly.
There is no rapid fire and no debris field (an example, not a full OGame).
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from examples.spacegame.economy import RESOURCES
from examples.spacegame.ships import SHIPS, cargo_capacity

ROUNDS = 6
LOOT_SHARE_PCT = 50  # of each resource the defender holds
MAX_SEED = 2**63 - 1  # fits a signed BIGINT column


def new_seed() -> int:
    return secrets.randbelow(MAX_SEED) + 1


@dataclass(frozen=True)
class Side:
    """Ships and the research levels that strengthen them."""

    ships: Mapping[str, int]
    weapons: int = 0
    shielding: int = 0
    armour: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ships": dict(self.ships),
            "weapons": self.weapons,
            "shielding": self.shielding,
            "armour": self.armour,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Side:
        return cls(dict(d["ships"]), d["weapons"], d["shielding"], d["armour"])


@dataclass(frozen=True)
class Outcome:
    winner: str  # "attacker", "defender" or "draw"
    rounds: int
    attacker_left: dict[str, int]
    defender_left: dict[str, int]

    def losses(self, side: Side, left: Mapping[str, int]) -> dict[str, int]:
        return {n: c - left.get(n, 0) for n, c in side.ships.items() if c - left.get(n, 0) > 0}


class _Fleet:
    """Parallel lists, one entry per ship: name, attack, full hull, hull, full shield (tenths)."""

    def __init__(self, side: Side) -> None:
        self.names: list[str] = []
        self.attack: list[int] = []
        self.full_hull: list[int] = []
        self.hull: list[int] = []
        self.full_shield: list[int] = []
        for name in sorted(side.ships):  # a fixed order: the draws index into these lists
            spec = SHIPS[name]
            n = side.ships[name]
            self.names += [name] * n
            self.attack += [spec.attack * (10 + side.weapons)] * n
            self.full_hull += [spec.hull * (10 + side.armour)] * n
            self.full_shield += [spec.shield * (10 + side.shielding)] * n
        self.hull = list(self.full_hull)
        self.shield = list(self.full_shield)

    def __len__(self) -> int:
        return len(self.names)

    def fire_at(self, target: _Fleet, rng: random.Random) -> None:
        n = len(target)
        for damage in self.attack:
            t = rng.randrange(n)
            if target.hull[t] <= 0:
                continue  # already destroyed this round: the shot is wasted
            shield = target.shield[t]
            if 100 * damage < shield:
                continue
            if damage <= shield:
                target.shield[t] = shield - damage
                continue
            target.shield[t] = 0
            hull = target.hull[t] - (damage - shield)
            full = target.full_hull[t]
            if hull > 0 and 10 * hull < 7 * full and rng.randrange(full) >= hull:
                hull = 0
            target.hull[t] = max(hull, 0)

    def end_round(self) -> None:
        keep = [i for i, h in enumerate(self.hull) if h > 0]
        self.names = [self.names[i] for i in keep]
        self.attack = [self.attack[i] for i in keep]
        self.full_hull = [self.full_hull[i] for i in keep]
        self.hull = [self.hull[i] for i in keep]
        self.full_shield = [self.full_shield[i] for i in keep]
        self.shield = list(self.full_shield)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in self.names:
            out[name] = out.get(name, 0) + 1
        return out


def fight(attacker: Side, defender: Side, seed: int) -> Outcome:
    rng = random.Random(seed)
    a, d = _Fleet(attacker), _Fleet(defender)
    rounds = 0
    while rounds < ROUNDS and len(a) and len(d):
        rounds += 1
        a.fire_at(d, rng)  # both fire at the ships alive at the round's start
        d.fire_at(a, rng)
        a.end_round()
        d.end_round()
    if len(a) and not len(d):
        winner = "attacker"
    elif len(d) and not len(a):
        winner = "defender"
    else:
        winner = "draw"
    return Outcome(winner, rounds, a.counts(), d.counts())


def loot(stock: Mapping[str, int], capacity: int) -> dict[str, int]:
    """OGame's plunder: half of each resource, packed metal, crystal, deuterium by thirds.

    Metal fills up to a third of the hold, crystal half of what is left,
    deuterium the rest; remaining room takes more metal (half of it), then crystal.
    """
    avail = {r: max(0, stock.get(r, 0)) * LOOT_SHARE_PCT // 100 for r in RESOURCES}
    take = dict.fromkeys(RESOURCES, 0)
    room = max(0, capacity)

    def grab(res: str, limit: int) -> None:
        nonlocal room
        n = min(limit, avail[res] - take[res], room)
        take[res] += n
        room -= n

    grab("metal", room // 3)
    grab("crystal", room // 2)
    grab("deuterium", room)
    grab("metal", room // 2)
    grab("crystal", room)
    grab("metal", room)
    return take


def attack_loot(outcome: Outcome, stock: Mapping[str, int]) -> dict[str, int]:
    """What the attacker carries home: nothing unless it won, then capped by its survivors' hold."""
    if outcome.winner != "attacker":
        return dict.fromkeys(RESOURCES, 0)
    return loot(stock, cargo_capacity(outcome.attacker_left))
