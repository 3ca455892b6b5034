from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refgame import RULESET_VERSION
from refgame.battle import (
    BASE_DEFENSE,
    LOSS_PRECISION,
    LUCK_PERMILLE,
    MAX_SEED,
    BattleResult,
    battle_loot,
    battle_reports,
    compute_loot,
    luck_permille,
    new_seed,
    power_ppt,
    reinforcement_report,
    replay_report,
    resolve_battle,
    split_losses,
    verify_report,
)
from refgame.errors import UnknownUnit
from refgame.resources import RESOURCES
from refgame.units import UNITS, carry_capacity

unit_names = st.sampled_from(sorted(UNITS))
armies = st.dictionaries(unit_names, st.integers(0, 10_000), max_size=len(UNITS))
seeds = st.integers(0, MAX_SEED)
kinds = st.sampled_from(["attack", "raid"])
walls = st.integers(0, 20)

ATTACKERS = {"legionnaire": 100, "equites_imperatoris": 20}
DEFENDERS = {"praetorian": 50, "legionnaire": 30}


def test_pinned_result() -> None:
    """A fixed battle gives these numbers forever; if this fails, bump RULESET_VERSION."""
    r = resolve_battle(ATTACKERS, DEFENDERS, 3, "attack", 12345)
    assert r.luck_permille == -21
    # A = 6400 × 0.979; D = (50 × 53.75 + 30 × 40.625 + 10) × 1.09
    assert (r.attack_power, r.defense_power) == (6265, 4268)
    assert r.attacker_won
    assert r.attacker_loss_ppt == 562_343_086_258
    assert r.attacker_losses == {"legionnaire": 56, "equites_imperatoris": 11}
    assert r.defender_losses == DEFENDERS
    assert r.attacker_survivors == {"legionnaire": 44, "equites_imperatoris": 9}
    raid = resolve_battle(ATTACKERS, DEFENDERS, 3, "raid", 12345)
    assert raid.attacker_losses == {"legionnaire": 36, "equites_imperatoris": 7}
    assert raid.defender_losses == {"praetorian": 32, "legionnaire": 19}
    assert RULESET_VERSION == 1


def test_formula_against_floats() -> None:
    r = resolve_battle(ATTACKERS, DEFENDERS, 3, "attack", 12345)
    a = 6400 * (1000 + r.luck_permille) / 1000
    d = (50 * (65 * 4000 + 35 * 2400) / 6400 + 30 * (35 * 4000 + 50 * 2400) / 6400 + 10) * 1.09
    assert abs(r.attacker_loss_ppt / LOSS_PRECISION - (d / a) ** 1.5) < 1e-9


@given(st.fractions(min_value=0, max_value=1))
def test_power_is_exact(ratio: Fraction) -> None:
    x = power_ppt(ratio)
    # x = floor(P × ratio^(3/2))  <=>  x² ≤ P² ratio³ < (x + 1)²
    assert x**2 <= LOSS_PRECISION**2 * ratio**3 < (x + 1) ** 2


@settings(max_examples=200)
@given(armies, armies, walls, kinds, seeds)
def test_battle_is_deterministic_and_sane(
    att: dict[str, int], dfn: dict[str, int], wall: int, kind: str, seed: int
) -> None:
    r = resolve_battle(att, dfn, wall, kind, seed)
    assert r == resolve_battle(dict(reversed(att.items())), dfn, wall, kind, seed)
    for troops, losses, survivors in (
        (r.attackers, r.attacker_losses, r.attacker_survivors),
        (r.defenders, r.defender_losses, r.defender_survivors),
    ):
        assert set(losses) == set(troops) == set(survivors)
        for u, n in troops.items():
            assert 0 <= losses[u] <= n
            assert survivors[u] == n - losses[u] >= 0
    assert 0 <= r.attacker_loss_ppt <= LOSS_PRECISION
    assert 0 <= r.defender_loss_ppt <= LOSS_PRECISION
    assert -LUCK_PERMILLE <= r.luck_permille <= LUCK_PERMILLE
    # the loser of an attack loses everything
    if kind == "attack":
        loser = r.defender_losses if r.attacker_won else r.attacker_losses
        lost_side = r.defenders if r.attacker_won else r.attackers
        assert loser == lost_side
    # JSON round trip, and a report replays to the same result
    assert BattleResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r


@settings(max_examples=100)
@given(armies, armies, walls, seeds)
def test_raid_is_less_lethal_than_attack(
    att: dict[str, int], dfn: dict[str, int], wall: int, seed: int
) -> None:
    attack = resolve_battle(att, dfn, wall, "attack", seed)
    raid = resolve_battle(att, dfn, wall, "raid", seed)
    assert raid.attacker_won == attack.attacker_won
    assert raid.attacker_loss_ppt <= attack.attacker_loss_ppt
    assert raid.defender_loss_ppt <= attack.defender_loss_ppt


@given(armies, walls, seeds)
def test_a_higher_wall_never_helps_the_attacker(dfn: dict[str, int], wall: int, seed: int) -> None:
    att = {"imperian": 50}
    low = resolve_battle(att, dfn, wall, "attack", seed)
    high = resolve_battle(att, dfn, wall + 1, "attack", seed)
    assert high.defense_power >= low.defense_power
    assert high.attacker_loss_ppt >= low.attacker_loss_ppt


def test_empty_village_falls_with_small_losses() -> None:
    r = resolve_battle({"imperian": 100}, {}, 0, "attack", 7)
    assert r.attacker_won
    assert r.defense_power == BASE_DEFENSE
    assert r.attacker_losses == {"imperian": 0}
    assert r.defender_losses == {}


def test_tie_goes_to_the_defender_and_kills_both() -> None:
    seed = next(s for s in range(1000) if luck_permille(s) == 0)
    # attack 40 × 10 = 400 against praetorians answering legionnaires: 65 × 6 = 390, + 10
    r = resolve_battle({"legionnaire": 10}, {"praetorian": 6}, 0, "attack", seed)
    assert (r.attack_power, r.defense_power) == (400, 400)
    assert not r.attacker_won
    assert r.attacker_losses == {"legionnaire": 10}
    assert r.defender_losses == {"praetorian": 6}


def test_no_attackers() -> None:
    r = resolve_battle({"legionnaire": 0}, {"praetorian": 5}, 0, "raid", 1)
    assert not r.attacker_won
    assert r.attackers == {}
    assert r.defender_losses == {"praetorian": 0}


def test_bad_battle_inputs() -> None:
    with pytest.raises(ValueError):
        resolve_battle(ATTACKERS, DEFENDERS, 0, "reinforce", 1)
    with pytest.raises(ValueError):
        resolve_battle(ATTACKERS, DEFENDERS, 0, "attack", -1)
    with pytest.raises(ValueError):
        resolve_battle(ATTACKERS, DEFENDERS, 0, "attack", MAX_SEED + 1)
    with pytest.raises(ValueError):
        resolve_battle({"legionnaire": -1}, DEFENDERS, 0, "attack", 1)
    with pytest.raises(UnknownUnit):
        resolve_battle({"dragon": 1}, DEFENDERS, 0, "attack", 1)


def test_seeds() -> None:
    s = new_seed()
    assert 0 <= s <= MAX_SEED
    lucks = {luck_permille(x) for x in range(2000)}
    assert min(lucks) == -LUCK_PERMILLE and max(lucks) == LUCK_PERMILLE


def test_reports_replay() -> None:
    r = resolve_battle(ATTACKERS, DEFENDERS, 3, "raid", 99)
    loot = battle_loot(r, {"wood": 5000, "clay": 10, "iron": 0, "crop": 1})
    att, dfn = battle_reports(
        r,
        loot=loot,
        attacker={"player_id": 1, "village_id": 10},
        defender={"player_id": 2, "village_id": 20},
        time_ms=123,
    )
    assert att["side"] == "attacker" and dfn["side"] == "defender"
    assert att["outcome"] == "victory" and dfn["outcome"] == "defeat"
    assert att["title"] == "Raid won" and dfn["title"] == "Raid suffered"
    assert att["battle"]["seed"] == 99
    assert att["loot"] == loot
    for body in (att, dfn):
        stored = json.loads(json.dumps(body))
        assert replay_report(stored) == r
        assert verify_report(stored)
    tampered = json.loads(json.dumps(att))
    tampered["battle"]["attacker_losses"]["legionnaire"] -= 1
    assert not verify_report(tampered)


def test_reinforcement_report() -> None:
    body = reinforcement_report({"praetorian": 5}, sender={"v": 1}, receiver={"v": 2}, time_ms=9)
    assert json.loads(json.dumps(body)) == body
    assert body["type"] == "reinforcement"


def test_split_losses_by_home_village() -> None:
    groups = {2: {"praetorian": 10, "legionnaire": 1}, 1: {"praetorian": 10}, 3: {"praetorian": 5}}
    out = split_losses(groups, {"praetorian": 13, "legionnaire": 1})
    # 13 × (10, 10, 5) / 25 = 5.2, 5.2, 2.6: floors 5, 5, 2 and the last one to village 3
    assert out == {
        1: {"praetorian": 5},
        2: {"praetorian": 5, "legionnaire": 1},
        3: {"praetorian": 3},
    }


@given(
    st.dictionaries(
        st.integers(1, 50), st.dictionaries(unit_names, st.integers(0, 500)), min_size=1
    ),
    st.data(),
)
def test_split_losses_adds_up(groups: dict[int, dict[str, int]], data: st.DataObject) -> None:
    totals: dict[str, int] = {}
    for troops in groups.values():
        for u, n in troops.items():
            totals[u] = totals.get(u, 0) + n
    losses = {u: data.draw(st.integers(0, n)) for u, n in totals.items()}
    out = split_losses(groups, losses)
    for u, lost in losses.items():
        assert sum(g.get(u, 0) for g in out.values()) == lost
    for k, g in out.items():
        assert all(0 < n <= groups[k].get(u, 0) for u, n in g.items())


def test_loot_examples() -> None:
    stock = {"wood": 100, "clay": 100, "iron": 100, "crop": 100}
    assert compute_loot(1000, stock) == stock  # everything fits
    assert compute_loot(0, stock) == {r: 0 for r in RESOURCES}
    assert compute_loot(10, {"wood": 0, "clay": 0, "iron": 0, "crop": 0}) == {
        r: 0 for r in RESOURCES
    }
    # 7 units over equal stocks: 1 each, 3 left for the first resources in order
    assert compute_loot(7, stock) == {"wood": 2, "clay": 2, "iron": 2, "crop": 1}
    assert compute_loot(30, {"wood": 300, "clay": 0, "iron": 100, "crop": 50}) == {
        "wood": 20,
        "clay": 0,
        "iron": 7,
        "crop": 3,
    }


@given(
    st.integers(-10, 10**6), st.fixed_dictionaries({r: st.integers(0, 10**6) for r in RESOURCES})
)
def test_loot_never_exceeds_carry_or_stock(carry: int, stock: dict[str, int]) -> None:
    loot = compute_loot(carry, stock)
    assert set(loot) == set(RESOURCES)
    assert all(0 <= loot[r] <= stock[r] for r in RESOURCES)
    assert sum(loot.values()) == min(max(carry, 0), sum(stock.values()))


def test_battle_loot() -> None:
    stock = {"wood": 10_000, "clay": 10_000, "iron": 10_000, "crop": 10_000}
    won = resolve_battle(ATTACKERS, DEFENDERS, 0, "raid", 5)
    assert sum(battle_loot(won, stock).values()) == carry_capacity(won.attacker_survivors)
    lost = resolve_battle({"legionnaire": 1}, {"praetorian": 100}, 0, "raid", 5)
    assert not lost.attacker_won
    assert battle_loot(lost, stock) == {r: 0 for r in RESOURCES}
