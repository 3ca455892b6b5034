"""What the population did, as committed: the ledger's commands matched with the database."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chaos.checks.base import Check
from chaos.checks.database import Final
from chaos.players import Command, Ledger
from refgame.battle import BattleResult


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
class TradeSent:
    """Resources the population sent with merchants (committed), from the command's answer."""

    trade_id: int
    origin: int
    target: int
    resources: dict[str, int]  # whole units per resource
    merchants: int
    spent_ms: int
    depart_ms: int
    arrive_ms: int


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
    trades: dict[int, TradeSent] = field(default_factory=dict)
    trade_reports: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # by trade id
    hosts: set[int] = field(default_factory=set)  # villages that ever received reinforcements
    attacked: set[int] = field(default_factory=set)


def unit_counts(d: Mapping[str, Any]) -> dict[str, int]:
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
                unit_counts(a["troops"]), int(a["depart_ms"]), int(a["arrive_ms"]),
            )  # fmt: skip
        elif cmd.path == "send_resources":
            world.trades[int(a["trade_id"])] = TradeSent(
                int(a["trade_id"]), cmd.village_id, int(a["target_village_id"]),
                {str(r): int(n) for r, n in a["resources"].items()}, int(a["merchants"]),
                spent_ms, int(a["depart_ms"]), int(a["arrive_ms"]),
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
        elif kind == "trade":  # one per player of the two villages
            world.trade_reports.setdefault(int(body["trade_id"]), []).append(body)
    for battle in world.battles:
        k = (*battle.key, int(battle.attacker["battle"]["seed"]))
        found = defender_reports.get(k)
        if found:
            battle.defender = found.pop()
        world.attacked.add(battle.key[1])
    for leftover in defender_reports.values():
        for body in leftover:
            check.fail(f"defender report without its attacker report: {brief(body)}")
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


def brief(body: Mapping[str, Any]) -> str:
    return (f"{body.get('type')} {body['attacker']['village_id']}->"
            f"{body['defender']['village_id']} at {body['time_ms']}")  # fmt: skip
