"""The checks on the ledger, events, orders, marches, battles, levels and troops."""

from __future__ import annotations

from collections import Counter, defaultdict

from chaos.checks.base import RESOURCES, Check
from chaos.checks.database import Baseline, Final
from chaos.checks.world import Battle, World, brief, unit_counts
from chaos.faults import Garbage
from chaos.players import Ledger
from refgame.battle import verify_report


def check_ledger(ledger: Ledger, final: Final) -> Check:
    c = Check(
        "commands_answered_and_committed_once",
        "every command got a definitive answer; each 2xx answer is committed exactly once "
        "with the same body (idempotent_responses), no refused command committed, and "
        "replaying a sample with the same Idempotency-Key returned the first answer",
    )
    keys = set()
    for cmd in ledger.commands:
        c.checked += 1
        k = (cmd.player_id, cmd.key)
        keys.add(k)
        stored = final.idempotent.get(k)
        if not cmd.resolved:
            c.fail(f"{cmd.path} {cmd.key}: no definitive answer after {cmd.attempts} attempts")
        elif cmd.ok and stored is None:
            c.fail(f"{cmd.path} {cmd.key}: answered {cmd.status} but nothing committed")
        elif cmd.ok and stored is not None and (stored[0], stored[1]) != (cmd.status, cmd.answer):
            c.fail(f"{cmd.path} {cmd.key}: the committed answer differs from the one received")
        elif not cmd.ok and stored is not None:
            c.fail(f"{cmd.path} {cmd.key}: answered {cmd.status} {cmd.code} but it committed")
    chaos_players = {p.player_id for p in ledger.players}
    for player_id, key in final.idempotent:
        if player_id in chaos_players and (player_id, key) not in keys:
            c.fail(f"committed command {key} of player {player_id} that nobody sent")
    for original, problem in ledger.replay_checks:
        c.checked += 1
        if problem:
            c.fail(f"replay of {original.path} {original.key}: {problem}")
    return c


def check_answers(ledger: Ledger) -> Check:
    c = Check(
        "outages_answer_503_never_500",
        "every answer the population got is documented: while Redis or PostgreSQL "
        "restarted, the web tier said 503 (retry) and never 500 (an unexpected error)",
    )
    for label, n in sorted(ledger.http.items()):
        c.checked += n
        if label.endswith(" 500"):
            c.fail(f"{n} x {label}")
    return c


def check_pending(final: Final, grace_ms: int) -> Check:
    c = Check(
        "no_event_pending_past_due",
        f"no scheduled_events row is due more than {grace_ms} ms ago; no event is both "
        "processed and still pending; no build or training order is left past its done time",
    )
    limit = final.now_ms - grace_ms
    processed_ids = {p[0] for p in final.processed}
    for event_id, kind, village, due in final.scheduled:
        c.checked += 1
        if due < limit:
            c.fail(f"event {event_id} ({kind}, village {village}) due {final.now_ms - due} ms ago")
        if event_id in processed_ids:
            c.fail(f"event {event_id} ({kind}) is processed and still pending")
    for what, rows in (("build", final.build_orders), ("training", final.training_orders)):
        for order_id, village, done in rows:
            c.checked += 1
            if done < limit:
                c.fail(f"{what} order {order_id} of village {village} left {final.now_ms - done} "
                       "ms past its done time")  # fmt: skip
    c.checked += len(final.processed)
    if len(processed_ids) != len(final.processed):
        c.fail("duplicate ids in processed_events")
    return c


def check_events_once(world: World, final: Final, garbage: list[Garbage]) -> Check:
    c = Check(
        "every_event_ran_exactly_once",
        "processed_events per (kind, village) equals what the committed commands and the "
        "battles imply: one build_done per build, one train_done per training, one march "
        "event per arrival (none for a recalled one) and per return home, one troops_lost "
        "per battle the attacker lost troops in, one trade_arrive per shipment and one "
        "trade_return per merchants home; no garbage entry ran",
    )
    expected: Counter[tuple[str, int]] = Counter()
    for cmd, _ in world.builds:
        expected["build_done", cmd.village_id] += 1
    for cmd, _ in world.trains:
        expected["train_done", cmd.village_id] += 1
    battles_by_key: dict[tuple[int, int, int], list[Battle]] = defaultdict(list)
    for battle in world.battles:
        battles_by_key[battle.key].append(battle)
    for sent in world.sent.values():
        if sent.recalled_at_ms is not None:
            expected["march", sent.origin] += 1  # the return only: the arrival was cancelled
            continue
        expected["march", sent.target] += 1
    for battle in world.battles:
        result = battle.result
        origin = battle.key[0]
        if any(n > 0 for n in result.attacker_survivors.values()):
            expected["march", origin] += 1
        if any(n > 0 for n in result.attacker_losses.values()):
            expected["troops_lost", origin] += 1
    on_the_way = {int(r["id"]) for r in final.trades}
    for trade in world.trades.values():
        expected["trade_arrive", trade.target] += 1
        if trade.trade_id not in on_the_way:
            expected["trade_return", trade.origin] += 1
    actual: Counter[tuple[str, int]] = Counter()
    for _, kind, village, _ in final.processed:
        actual[kind, village] += 1
    starvation_runs = sum(n for (kind, _), n in actual.items() if kind == "starvation")
    if starvation_runs:
        c.notes.append(f"{starvation_runs} starvation events ran (not predicted per village)")
    for k in set(expected) | {k for k in actual if k[0] != "starvation"}:
        c.checked += 1
        if expected[k] != actual[k]:
            c.fail(f"{k[0]} at village {k[1]}: {actual[k]} ran, {expected[k]} expected")
    garbage_ids = {g.event_id for g in garbage if g.event_id is not None}
    for event_id, kind, _, _ in final.processed:
        if event_id in garbage_ids:
            c.fail(f"garbage entry {event_id} ({kind}) was run")
    return c


def check_marches(world: World, final: Final, grace_ms: int) -> Check:
    c = Check(
        "marches_arrive_once_or_recalled",
        "each committed march either arrived once (one battle report pair with the troops "
        "sent, or one reinforcement) or was recalled, never both; each battle and "
        "reinforcement belongs to a sent march; no march row is left past its arrival",
    )
    arrivals: Counter[tuple[int, int, int]] = Counter()
    battle_troops: dict[tuple[int, int, int], list[dict[str, int]]] = defaultdict(list)
    for battle in world.battles:
        arrivals[battle.key] += 1
        battle_troops[battle.key].append(unit_counts(battle.result.attackers))
        if battle.defender is None:
            c.fail(f"battle {battle.key} has no defender report")
    reinforce_troops: dict[tuple[int, int, int], list[dict[str, int]]] = defaultdict(list)
    for body in world.reinforcements:
        k = (int(body["sender"]["village_id"]), int(body["receiver"]["village_id"]),
             int(body["time_ms"]))  # fmt: skip
        arrivals[k] += 1
        reinforce_troops[k].append(unit_counts(body["troops"]))
    expected: Counter[tuple[int, int, int]] = Counter()
    for sent in world.sent.values():
        c.checked += 1
        k = (sent.origin, sent.target, sent.arrive_ms)
        if sent.recalled_at_ms is not None:
            if arrivals[k]:
                c.fail(f"march {sent.march_id} was recalled and arrived too")
            continue
        expected[k] += 1
        pool = reinforce_troops[k] if sent.kind == "reinforce" else battle_troops[k]
        if sent.troops in pool:
            pool.remove(sent.troops)
        else:
            c.fail(f"march {sent.march_id} ({sent.kind}) never arrived with the troops it sent")
    for k, n in arrivals.items():
        if n > expected[k]:
            c.fail(f"{n - expected[k]} arrival(s) {k} that no sent march explains")
    for m in final.marches:
        c.checked += 1
        if int(m["arrive_ms"]) < final.now_ms - grace_ms:
            c.fail(f"march {m['id']} ({m['kind']}) still on the way past its arrival")
    return c


def check_battles(world: World) -> Check:
    c = Check(
        "battle_reports_replay",
        "every battle report replays from its seed to exactly its recorded result "
        "(refgame.battle.verify_report), and both sides' reports record the same battle",
    )
    for battle in world.battles:
        for body in (battle.attacker, battle.defender):
            if body is None:
                continue
            c.checked += 1
            if not verify_report(body):
                c.fail(f"report {brief(body)} does not replay to its result")
        if battle.defender is not None and (
            battle.defender["battle"] != battle.attacker["battle"]
            or battle.defender["loot"] != battle.attacker["loot"]
        ):
            c.fail(f"the two reports of {brief(battle.attacker)} differ")
    return c


def check_levels(world: World, baseline: Baseline, final: Final) -> Check:
    c = Check(
        "building_levels",
        "every building's level is its level before the load plus the committed build "
        "orders for it, whose target levels follow one another",
    )
    targets: dict[tuple[int, str], list[int]] = defaultdict(list)
    for cmd, _ in world.builds:
        assert cmd.answer is not None
        targets[cmd.village_id, str(cmd.answer["kind"])].append(int(cmd.answer["target_level"]))
    for vid, levels in final.buildings.items():
        for kind, level in levels.items():
            c.checked += 1
            start = baseline.buildings.get(vid, {}).get(kind, 0)
            got = sorted(targets.get((vid, kind), []))
            if level != start + len(got):
                c.fail(f"village {vid} {kind}: level {level}, expected {start} + {len(got)}")
            elif got != list(range(start + 1, level + 1)):
                c.fail(f"village {vid} {kind}: build targets {got} from level {start}")
    return c


def check_non_negative(final: Final) -> Check:
    c = Check(
        "nothing_negative_or_over_cap",
        "every stock is >= 0 and <= its cap, production rates of wood, clay and iron are "
        ">= 0, no troop count or march troop count is negative",
    )
    for vid, row in final.stock.items():
        c.checked += 1
        for res in RESOURCES:
            cap = row["granary_cap"] if res == "crop" else row["warehouse_cap"]
            if not 0 <= row[res] <= cap:
                c.fail(f"village {vid} {res} = {row[res]} outside 0..{cap}")
            if res != "crop" and row[f"{res}_rate"] < 0:
                c.fail(f"village {vid} {res}_rate = {row[f'{res}_rate']}")
    for village, home, unit, count in final.troops:
        c.checked += 1
        if count < 0:
            c.fail(f"{count} {unit} of village {home} in village {village}")
    for m in final.marches:
        c.checked += 1
        if any(int(n) < 0 for n in m["troops"].values()):
            c.fail(f"march {m['id']} carries {m['troops']}")
    return c


def check_troops(world: World, baseline: Baseline, final: Final) -> Check:
    c = Check(
        "troops_conserved",
        "per home village and unit: initial + trained = at home + reinforcing elsewhere + "
        "marching + lost attacking + lost defending + starved; and the same summed over "
        "the world",
    )
    left: dict[int, Counter[str]] = defaultdict(Counter)  # + what came in, - what is accounted
    for home, troops in baseline.troops.items():
        left[home].update(troops)
    for cmd, _ in world.trains:
        assert cmd.answer is not None
        left[cmd.village_id][str(cmd.answer["unit"])] += int(cmd.answer["count"])
    for _, home, unit, count in final.troops:
        left[home][unit] -= count
    for m in final.marches:
        left[int(m["origin_village_id"])].subtract(unit_counts(m["troops"]))
    unattributable = world.hosts & world.attacked
    for battle in world.battles:
        result = battle.result
        attacker, defender = battle.key[0], battle.key[1]
        left[attacker].subtract(unit_counts(result.attacker_losses))
        left[defender].subtract(unit_counts(result.defender_losses))
    for body in world.starvations:
        left[int(body["village"]["village_id"])].subtract(unit_counts(body["deaths"]))
    if unattributable:
        c.notes.append(
            f"{len(unattributable)} villages hosted reinforcements and were attacked: their "
            "defender losses are split per home and only the world total is checked for them"
        )
    world_total: Counter[str] = Counter()
    for home, units in left.items():
        for unit, n in units.items():
            world_total[unit] += n
            if home in unattributable:
                continue
            c.checked += 1
            if n:
                c.fail(f"village {home} {unit}: {n:+d} unaccounted")
    for unit, n in world_total.items():
        c.checked += 1
        if n:
            c.fail(f"the world's {unit}: {n:+d} unaccounted")
    return c
