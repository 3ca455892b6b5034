"""The space game's battle: deterministic from the seed, the round rules, loot."""

from __future__ import annotations

import random

from examples.spacegame.battle import ROUNDS, Side, _Fleet, attack_loot, fight, loot


def test_the_same_seed_gives_the_same_battle() -> None:
    a = Side({"light_fighter": 30, "heavy_fighter": 5})
    d = Side({"light_fighter": 25, "cruiser": 2})
    first = fight(a, d, 12345)
    assert fight(a, d, 12345) == first
    outcomes = {repr(fight(a, d, seed)) for seed in range(1, 30)}
    assert len(outcomes) > 1  # the seed matters


def test_overwhelming_force_wins_in_one_round() -> None:
    out = fight(Side({"cruiser": 50}), Side({"small_cargo": 3}), 7)
    assert out.winner == "attacker" and out.rounds == 1
    assert out.attacker_left == {"cruiser": 50} and out.defender_left == {}


def test_shots_under_one_percent_of_the_shield_bounce() -> None:
    target = _Fleet(Side({"cruiser": 1}))
    target.shield[0] = 100 * 50 + 1  # a small cargo shoots 50 tenths
    _Fleet(Side({"small_cargo": 3})).fire_at(target, random.Random(1))
    assert target.shield[0] == 100 * 50 + 1 and target.hull == target.full_hull


def test_shields_absorb_and_recharge_every_round() -> None:
    # one small cargo's shot per round never gets through a cruiser's 50 shield
    out = fight(Side({"small_cargo": 1}), Side({"cruiser": 1}), 5)
    assert out.defender_left == {"cruiser": 1}


def test_a_stalemate_ends_after_the_last_round_as_a_draw() -> None:
    out = fight(Side({"small_cargo": 1}), Side({"small_cargo": 1}), 3)
    assert out.rounds == ROUNDS and out.winner == "draw"


def test_empty_defender_loses_at_once() -> None:
    out = fight(Side({"light_fighter": 1}), Side({}), 3)
    assert out.winner == "attacker" and out.rounds == 0


def test_research_changes_the_outcome() -> None:
    base = [fight(Side({"light_fighter": 40}), Side({"light_fighter": 40}), s) for s in range(20)]
    strong = [
        fight(Side({"light_fighter": 40}, weapons=10, armour=10), Side({"light_fighter": 40}), s)
        for s in range(20)
    ]
    wins = sum(o.winner == "attacker" for o in strong)
    assert wins > sum(o.winner == "attacker" for o in base)


def test_losses() -> None:
    a = Side({"light_fighter": 10})
    out = fight(a, Side({"cruiser": 3}), 99)
    losses = out.losses(a, out.attacker_left)
    assert sum(losses.values()) + sum(out.attacker_left.values()) == 10


def test_loot_takes_half_packed_by_thirds() -> None:
    stock = {"metal": 100_000, "crystal": 100_000, "deuterium": 100_000}
    assert loot(stock, 9000) == {"metal": 3000, "crystal": 3000, "deuterium": 3000}
    # plenty of room: half of everything
    assert loot(stock, 10**9) == {"metal": 50_000, "crystal": 50_000, "deuterium": 50_000}
    # no deuterium: its share goes to metal, then crystal
    got = loot({"metal": 100_000, "crystal": 100_000, "deuterium": 0}, 9000)
    assert sum(got.values()) == 9000 and got["deuterium"] == 0
    # a nearly empty planet gives what half of it holds
    assert loot({"metal": 11, "crystal": 0, "deuterium": 3}, 5000) == {
        "metal": 5,
        "crystal": 0,
        "deuterium": 1,
    }


def test_loot_only_for_the_winner_and_capped_by_survivors() -> None:
    stock = {"metal": 1_000_000, "crystal": 0, "deuterium": 0}
    won = fight(Side({"small_cargo": 2, "cruiser": 20}), Side({}), 1)
    assert sum(attack_loot(won, stock).values()) == 2 * 5000 + 20 * 800
    lost = fight(Side({"small_cargo": 1}), Side({"cruiser": 5}), 1)
    assert attack_loot(lost, stock) == {"metal": 0, "crystal": 0, "deuterium": 0}
