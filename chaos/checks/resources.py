"""Resource exactness: replay every village's production history from the baseline."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chaos.checks.base import FIELD_RESOURCE, RESOURCES, Check
from chaos.checks.database import Baseline, Final
from chaos.checks.world import World, unit_counts
from common.amounts import SCALE
from common.ids import id_created_ms
from refgame.battle import battle_loot
from refgame.economy import field_production, village_caps, visible_stock
from refgame.travel import march_duration_ms
from refgame.units import total_upkeep


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
        own = unit_counts(result.defender_losses)
        items[int(dfn["village_id"])].append(_Item(t, 0, "battle", (result, loot, own)))
        home, spot = (int(att["x"]), int(att["y"])), (int(dfn["x"]), int(dfn["y"]))
        lost = unit_counts(result.attacker_losses)
        if lost:
            news = t + march_duration_ms(spot, home, lost, speed)
            battle.follow_ups["rate"] = {"crop": total_upkeep(lost)}
            items[int(att["village_id"])].append(_Item(news, 0, "rate", battle.follow_ups["rate"]))
        alive = unit_counts(result.attacker_survivors)
        if alive and any(loot.values()):
            back = t + march_duration_ms(spot, home, alive, speed)
            battle.follow_ups["deposit"] = loot
            items[int(att["village_id"])].append(_Item(back, 0, "deposit", loot))
    for body in world.starvations:
        t = int(body["time_ms"])
        upkeep = total_upkeep(unit_counts(body["deaths"]))
        items[int(body["village"]["village_id"])].append(_Item(t, 0, "rate", {"crop": upkeep}))
    for trade in world.trades.values():
        items[trade.origin].append(_Item(trade.spent_ms, 1, "spend", trade.resources))
        bodies = world.trade_reports.get(trade.trade_id)
        if bodies:  # arrived (else the trades check names it): the target took what fit
            body = bodies[0]
            arrival = (trade.resources, {r: int(n) for r, n in body["delivered"].items()})
            items[trade.target].append(_Item(int(body["time_ms"]), 0, "trade_in", arrival))
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
        elif item.kind == "trade_in":
            sent, delivered = item.data
            fits = {r: min(int(sent.get(r, 0)), max(0, s.cap(r) - s.stock[r]) // SCALE)
                    for r in RESOURCES}  # fmt: skip
            if fits != {r: delivered.get(r, 0) for r in RESOURCES}:
                problems.append(f"trade at {item.t} delivered {delivered}; room for {fits}")
            for res in RESOURCES:
                s.stock[res] += delivered.get(res, 0) * SCALE
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
        "time; build/training completions, loot, returns with loot, news of losses and "
        "merchants' deliveries (what fits under the caps) at their due times), and the "
        "loot of every battle equals what the defender's replayed stock at that ms gives",
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
