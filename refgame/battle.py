"""Battle: a deterministic, replayable fight, loot and the reports of both sides.

The formula (Travian's, simplified), on exact fractions:

1. Attack: ``A_inf`` / ``A_cav`` = sum of ``attack × count`` of the attacking
   infantry / cavalry; ``A = (A_inf + A_cav) × (1000 + luck) / 1000``, where
   ``luck`` is in ``[-LUCK_PERMILLE, +LUCK_PERMILLE]``, derived from the seed.
2. Defense: each defending unit answers with its infantry and cavalry defense
   weighted by the attack's mix, ``count × (d_inf × A_inf + d_cav × A_cav) /
   (A_inf + A_cav)``; plus ``BASE_DEFENSE``; times ``(100 + wall %) / 100``.
3. The attacker wins if ``A > D`` (a tie goes to the defender). With
   ``x = (weaker / stronger) ^ LOSS_EXPONENT``:
   *attack*: the winner loses the ratio ``x``, the loser everything;
   *raid*: the winner loses ``x / (1 + x)``, the loser ``1 / (1 + x)``.
4. Ratios are integers in parts per ``LOSS_PRECISION`` (rounded down); each
   unit kind loses ``round_half_up(count × ratio)``, never more than it has.

Everything is integer or ``Fraction`` arithmetic and the luck comes from
SHA-256 of the seed, so the same inputs give the same result on every machine
and Python version: a report stores the inputs and the seed and can be replayed.

Loot: survivors carry ``carry_capacity`` units; if the defender's stock (whole
units) holds more, each resource gives its share of the total, rounded down,
and the units left over go to the largest remainders (ties in RESOURCES order).
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

from refgame import RULESET_VERSION
from refgame.buildings import WALL_DEFENSE_PCT, level_value
from refgame.resources import RESOURCES, exact
from refgame.units import carry_capacity, unit_spec

BATTLE_KINDS: tuple[str, ...] = ("attack", "raid")
BASE_DEFENSE = 10  # every village defends itself with this much, before the wall
LUCK_PERMILLE = 50  # attack power varies by up to ±5 % with the seed
LOSS_EXPONENT = 1.5  # Travian's power law; read exactly as 3/2
LOSS_PRECISION = 10**12  # loss ratios are integers in parts per 10^12
MAX_SEED = 2**63 - 1  # seeds fit a signed BIGINT column

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class BattleResult:
    """Inputs and outcome of one battle; ``to_dict`` / ``from_dict`` round-trip through JSON."""

    kind: str
    seed: int
    wall_level: int
    attackers: Mapping[str, int]
    defenders: Mapping[str, int]
    luck_permille: int
    attack_power: int  # rounded down, for display
    defense_power: int  # rounded down, for display
    attacker_won: bool
    attacker_loss_ppt: int  # parts per LOSS_PRECISION
    defender_loss_ppt: int
    attacker_losses: Mapping[str, int] = field(default_factory=dict)
    defender_losses: Mapping[str, int] = field(default_factory=dict)

    @property
    def attacker_survivors(self) -> dict[str, int]:
        return _survivors(self.attackers, self.attacker_losses)

    @property
    def defender_survivors(self) -> dict[str, int]:
        return _survivors(self.defenders, self.defender_losses)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seed": self.seed,
            "wall_level": self.wall_level,
            "attackers": dict(self.attackers),
            "defenders": dict(self.defenders),
            "luck_permille": self.luck_permille,
            "attack_power": self.attack_power,
            "defense_power": self.defense_power,
            "attacker_won": self.attacker_won,
            "attacker_loss_ppt": self.attacker_loss_ppt,
            "defender_loss_ppt": self.defender_loss_ppt,
            "attacker_losses": dict(self.attacker_losses),
            "defender_losses": dict(self.defender_losses),
            "attacker_survivors": self.attacker_survivors,
            "defender_survivors": self.defender_survivors,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BattleResult:
        def counts(key: str) -> dict[str, int]:
            return {str(u): int(n) for u, n in d[key].items()}

        return cls(
            kind=str(d["kind"]),
            seed=int(d["seed"]),
            wall_level=int(d["wall_level"]),
            attackers=counts("attackers"),
            defenders=counts("defenders"),
            luck_permille=int(d["luck_permille"]),
            attack_power=int(d["attack_power"]),
            defense_power=int(d["defense_power"]),
            attacker_won=bool(d["attacker_won"]),
            attacker_loss_ppt=int(d["attacker_loss_ppt"]),
            defender_loss_ppt=int(d["defender_loss_ppt"]),
            attacker_losses=counts("attacker_losses"),
            defender_losses=counts("defender_losses"),
        )


def _survivors(troops: Mapping[str, int], losses: Mapping[str, int]) -> dict[str, int]:
    return {u: n - losses.get(u, 0) for u, n in troops.items()}


def new_seed() -> int:
    """A fresh random seed to store with a battle."""
    return secrets.randbits(63)


def luck_permille(seed: int) -> int:
    """The battle's luck in ``[-LUCK_PERMILLE, LUCK_PERMILLE]``: SHA-256 of the seed, reduced."""
    digest = hashlib.sha256(f"refgame.luck:{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (2 * LUCK_PERMILLE + 1) - LUCK_PERMILLE


def _iroot(n: int, k: int) -> int:
    """floor(n ** (1/k)) for n >= 0, in integers."""
    if k == 1 or n < 2:
        return n
    if k == 2:
        return math.isqrt(n)
    x = 1 << -(-n.bit_length() // k)  # >= the root
    while True:
        y = ((k - 1) * x + n // x ** (k - 1)) // k
        if y >= x:
            return x
        x = y


def power_ppt(ratio: Fraction) -> int:
    """floor(LOSS_PRECISION × ratio ^ LOSS_EXPONENT) for 0 ≤ ratio ≤ 1, exactly."""
    e = exact(LOSS_EXPONENT)
    a, b = e.numerator, e.denominator
    p, q = ratio.numerator, ratio.denominator
    return _iroot(LOSS_PRECISION**b * p**a // q**a, b)


def _clean(troops: Mapping[str, int], side: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for unit, count in troops.items():
        unit_spec(unit)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"{side}: the count of {unit} must be a whole number >= 0: {count!r}")
        if count:
            out[unit] = count
    return out


def _losses(troops: Mapping[str, int], ppt: int) -> dict[str, int]:
    # round half up of count × ppt / LOSS_PRECISION; ppt <= LOSS_PRECISION keeps it <= count
    return {u: (2 * n * ppt + LOSS_PRECISION) // (2 * LOSS_PRECISION) for u, n in troops.items()}


def resolve_battle(
    attackers: Mapping[str, int],
    defenders: Mapping[str, int],
    wall_level: int,
    kind: str,
    seed: int,
) -> BattleResult:
    """Fight ``attackers`` against every troop in the village (owners' and reinforcements')."""
    if kind not in BATTLE_KINDS:
        raise ValueError(f"a battle is one of {BATTLE_KINDS}, got {kind!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"a seed is an integer in 0..{MAX_SEED}, got {seed!r}")
    if wall_level < 0:
        raise ValueError(f"a wall level is >= 0, got {wall_level}")
    att = _clean(attackers, "attackers")
    dfn = _clean(defenders, "defenders")

    a_inf = sum(
        unit_spec(u).attack * n for u, n in att.items() if unit_spec(u).category != "cavalry"
    )
    a_cav = sum(
        unit_spec(u).attack * n for u, n in att.items() if unit_spec(u).category == "cavalry"
    )
    a_raw = a_inf + a_cav
    luck = luck_permille(seed)
    attack = Fraction(a_raw * (1000 + luck), 1000)
    if a_raw:
        troops_def = Fraction(
            sum(
                n * (unit_spec(u).defense_infantry * a_inf + unit_spec(u).defense_cavalry * a_cav)
                for u, n in dfn.items()
            ),
            a_raw,
        )
    else:
        troops_def = Fraction(sum(unit_spec(u).defense_infantry * n for u, n in dfn.items()))
    wall_pct = level_value(WALL_DEFENSE_PCT, wall_level)
    defense = (troops_def + BASE_DEFENSE) * (100 + wall_pct) / 100

    attacker_won = attack > defense
    stronger = max(attack, defense)
    x = power_ppt(min(attack, defense) / stronger) if stronger else LOSS_PRECISION
    if kind == "attack":
        winner, loser = x, LOSS_PRECISION
    else:
        winner = x * LOSS_PRECISION // (LOSS_PRECISION + x)
        loser = LOSS_PRECISION - winner
    att_ppt, def_ppt = (winner, loser) if attacker_won else (loser, winner)
    return BattleResult(
        kind=kind,
        seed=seed,
        wall_level=wall_level,
        attackers=att,
        defenders=dfn,
        luck_permille=luck,
        attack_power=math.floor(attack),
        defense_power=math.floor(defense),
        attacker_won=attacker_won,
        attacker_loss_ppt=att_ppt,
        defender_loss_ppt=def_ppt,
        attacker_losses=_losses(att, att_ppt),
        defender_losses=_losses(dfn, def_ppt),
    )


def split_losses(
    groups: Mapping[K, Mapping[str, int]], losses: Mapping[str, int]
) -> dict[K, dict[str, int]]:
    """Share each unit's ``losses`` among ``groups`` (e.g. by home village) by their counts.

    Largest-remainder rounding: every group loses its share rounded down, the
    rest go one each to the largest remainders (ties: in sorted key order), so
    the shares add up to ``losses`` exactly and no group loses more than it has.
    """
    keys = sorted(groups)  # type: ignore[type-var]
    out: dict[K, dict[str, int]] = {k: {} for k in keys}
    for unit, lost in losses.items():
        counts = [(k, groups[k].get(unit, 0)) for k in keys]
        total = sum(n for _, n in counts)
        if lost > total:
            raise ValueError(f"{lost} {unit} lost but the groups hold only {total}")
        if lost <= 0:
            continue
        shares = {k: lost * n // total for k, n in counts}
        left = lost - sum(shares.values())
        by_remainder = sorted(counts, key=lambda kn: -(lost * kn[1] % total))
        for k, _ in by_remainder[:left]:
            shares[k] += 1
        for k, n in shares.items():
            if n:
                out[k][unit] = n
    return out


def compute_loot(carry: int, stock_units: Mapping[str, int]) -> dict[str, int]:
    """Resources ``carry`` units of capacity take from ``stock_units`` (whole units)."""
    stock = {r: max(0, int(stock_units.get(r, 0))) for r in RESOURCES}
    total = sum(stock.values())
    if carry <= 0 or total == 0:
        return {r: 0 for r in RESOURCES}
    if total <= carry:
        return stock
    loot = {r: carry * n // total for r, n in stock.items()}
    left = carry - sum(loot.values())
    ranked = sorted(RESOURCES, key=lambda r: -(carry * stock[r] % total))  # stable: RESOURCES order
    for r in ranked[:left]:
        loot[r] += 1
    return loot


def battle_loot(result: BattleResult, stock_units: Mapping[str, int]) -> dict[str, int]:
    """The loot of a battle: nothing unless the attacker won, else up to the survivors' carry."""
    if not result.attacker_won:
        return {r: 0 for r in RESOURCES}
    return compute_loot(carry_capacity(result.attacker_survivors), stock_units)


def battle_title(result: BattleResult, side: str) -> str:
    won = result.attacker_won if side == "attacker" else not result.attacker_won
    what = "Raid" if result.kind == "raid" else "Attack"
    if side == "attacker":
        return f"{what} {'won' if won else 'lost'}"
    return f"{what} {'repelled' if won else 'suffered'}"


def battle_reports(
    result: BattleResult,
    *,
    loot: Mapping[str, int],
    attacker: Mapping[str, Any],
    defender: Mapping[str, Any],
    time_ms: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The attacker's and the defender's report bodies (JSON-ready, replayable).

    ``attacker`` / ``defender`` describe the two sides (e.g. player and village
    ids, names, coordinates) and are copied into both bodies as they are.
    """
    bodies = []
    battle = result.to_dict()  # the same for both sides (a battle is many per second)
    for side in ("attacker", "defender"):
        won = result.attacker_won if side == "attacker" else not result.attacker_won
        bodies.append(
            {
                "type": "battle",
                "ruleset": RULESET_VERSION,
                "side": side,
                "title": battle_title(result, side),
                "outcome": "victory" if won else "defeat",
                "time_ms": time_ms,
                "attacker": dict(attacker),
                "defender": dict(defender),
                "battle": battle,
                "loot": {r: int(loot.get(r, 0)) for r in RESOURCES},
            }
        )
    return bodies[0], bodies[1]


def reinforcement_report(
    troops: Mapping[str, int],
    *,
    sender: Mapping[str, Any],
    receiver: Mapping[str, Any],
    time_ms: int,
) -> dict[str, Any]:
    """The body of the report both owners get when reinforcements arrive."""
    return {
        "type": "reinforcement",
        "ruleset": RULESET_VERSION,
        "title": "Reinforcements arrived",
        "time_ms": time_ms,
        "sender": dict(sender),
        "receiver": dict(receiver),
        "troops": dict(troops),
    }


def replay_report(body: Mapping[str, Any]) -> BattleResult:
    """Fight a report's battle again from its stored inputs and seed."""
    b = body["battle"]
    return resolve_battle(
        {str(u): int(n) for u, n in b["attackers"].items()},
        {str(u): int(n) for u, n in b["defenders"].items()},
        int(b["wall_level"]),
        str(b["kind"]),
        int(b["seed"]),
    )


def verify_report(body: Mapping[str, Any]) -> bool:
    """True if replaying the report gives exactly the result it records."""
    return replay_report(body) == BattleResult.from_dict(body["battle"])
