"""The chaos checks can fail: each is fed a small world with one planted fault.

A check that never fails proves nothing, so every invariant of ``chaos.checks``
gets a world where it holds and the same world with the kind of corruption it
exists to catch (an event applied twice or late, a lost troop, a march that
arrived although recalled, an answer that was never committed).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from chaos.checks import (
    Baseline,
    Check,
    Final,
    check_alliances,
    check_events_once,
    check_ledger,
    check_marches,
    check_resources,
    check_trades,
    check_troops,
    parse_world,
)
from chaos.players import Command, Ledger, PlayerInfo
from common.amounts import SCALE
from refgame.economy import field_production

V = 1  # the village under test
T0 = 1_800_000_000_000
SPEED = 1.0


def _row(t: int, wood: int, wood_rate: int, crop_rate: int = 0) -> dict[str, int]:
    return {
        "village_id": V, "shard": 0, "updated_ms": t,
        "wood": wood, "clay": 0, "iron": 0, "crop": 0,
        "wood_rate": wood_rate, "clay_rate": 0, "iron_rate": 0, "crop_rate": crop_rate,
        "warehouse_cap": 10_000 * SCALE, "granary_cap": 10_000 * SCALE,
    }  # fmt: skip


def _final(**changes: Any) -> Final:
    base: dict[str, Any] = {
        "now_ms": T0 + 3_600_000, "stock": {}, "buildings": {}, "troops": [], "marches": [],
        "build_orders": [], "training_orders": [], "scheduled": [], "processed": [],
        "reports": [], "idempotent": {},
    }  # fmt: skip
    base.update(changes)
    return Final(**base)


def _build(seq: int, done_ms: int, target: int, spent_ms: int) -> tuple[Command, tuple[Any, ...]]:
    answer = {"order_id": seq, "kind": "woodcutter", "target_level": target,
              "cost": {"wood": 10, "clay": 0, "iron": 0, "crop": 0},
              "started_ms": spent_ms, "done_ms": done_ms}  # fmt: skip
    cmd = Command(seq, 7, V, "build", {"village_id": V, "kind": "woodcutter"}, f"k{seq}",
                  spent_ms, status=200, answer=answer)  # fmt: skip
    return cmd, ((7, f"k{seq}"), (200, answer, spent_ms))


def _ledger(*commands: Command) -> Ledger:
    ledger = Ledger()
    ledger.players = [PlayerInfo("p", "pw-xyz", "raider", "127.0.1.1", "http://x", 7, V)]
    ledger.commands = list(commands)
    return ledger


def _resources(final_row: dict[str, int]) -> Check:
    cmd, (key, stored) = _build(1, T0 + 60_000, 3, T0 + 10_000)
    baseline = Baseline(T0, {V: _row(T0, 100 * SCALE, 25)}, {V: {"woodcutter": 2}}, {}, {})
    final = _final(stock={V: final_row}, idempotent={key: stored})
    world = parse_world(_ledger(cmd), final, SPEED, Check("parse", ""))
    return check_resources(world, baseline, final)


def _wood_at(t_end: int, change_at: int) -> int:
    """Wood after: 25/h from T0, -10 units at T0+10 s, the woodcutter's new rate from
    ``change_at``."""
    new_rate = 25 + field_production(3, SPEED) - field_production(2, SPEED)
    wood = 100 * SCALE + 25 * 10_000 - 10 * SCALE
    wood += 25 * (change_at - (T0 + 10_000))
    return wood + new_rate * (t_end - change_at)


def test_resources_equal_the_replayed_history() -> None:
    end = T0 + 120_000
    new_rate = 25 + field_production(3, SPEED) - field_production(2, SPEED)
    good = _row(end, _wood_at(end, T0 + 60_000), new_rate)
    assert _resources(good).violations == []
    late = _row(end, _wood_at(end, T0 + 61_000), new_rate)  # the change applied 1 s late
    assert _resources(late).violations
    twice = _row(end, _wood_at(end, T0 + 60_000), new_rate + 20)  # the level-up applied twice
    assert _resources(twice).violations
    never = _row(T0 + 50_000, _wood_at(T0 + 50_000, T0 + 50_000), 25)  # it never ran
    assert _resources(never).violations


def test_events_ran_once_per_committed_command() -> None:
    cmd, (key, stored) = _build(1, T0 + 60_000, 3, T0 + 10_000)
    once = _final(processed=[(11, "build_done", V, T0 + 60_001)], idempotent={key: stored})
    world = parse_world(_ledger(cmd), once, SPEED, Check("parse", ""))
    assert check_events_once(world, once, []).violations == []
    twice = _final(
        processed=[(11, "build_done", V, T0 + 60_001), (12, "build_done", V, T0 + 60_002)],
        idempotent={key: stored},
    )
    assert check_events_once(world, twice, []).violations
    assert check_events_once(world, _final(idempotent={key: stored}), []).violations


def test_every_answer_is_committed_once() -> None:
    cmd, (key, stored) = _build(1, T0 + 60_000, 3, T0 + 10_000)
    assert check_ledger(_ledger(cmd), _final(idempotent={key: stored})).violations == []
    assert check_ledger(_ledger(cmd), _final()).violations  # answered 200, nothing committed
    refused = Command(2, 7, V, "build", {}, "k2", T0, status=409, answer={}, code="x")
    committed = _final(idempotent={(7, "k2"): (200, {}, T0)})
    assert check_ledger(_ledger(refused), committed).violations  # refused, yet committed


def _march_world(recalled: bool, report: bool) -> tuple[Any, Final]:
    sent = {"march_id": 5, "kind": "raid", "target_village_id": 2,
            "troops": {"legionnaire": 3}, "depart_ms": T0, "arrive_ms": T0 + 9_000}  # fmt: skip
    cmds = [Command(1, 7, V, "march", {}, "m1", T0, status=200, answer=sent)]
    stored = {(7, "m1"): (200, sent, T0)}
    if recalled:
        back = {"march_id": 5, "kind": "return", "arrive_ms": T0 + 2_000}
        cmds.append(Command(2, 7, V, "recall", {"march_id": 5}, "r1", T0 + 1_000, status=200,
                            answer=back))  # fmt: skip
        stored[7, "r1"] = (200, back, T0 + 1_000)
    reports: list[tuple[int, int, str, dict[str, Any], int]] = []
    if report:
        battle = {"kind": "raid", "seed": 1, "wall_level": 0, "attackers": {"legionnaire": 3},
                  "defenders": {}, "luck_permille": 0, "attack_power": 1, "defense_power": 1,
                  "attacker_won": True, "attacker_loss_ppt": 0, "defender_loss_ppt": 0,
                  "attacker_losses": {}, "defender_losses": {}}  # fmt: skip
        for side in ("attacker", "defender"):
            body = {"type": "battle", "side": side, "time_ms": T0 + 9_000, "battle": battle,
                    "attacker": {"village_id": V, "x": 0, "y": 0},
                    "defender": {"village_id": 2, "x": 1, "y": 0}, "loot": {}}  # fmt: skip
            reports.append((len(reports) + 1, 7, "battle", body, T0 + 9_000))
    final = _final(reports=reports, idempotent=stored)
    return parse_world(_ledger(*cmds), final, SPEED, Check("parse", "")), final


def test_a_march_arrives_once_or_is_recalled_never_both() -> None:
    world, final = _march_world(recalled=False, report=True)
    assert check_marches(world, final, 1_000).violations == []
    world, final = _march_world(recalled=True, report=False)
    assert check_marches(world, final, 1_000).violations == []
    world, final = _march_world(recalled=True, report=True)
    assert check_marches(world, final, 1_000).violations
    world, final = _march_world(recalled=False, report=False)
    assert check_marches(world, final, 1_000).violations


def test_troops_are_conserved() -> None:
    world, final = _march_world(recalled=True, report=False)
    baseline = Baseline(T0, {}, {}, {V: Counter({"legionnaire": 3})}, {})
    home = _final(troops=[(V, V, "legionnaire", 3)], idempotent=final.idempotent)
    assert check_troops(world, baseline, home).violations == []
    lost = _final(troops=[(V, V, "legionnaire", 2)], idempotent=final.idempotent)
    assert check_troops(world, baseline, lost).violations
    doubled = _final(troops=[(V, V, "legionnaire", 3), (2, V, "legionnaire", 3)])
    assert check_troops(world, baseline, doubled).violations


def test_a_rate_change_applied_late_is_named_with_its_delay() -> None:
    from chaos.checks.resources import _Item, _late_rate_change

    start = _row(T0, 0, 0, crop_rate=10)
    items = [_Item(T0 + 10_000, 0, "rate", {"crop": -3})]
    late = {**_row(T0 + 20_000, 0, 0, crop_rate=7), "crop": 10 * 11_000 + 7 * 9_000}
    found = _late_rate_change(start, {}, items, late, SPEED)
    assert found == [f"= a crop rate change of -3 due at {T0 + 10_000} applied 1000 ms late"]


def test_alliances_have_one_founder_and_players_one_alliance() -> None:
    good = [(7, 1, "founder"), (8, 1, "leader"), (9, 1, "member"), (10, 2, "founder")]
    assert check_alliances(_final(alliances={1: "A", 2: "B"}, members=good)).violations == []
    for alliances, members, problem in [
        ({1: "A", 2: "B"}, [*good, (9, 2, "member")], "a member 2 times"),
        ({1: "A"}, good, "which does not exist"),
        ({1: "A", 2: "B"}, [(7, 1, "leader"), (10, 2, "founder")], "has 0 founders"),
        ({1: "A", 2: "B"}, [*good[:3], (10, 1, "founder")], "has 2 founders"),
        ({1: "A", 2: "B", 3: "C"}, good, "alliance 3 has no members"),
        ({1: "A", 2: "B"}, [*good[:3], (10, 2, "king")], "unknown role"),
    ]:
        check = check_alliances(_final(alliances=alliances, members=members))
        assert any(problem in v for v in check.violations), (problem, check.violations)


def _trade_world(
    reported: dict[str, Any] | None, rows: list[dict[str, Any]], merchants: int = 1
) -> tuple[Any, Final]:
    """Village V sends 300 wood and 100 iron to village 2 (arrival at T0 + 9 s)."""
    sent = {"wood": 300, "clay": 0, "iron": 100, "crop": 0}
    answer = {"trade_id": 4, "target_village_id": 2, "resources": sent, "merchants": merchants,
              "spent_ms": T0, "depart_ms": T0, "arrive_ms": T0 + 9_000,
              "return_ms": T0 + 18_000}  # fmt: skip
    cmd = Command(1, 7, V, "send_resources", {}, "t1", T0, status=200, answer=answer)
    reports: list[tuple[int, int, str, dict[str, Any], int]] = []
    if reported is not None:
        body = {"type": "trade", "trade_id": 4, "time_ms": T0 + 9_000, "merchants": 1,
                "sender": {"player_id": 7, "village_id": V},
                "receiver": {"player_id": 8, "village_id": 2},
                "sent": sent, **reported}  # fmt: skip
        reports = [(1, 7, "trade", body, T0 + 9_000), (2, 8, "trade", body, T0 + 9_000)]
    final = _final(reports=reports, idempotent={(7, "t1"): (200, answer, T0)}, trades=rows,
                   buildings={V: {"marketplace": 1}, 2: {"marketplace": 1}})  # fmt: skip
    return parse_world(_ledger(cmd), final, SPEED, Check("parse", "")), final


def test_merchants_conserve_what_they_carry() -> None:
    zero = dict.fromkeys(("wood", "clay", "iron", "crop"), 0)
    full = {"delivered": {**zero, "wood": 250, "iron": 100}, "lost": {**zero, "wood": 50}}
    world, final = _trade_world(full, [])
    assert check_trades(world, final, 1_000).violations == []
    going = {"id": 4, "origin_village_id": V, "target_village_id": 2, "merchants": 1,
             "resources": {"wood": 300, "iron": 100}, "delivered": {}, "lost": {},
             "homebound": False, "arrive_ms": T0 + 9_000,
             "return_ms": T0 + 18_000}  # fmt: skip
    world, final = _trade_world(None, [going])
    early = replace(final, now_ms=T0 + 5_000)
    assert check_trades(world, early, 1_000).violations == []  # on the way
    assert check_trades(world, final, 1_000).violations  # still on the way long after
    vanished = {"delivered": {**zero, "wood": 250, "iron": 100}, "lost": zero}
    world, final = _trade_world(vanished, [])  # 50 wood neither delivered nor reported lost
    assert check_trades(world, final, 1_000).violations
    world, final = _trade_world(None, [])  # never arrived, nothing on the way
    assert check_trades(world, final, 1_000).violations
    world, final = _trade_world(full, [], merchants=0)  # 400 units on no merchant
    assert check_trades(world, final, 1_000).violations
    overloaded = {**going, "merchants": 2, "resources": {"wood": 300, "iron": 100}}
    world, final = _trade_world(None, [overloaded, {**going, "id": 5}])  # 3 merchants of 1
    found = check_trades(world, replace(final, now_ms=T0 + 5_000), 1_000).violations
    assert any("merchants free" in v for v in found) and any("nobody" not in v for v in found)


def test_a_delivery_is_replayed_at_its_arrival() -> None:
    """Village 2 sends V 50 wood arriving at T0 + 10 s; V's stock must show it from then."""
    zero = dict.fromkeys(("wood", "clay", "iron", "crop"), 0)
    sent = {**zero, "wood": 50}
    answer = {"trade_id": 4, "target_village_id": V, "resources": sent, "merchants": 1,
              "spent_ms": T0, "depart_ms": T0, "arrive_ms": T0 + 10_000,
              "return_ms": T0 + 20_000}  # fmt: skip
    cmd = Command(1, 8, 2, "send_resources", {}, "t1", T0, status=200, answer=answer)
    body = {"type": "trade", "trade_id": 4, "time_ms": T0 + 10_000, "merchants": 1,
            "sender": {"player_id": 8, "village_id": 2}, "receiver": {"player_id": 7,
            "village_id": V}, "sent": sent, "delivered": sent, "lost": zero}  # fmt: skip
    baseline = Baseline(T0, {V: _row(T0, 100 * SCALE, 25)}, {V: {}}, {}, {})
    end = T0 + 120_000

    def check(wood: int) -> Check:
        final = _final(stock={V: _row(end, wood, 25)}, reports=[(1, 7, "trade", body, T0)],
                       idempotent={(8, "t1"): (200, answer, T0)})  # fmt: skip
        return check_resources(parse_world(_ledger(cmd), final, SPEED, Check("p", "")), baseline,
                               final)  # fmt: skip

    assert check(100 * SCALE + 25 * 120_000 + 50 * SCALE).violations == []
    assert check(100 * SCALE + 25 * 120_000).violations  # never credited
    assert check(100 * SCALE + 25 * 120_000 + 100 * SCALE).violations  # credited twice
