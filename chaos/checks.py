"""The invariants a chaos run checks, with SQL against the final database and the ledger.

Sources of truth, none of them the code under test's own bookkeeping alone:

- the *baseline*: every village's ``village_stock`` row, buildings and troops, read
  before the load started;
- the *ledger*: every command the population sent and the answer it got;
- the database at the end (after everything due ran): events, orders, marches,
  troops, stocks, reports, and ``idempotent_responses`` (the command's own
  record of its time; a build or training answer says when it spent: ``spent_ms``).

Each check lists what it verifies (``Check.what``); a violation is one sentence.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from chaos.faults import Garbage
from chaos.players import Command, Ledger
from common.amounts import SCALE
from common.clock import SYSTEM_CLOCK
from common.ids import id_created_ms
from common.queue import EventQueue
from common.queue.constants import PartitionKeys
from common.queue.events import DeadEvent
from db.models import (
    Building,
    BuildOrder,
    IdempotentResponse,
    March,
    ProcessedEvent,
    ScheduledEvent,
    TrainingOrder,
    Troop,
    Village,
    VillageStock,
)
from db.models import (
    Report as ReportRow,
)
from refgame.battle import BattleResult, battle_loot, verify_report
from refgame.buildings import FIELD_KINDS
from refgame.economy import field_production, village_caps, visible_stock
from refgame.travel import march_duration_ms
from refgame.units import total_upkeep

RESOURCES = ("wood", "clay", "iron", "crop")
FIELD_RESOURCE = {kind: res for res, kind in FIELD_KINDS.items()}
MAX_LISTED = 25  # violations kept per check in the summary


@dataclass
class Check:
    name: str
    what: str
    checked: int = 0
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # for a post-mortem, not the summary

    def fail(self, message: str) -> None:
        self.violations.append(message)


# ---- reading the database ------------------------------------------------------------------


@dataclass
class Baseline:
    """The world before the load: per village its stock row, buildings and troops."""

    taken_ms: int
    stock: dict[int, dict[str, int]]
    buildings: dict[int, dict[str, int]]
    troops: dict[int, Counter[str]]  # home village -> unit -> count (wherever they stand)
    villages: dict[int, tuple[int, int, int | None]]  # id -> (x, y, player_id)


async def _read_stock_and_buildings(
    conn: AsyncConnection,
) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    """Every village's stock row, and its building levels by kind."""
    stock = {
        int(r.village_id): dict(r._mapping)
        for r in await conn.execute(select(VillageStock.__table__))
    }
    buildings: dict[int, dict[str, int]] = defaultdict(dict)
    for vid, kind, level in await conn.execute(
        select(Building.village_id, Building.kind, Building.level)
    ):
        buildings[int(vid)][kind] = int(level)
    return stock, dict(buildings)


async def read_baseline(engine: AsyncEngine, taken_ms: int) -> Baseline:
    async with engine.connect() as conn:
        stock, buildings = await _read_stock_and_buildings(conn)
        troops: dict[int, Counter[str]] = defaultdict(Counter)
        for home, unit, count in await conn.execute(
            select(Troop.home_village_id, Troop.unit, Troop.count)
        ):
            troops[int(home)][unit] += int(count)
        villages = {
            int(v.id): (int(v.x), int(v.y), v.player_id)
            for v in await conn.execute(select(Village.id, Village.x, Village.y, Village.player_id))
        }
    return Baseline(taken_ms, stock, buildings, dict(troops), villages)


@dataclass
class Final:
    """The world at the end, after everything due has run."""

    now_ms: int
    stock: dict[int, dict[str, int]]
    buildings: dict[int, dict[str, int]]
    troops: list[tuple[int, int, str, int]]  # (village, home, unit, count)
    marches: list[dict[str, Any]]
    build_orders: list[tuple[int, int, int]]  # (id, village, done_ms)
    training_orders: list[tuple[int, int, int]]
    scheduled: list[tuple[int, str, int, int]]  # (id, kind, village, due_ms)
    processed: list[tuple[int, str, int, int]]  # (id, kind, village, processed_ms)
    reports: list[tuple[int, int, str, dict[str, Any], int]]  # (id, player, kind, body, created)
    idempotent: dict[tuple[int, str], tuple[int, dict[str, Any], int]]  # -> (status, body, ms)


async def read_final(engine: AsyncEngine, now_ms: int) -> Final:
    async with engine.connect() as conn:
        stock, buildings = await _read_stock_and_buildings(conn)
        troops = [
            (int(a), int(b), str(c), int(d))
            for a, b, c, d in await conn.execute(
                select(Troop.village_id, Troop.home_village_id, Troop.unit, Troop.count)
            )
        ]
        marches = [dict(r._mapping) for r in await conn.execute(select(March.__table__))]
        build_orders = [
            (int(a), int(b), int(c))
            for a, b, c in await conn.execute(
                select(BuildOrder.id, BuildOrder.village_id, BuildOrder.done_ms)
            )
        ]
        training_orders = [
            (int(a), int(b), int(c))
            for a, b, c in await conn.execute(
                select(TrainingOrder.id, TrainingOrder.village_id, TrainingOrder.done_ms)
            )
        ]
        scheduled = [
            (int(a), str(b), int(c), int(d))
            for a, b, c, d in await conn.execute(
                select(
                    ScheduledEvent.id,
                    ScheduledEvent.kind,
                    ScheduledEvent.village_id,
                    ScheduledEvent.due_ms,
                )
            )
        ]
        processed = [
            (int(a), str(b), int(c), int(d))
            for a, b, c, d in await conn.execute(
                select(
                    ProcessedEvent.event_id,
                    ProcessedEvent.kind,
                    ProcessedEvent.village_id,
                    ProcessedEvent.processed_ms,
                )
            )
        ]
        reports = [
            (int(a), int(b), str(c), d, int(e))
            for a, b, c, d, e in await conn.execute(
                select(
                    ReportRow.id,
                    ReportRow.player_id,
                    ReportRow.kind,
                    ReportRow.body,
                    ReportRow.created_ms,
                )
            )
        ]
        idempotent = {
            (int(p), str(k)): (int(s), b, int(c))
            for p, k, s, b, c in await conn.execute(
                select(
                    IdempotentResponse.player_id,
                    IdempotentResponse.key,
                    IdempotentResponse.status,
                    IdempotentResponse.body,
                    IdempotentResponse.created_ms,
                )
            )
        }
    return Final(
        now_ms, stock, buildings, troops, marches, build_orders, training_orders,
        scheduled, processed, reports, idempotent,
    )  # fmt: skip


# ---- what the population did, as committed -----------------------------------------------


@dataclass
class Sent:
    """A march the population sent (committed), and what became of it."""

    march_id: int
    origin: int
    target: int
    kind: str
    troops: dict[str, int]
    depart_ms: int
    arrive_ms: int
    recalled_at_ms: int | None = None
    return_ms: int | None = None


@dataclass
class Battle:
    attacker: dict[str, Any]  # the attacker's report body
    defender: dict[str, Any] | None
    follow_ups: dict[str, Any] = field(default_factory=dict)  # item kind -> its data object

    @property
    def key(self) -> tuple[int, int, int]:
        b = self.attacker
        return (int(b["attacker"]["village_id"]), int(b["defender"]["village_id"]),
                int(b["time_ms"]))  # fmt: skip

    @property
    def result(self) -> BattleResult:
        return BattleResult.from_dict(self.attacker["battle"])


@dataclass
class World:
    """The committed commands and the reports, parsed once for every check."""

    speed: float
    builds: list[tuple[Command, int]] = field(default_factory=list)  # (cmd, spent_ms)
    trains: list[tuple[Command, int]] = field(default_factory=list)
    sent: dict[int, Sent] = field(default_factory=dict)
    battles: list[Battle] = field(default_factory=list)
    reinforcements: list[dict[str, Any]] = field(default_factory=list)
    starvations: list[dict[str, Any]] = field(default_factory=list)
    hosts: set[int] = field(default_factory=set)  # villages that ever received reinforcements
    attacked: set[int] = field(default_factory=set)


def _units(d: Mapping[str, Any]) -> dict[str, int]:
    return {str(u): int(n) for u, n in d.items() if int(n)}


def parse_world(ledger: Ledger, final: Final, speed: float, check: Check) -> World:
    world = World(speed)
    for cmd in ledger.commands:
        if not cmd.ok or cmd.answer is None:
            continue
        a = cmd.answer
        spent_ms = int(a["spent_ms"]) if "spent_ms" in a else cmd.sent_ms
        if cmd.path == "build":
            world.builds.append((cmd, spent_ms))
        elif cmd.path == "train":
            world.trains.append((cmd, spent_ms))
        elif cmd.path == "march":
            world.sent[int(a["march_id"])] = Sent(
                int(a["march_id"]), cmd.village_id, int(a["target_village_id"]), str(a["kind"]),
                _units(a["troops"]), int(a["depart_ms"]), int(a["arrive_ms"]),
            )  # fmt: skip
    for cmd in ledger.commands:
        if cmd.ok and cmd.answer and cmd.path == "recall":
            sent = world.sent.get(int(cmd.body["march_id"]))
            stored = final.idempotent.get((cmd.player_id, cmd.key))
            if sent is None:
                check.fail(f"recall of march {cmd.body['march_id']} the ledger never sent")
                continue
            sent.recalled_at_ms = stored[2] if stored else cmd.sent_ms
            sent.return_ms = int(cmd.answer["arrive_ms"])
    defender_reports: dict[tuple[int, int, int, int], list[dict[str, Any]]] = defaultdict(list)
    for _, _, kind, body, _ in final.reports:
        if kind == "battle" and body.get("side") == "attacker":
            world.battles.append(Battle(body, None))
        elif kind == "battle":
            seed = int(body["battle"]["seed"])
            k = (int(body["attacker"]["village_id"]), int(body["defender"]["village_id"]),
                 int(body["time_ms"]), seed)  # fmt: skip
            defender_reports[k].append(body)
        elif kind == "reinforcement":
            world.reinforcements.append(body)
        elif kind == "starvation":
            world.starvations.append(body)
    for battle in world.battles:
        k = (*battle.key, int(battle.attacker["battle"]["seed"]))
        found = defender_reports.get(k)
        if found:
            battle.defender = found.pop()
        world.attacked.add(battle.key[1])
    for leftover in defender_reports.values():
        for body in leftover:
            check.fail(f"defender report without its attacker report: {_brief(body)}")
    # a reinforcement files one report per owner: keep one per arrival
    seen: set[tuple[int, int, int, str]] = set()
    unique = []
    for body in world.reinforcements:
        arrival = (
            int(body["sender"]["village_id"]),
            int(body["receiver"]["village_id"]),
            int(body["time_ms"]),
            json.dumps(body["troops"], sort_keys=True),
        )
        if arrival not in seen:
            seen.add(arrival)
            unique.append(body)
            world.hosts.add(arrival[1])
    world.reinforcements = unique
    return world


def _brief(body: Mapping[str, Any]) -> str:
    return (f"{body.get('type')} {body['attacker']['village_id']}->"
            f"{body['defender']['village_id']} at {body['time_ms']}")  # fmt: skip


# ---- the checks -------------------------------------------------------------------------


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
        "per battle the attacker lost troops in; no garbage entry ran",
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
        battle_troops[battle.key].append(_units(battle.result.attackers))
        if battle.defender is None:
            c.fail(f"battle {battle.key} has no defender report")
    reinforce_troops: dict[tuple[int, int, int], list[dict[str, int]]] = defaultdict(list)
    for body in world.reinforcements:
        k = (int(body["sender"]["village_id"]), int(body["receiver"]["village_id"]),
             int(body["time_ms"]))  # fmt: skip
        arrivals[k] += 1
        reinforce_troops[k].append(_units(body["troops"]))
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
                c.fail(f"report {_brief(body)} does not replay to its result")
        if battle.defender is not None and (
            battle.defender["battle"] != battle.attacker["battle"]
            or battle.defender["loot"] != battle.attacker["loot"]
        ):
            c.fail(f"the two reports of {_brief(battle.attacker)} differ")
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
        left[int(m["origin_village_id"])].subtract(_units(m["troops"]))
    unattributable = world.hosts & world.attacked
    for battle in world.battles:
        result = battle.result
        attacker, defender = battle.key[0], battle.key[1]
        left[attacker].subtract(_units(result.attacker_losses))
        left[defender].subtract(_units(result.defender_losses))
    for body in world.starvations:
        left[int(body["village"]["village_id"])].subtract(_units(body["deaths"]))
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


# ---- resource exactness: replay every village's production history ------------------------


@dataclass
class _State:
    stock: dict[str, int]
    rates: dict[str, int]
    warehouse_cap: int
    granary_cap: int
    updated_ms: int
    levels: dict[str, int]
    last_change_ms: int = 0  # the last item that wrote the row (others leave it as it is)

    def cap(self, res: str) -> int:
        return self.granary_cap if res == "crop" else self.warehouse_cap

    def settle(self, t: int) -> None:
        dt = t - self.updated_ms
        if dt <= 0:
            return
        for res in RESOURCES:
            value = min(self.cap(res), self.stock[res] + self.rates[res] * dt)
            self.stock[res] = max(0, value) if res == "crop" else value
        self.updated_ms = t


@dataclass
class _Item:
    t: int
    order: int  # events (0) before spends (1) at the same ms: a command refuses to run
    # while an event of its village is due and has not run
    kind: str
    data: Any


def _history(world: World, baseline: Baseline) -> dict[int, list[_Item]]:
    speed = world.speed
    items: dict[int, list[_Item]] = defaultdict(list)
    for cmd, spent in world.builds:
        assert cmd.answer is not None
        a = cmd.answer
        items[cmd.village_id].append(_Item(spent, 1, "spend", a["cost"]))
        items[cmd.village_id].append(
            _Item(int(a["done_ms"]), 0, "build", (str(a["kind"]), int(a["target_level"])))
        )
    for cmd, spent in world.trains:
        assert cmd.answer is not None
        a = cmd.answer
        items[cmd.village_id].append(_Item(spent, 1, "spend", a["cost"]))
        upkeep = total_upkeep({str(a["unit"]): int(a["count"])})
        items[cmd.village_id].append(_Item(int(a["done_ms"]), 0, "rate", {"crop": -upkeep}))
    for battle in world.battles:
        att, dfn = battle.attacker["attacker"], battle.attacker["defender"]
        t = int(battle.attacker["time_ms"])
        result = battle.result
        loot = {r: int(n) for r, n in battle.attacker["loot"].items()}
        own = _units(result.defender_losses)
        items[int(dfn["village_id"])].append(_Item(t, 0, "battle", (result, loot, own)))
        home, spot = (int(att["x"]), int(att["y"])), (int(dfn["x"]), int(dfn["y"]))
        lost = _units(result.attacker_losses)
        if lost:
            news = t + march_duration_ms(spot, home, lost, speed)
            battle.follow_ups["rate"] = {"crop": total_upkeep(lost)}
            items[int(att["village_id"])].append(_Item(news, 0, "rate", battle.follow_ups["rate"]))
        alive = _units(result.attacker_survivors)
        if alive and any(loot.values()):
            back = t + march_duration_ms(spot, home, alive, speed)
            battle.follow_ups["deposit"] = loot
            items[int(att["village_id"])].append(_Item(back, 0, "deposit", loot))
    for body in world.starvations:
        t = int(body["time_ms"])
        upkeep = total_upkeep(_units(body["deaths"]))
        items[int(body["village"]["village_id"])].append(_Item(t, 0, "rate", {"crop": upkeep}))
    return items


def _writes(item: _Item) -> bool:
    """Does the game write the village's stock row for this item?"""
    if item.kind in ("spend", "deposit"):
        return any(int(n) for n in item.data.values())
    if item.kind == "rate":
        return any(item.data.values())
    if item.kind == "build":
        return item.data[0] in FIELD_RESOURCE or item.data[0] in ("warehouse", "granary")
    if item.kind == "battle":
        _, loot, own = item.data
        return any(loot.values()) or bool(own)
    return True


def _replay(
    start: Mapping[str, int], levels: Mapping[str, int], items: list[_Item], speed: float
) -> tuple[_State, list[str]]:
    s = _State(
        {r: int(start[r]) for r in RESOURCES},
        {r: int(start[f"{r}_rate"]) for r in RESOURCES},
        int(start["warehouse_cap"]),
        int(start["granary_cap"]),
        int(start["updated_ms"]),
        dict(levels),
    )
    problems: list[str] = []
    for item in items:
        s.settle(item.t)
        if _writes(item):
            s.last_change_ms = item.t
        if item.kind == "spend":
            for res in RESOURCES:
                s.stock[res] -= int(item.data.get(res, 0)) * SCALE
                if s.stock[res] < 0:
                    problems.append(f"a spend at {item.t} took more {res} than there was")
        elif item.kind == "deposit":
            for res in RESOURCES:
                gain = int(item.data.get(res, 0)) * SCALE
                s.stock[res] = min(s.cap(res), s.stock[res] + gain)
        elif item.kind == "rate":
            for res, delta in item.data.items():
                s.rates[res] += delta
        elif item.kind == "build":
            kind, target = item.data
            old = s.levels.get(kind, 0)
            s.levels[kind] = target
            if kind in FIELD_RESOURCE:
                res = FIELD_RESOURCE[kind]
                s.rates[res] += field_production(target, speed) - field_production(old, speed)
            if kind in ("warehouse", "granary"):
                wh, gr = village_caps(s.levels)
                s.warehouse_cap, s.granary_cap = wh * SCALE, gr * SCALE
        elif item.kind == "battle":
            result, loot, own = item.data
            expected = battle_loot(result, visible_stock(s.stock))
            if {r: expected.get(r, 0) for r in RESOURCES} != {r: loot.get(r, 0) for r in RESOURCES}:
                problems.append(f"loot {loot} at {item.t}; the stock then gives {expected}")
            for res in RESOURCES:
                s.stock[res] -= loot.get(res, 0) * SCALE
            if own:
                s.rates["crop"] += total_upkeep(own)
    return s, problems


def _compare(s: _State, row: Mapping[str, int]) -> list[str]:
    """Differences between the replayed state and the final row, both settled to one time."""
    if s.last_change_ms > int(row["updated_ms"]):
        return [f"a change at {s.last_change_ms} is missing: the row is at {row['updated_ms']}"]
    at = max(s.updated_ms, int(row["updated_ms"]))
    db = _State(
        {r: int(row[r]) for r in RESOURCES},
        {r: int(row[f"{r}_rate"]) for r in RESOURCES},
        int(row["warehouse_cap"]),
        int(row["granary_cap"]),
        int(row["updated_ms"]),
        {},
    )
    s.settle(at)
    db.settle(at)
    out = []
    for res in RESOURCES:
        if s.stock[res] != db.stock[res]:
            out.append(f"{res} {db.stock[res]} != {s.stock[res]} (diff "
                       f"{db.stock[res] - s.stock[res]} at {at})")  # fmt: skip
        if s.rates[res] != db.rates[res]:
            out.append(f"{res}_rate {db.rates[res]} != {s.rates[res]}")
    if (s.warehouse_cap, s.granary_cap) != (db.warehouse_cap, db.granary_cap):
        out.append(f"caps {db.warehouse_cap}/{db.granary_cap} != "
                   f"{s.warehouse_cap}/{s.granary_cap}")  # fmt: skip
    return out


def _tie_orders(items: list[_Item], limit: int = 2000) -> Iterable[list[_Item]]:
    """Other run orders of events due in the same ms (their ids, unknown here, decide)."""
    groups = [list(g) for _, g in itertools.groupby(items, key=lambda i: (i.t, i.order))]
    ties = [i for i, g in enumerate(groups) if len(g) > 1]
    options = [list(itertools.permutations(groups[i])) for i in ties]
    for n, choice in enumerate(itertools.product(*options)):
        if n >= limit:
            return
        out = list(groups)
        for i, perm in zip(ties, choice, strict=True):
            out[i] = list(perm)
        yield [item for g in out for item in g]


def check_resources(world: World, baseline: Baseline, final: Final) -> Check:
    c = Check(
        "resources_exact",
        "every village's final stock, rates and caps equal the closed form of its history "
        "replayed from the baseline (production capped by storage; spends at the command's "
        "time; build/training completions, loot, returns with loot and news of losses at "
        "their due times), and the loot of every battle equals what the defender's "
        "replayed stock at that ms gives",
    )
    histories = _history(world, baseline)
    born = _follow_up_births(world, final, histories)
    unattributable = world.hosts & world.attacked
    for vid, start in baseline.stock.items():
        row = final.stock.get(vid)
        if row is None:
            c.fail(f"village {vid} disappeared")
            continue
        if vid in unattributable:
            continue
        c.checked += 1
        items = sorted(histories.get(vid, []), key=lambda i: (i.t, i.order))
        levels = baseline.buildings.get(vid, {})
        state, problems = _replay(start, levels, items, world.speed)
        diff = _compare(state, row)
        if diff:
            for other in _tie_orders(items):
                state, again = _replay(start, levels, other, world.speed)
                if not _compare(state, row):
                    problems, diff = again, []
                    c.notes.append(f"village {vid}: equal only with another order of ties")
                    break
        for p in problems:
            c.fail(f"village {vid}: {p}")
        if diff:
            diff.extend(_late_rate_change(start, levels, items, row, world.speed))
            late = [f"{i.kind} due {i.t} made at {made}" for i in items
                    if (made := born.get(id(i))) is not None and made > i.t]  # fmt: skip
            why = f" [follow-ups created after their due time: {', '.join(late)}]" if late else ""
            c.fail(f"village {vid} ({len(items)} changes): " + "; ".join(diff) + why)
            c.details[str(vid)] = {
                "baseline": dict(start),
                "final": dict(row),
                "items": [[i.t, i.order, i.kind, repr(i.data)] for i in items],
                "processed": [p for p in final.processed if p[2] == vid],
            }
    return c


def _late_rate_change(
    start: Mapping[str, int],
    levels: Mapping[str, int],
    items: list[_Item],
    row: Mapping[str, int],
    speed: float,
) -> list[str]:
    """Would one rate change applied ``s`` ms after its due time explain the difference?
    (Its effect on the stock is then ``-delta * s``; the shifted history is replayed.)"""
    state, _ = _replay(start, levels, items, speed)
    at = max(state.updated_ms, int(row["updated_ms"]))
    state.settle(at)
    out = []
    for res in RESOURCES:
        gap = int(row[res]) + int(row[f"{res}_rate"]) * (at - int(row["updated_ms"]))
        gap -= state.stock[res]
        if not gap:
            continue
        for n, item in enumerate(items):
            delta = item.data.get(res, 0) if item.kind == "rate" else 0
            if not delta or gap % delta or -gap // delta <= 0:
                continue
            shift = -gap // delta
            moved = _Item(item.t + shift, item.order, item.kind, item.data)
            other = sorted([*items[:n], *items[n + 1 :], moved], key=lambda i: (i.t, i.order))
            again, _ = _replay(start, levels, other, speed)
            if not _compare(again, row):
                out.append(f"= a {res} rate change of {delta:+d} due at {item.t} applied "
                           f"{shift} ms late")  # fmt: skip
    return out


def _follow_up_births(
    world: World, final: Final, histories: dict[int, list[_Item]]
) -> dict[int, int]:
    """id(item) -> when the battle that made a follow-up (news, return) actually ran.

    A battle runs when its arrival event is processed; that event was created when the
    march was sent (event ids carry their creation ms), so it is found among the
    processed ``march`` events of the target by the send time.
    """
    ran: dict[int, list[tuple[int, int]]] = defaultdict(list)  # village -> (created, processed)
    for event_id, kind, village, processed_ms in final.processed:
        if kind == "march":
            ran[village].append((id_created_ms(event_id), processed_ms))
    sends = {(s.origin, s.target, s.arrive_ms): s for s in world.sent.values()}
    out: dict[int, int] = {}
    for battle in world.battles:
        sent = sends.get(battle.key)
        if sent is None:
            continue
        near = [p for made, p in ran.get(sent.target, []) if abs(made - sent.depart_ms) < 2_000]
        if not near:
            continue
        origin = battle.key[0]
        for item in histories.get(origin, []):
            if item.data is battle.follow_ups.get(item.kind):
                out[id(item)] = min(near)
    return out


async def check_dead_letters(
    redis_url: str, prefix: str, partitions: int, garbage: list[Garbage]
) -> Check:
    c = Check(
        "malformed_entries_dead_lettered",
        "every malformed, oversized or unknown entry written into the queue is in its "
        "partition's dead-letter set with a reason (a durable one without a DB row may "
        "also be dropped: it has no effect either way), none is left waiting, none ran, "
        "and no real event is dead",
    )
    redis = Redis.from_url(redis_url)
    try:
        queue = EventQueue(redis, prefix=prefix, partitions=partitions, clock=SYSTEM_CLOCK)
        try:
            dead = await queue.dead(limit=10_000)
        except Exception as exc:  # listing must survive what the workers buried
            c.fail(f"EventQueue.dead() fails on the dead letters: {type(exc).__name__}: {exc}")
            dead = await _raw_dead(redis, prefix, partitions)
        by_partition: dict[int, list[DeadEvent]] = defaultdict(list)
        for d in dead:
            by_partition[d.partition].append(d)
            if not d.error:
                c.fail(f"a dead entry of partition {d.partition} has no reason")
        garbage_ids = {g.event_id for g in garbage if g.event_id is not None}
        for g in garbage:
            c.checked += 1
            if await redis.zscore(PartitionKeys(prefix, g.partition).due, g.blob) is not None:
                c.fail(f"garbage '{g.name}' is still waiting in partition {g.partition}")
            pool = by_partition[g.partition]
            match = next(
                (d for d in pool if d.member == g.member or (g.event_id and d.id == g.event_id)),
                None,
            )
            if match is None and g.event_id is None:  # no id to know it by: any unknown one
                match = next((d for d in pool if d.id not in garbage_ids), None)
            if g.expect == "dead" and match is None:
                c.fail(f"garbage '{g.name}' is not in the dead letters of {g.partition}")
            if match is not None:
                pool.remove(match)
        for p, left in by_partition.items():
            for d in left:
                c.fail(f"a real event is dead in partition {p}: {d.id} {d.error[:80]}")
        c.notes.extend(sorted({d.error[:70] for d in dead})[:12])
    finally:
        await redis.aclose()
    return c


async def _raw_dead(redis: Redis, prefix: str, partitions: int) -> list[DeadEvent]:
    """The dead-letter sets read without the queue's decoding (ids unknown)."""
    from common.queue.constants import MEMBER_LEN

    out = []
    for p in range(partitions):
        rows: list[Any] = await redis.zrange(PartitionKeys(prefix, p).dead, 0, -1, withscores=True)
        for entry, died in rows:
            out.append(DeadEvent(p, 0, bytes(entry)[:MEMBER_LEN], "?", 0, int(died), None))
    return out


def check_logs(log_dir: Path, ledger: Ledger, extra: tuple[Path, ...] = ()) -> Check:
    c = Check(
        "no_secrets_in_logs",
        "no process log (web, task servers, PostgreSQL) holds a player's password, "
        "session token or password hash",
    )
    secrets_ = {p.password: f"password of {p.name}" for p in ledger.players}
    secrets_.update({p.token: f"token of {p.name}" for p in ledger.players if p.token})
    scrypt = re.compile(rb"scrypt\$\d+\$")
    for path in sorted({*log_dir.rglob("*.log"), *(p for p in extra if p.exists())}):
        data = path.read_bytes()
        c.checked += 1
        if scrypt.search(data):
            c.fail(f"{path.name} holds a password hash")
        text = data.decode(errors="replace")
        for secret, what in secrets_.items():
            if secret in text:
                c.fail(f"{path.name} holds the {what}")
    return c


@dataclass
class CheckReport:
    checks: list[Check]

    @property
    def violations(self) -> int:
        return sum(len(c.violations) for c in self.checks)

    def as_dict(self) -> list[dict[str, Any]]:
        return [
            {
                "name": c.name,
                "what": c.what,
                "checked": c.checked,
                "violations": c.violations[:MAX_LISTED],
                "violation_count": len(c.violations),
                "notes": c.notes[:MAX_LISTED],
            }
            for c in self.checks
        ]


async def run_checks(
    *,
    engine: AsyncEngine,
    baseline: Baseline,
    ledger: Ledger,
    speed: float,
    now_ms: int,
    grace_ms: int,
    garbage: list[Garbage],
    redis_url: str,
    redis_prefix: str,
    partitions: int,
    log_dir: Path,
    extra_logs: tuple[Path, ...] = (),
) -> tuple[CheckReport, Final, World]:
    final = await read_final(engine, now_ms)
    parse = Check("reports_parse", "every report pairs up and every recall names a sent march")
    world = parse_world(ledger, final, speed, parse)
    parse.checked = len(final.reports)
    checks = [
        check_ledger(ledger, final),
        check_answers(ledger),
        parse,
        check_pending(final, grace_ms),
        check_events_once(world, final, garbage),
        check_marches(world, final, grace_ms),
        check_battles(world),
        check_levels(world, baseline, final),
        check_non_negative(final),
        check_troops(world, baseline, final),
        check_resources(world, baseline, final),
        await check_dead_letters(redis_url, redis_prefix, partitions, garbage),
        check_logs(log_dir, ledger, extra_logs),
    ]
    return CheckReport(checks), final, world
