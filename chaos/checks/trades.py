"""Merchants' conservation: every unit sent is delivered, lost (reported) or on the way, and
no village ever had more merchants out than its marketplace gives."""

from __future__ import annotations

from collections import Counter, defaultdict

from chaos.checks.base import RESOURCES, Check
from chaos.checks.database import Final
from chaos.checks.world import World
from refgame.trade import MERCHANT_CAPACITY, merchants_needed, merchants_total


def check_trades(world: World, final: Final, grace_ms: int) -> Check:
    c = Check(
        "merchants_conserve_goods",
        "per resource, the units the committed sends took = delivered + returned (none: "
        "this ruleset loses what does not fit) + lost (both players' trade reports) + in "
        "transit (trades rows on the way there); each trade is reported once per player "
        "with sent = delivered + lost and the units and merchants it was sent with; busy "
        "merchants never exceed a village's marketplace, never negative, never overloaded; "
        "no trade row left past its time, none that nobody sent",
    )
    rows = {int(r["id"]): r for r in final.trades}
    sent: Counter[str] = Counter()
    accounted: Counter[str] = Counter()
    for trade in world.trades.values():
        c.checked += 1
        sent.update(trade.resources)
        if trade.merchants != merchants_needed(trade.resources):
            c.fail(f"trade {trade.trade_id} took {trade.merchants} merchants for "
                   f"{sum(trade.resources.values())} units")  # fmt: skip
        bodies = world.trade_reports.get(trade.trade_id, [])
        row = rows.get(trade.trade_id)
        if not bodies:
            if row is None or row["homebound"]:
                c.fail(f"trade {trade.trade_id}: neither reported nor on the way")
                continue
            if trade.arrive_ms < final.now_ms - grace_ms:
                c.fail(f"trade {trade.trade_id} still on the way past its arrival")
            carried = {r: int(row["resources"].get(r, 0)) for r in RESOURCES}
            if carried != {r: trade.resources.get(r, 0) for r in RESOURCES}:
                c.fail(f"trade {trade.trade_id} carries {row['resources']}, sent {trade.resources}")
            accounted.update({r: int(n) for r, n in row["resources"].items()})
            continue
        body = bodies[0]
        ends = {body["sender"].get("player_id"), body["receiver"].get("player_id")} - {None}
        if len(bodies) != len(ends) or any(b != body for b in bodies):
            c.fail(f"trade {trade.trade_id}: {len(bodies)} reports for {len(ends)} players, "
                   "or they differ")  # fmt: skip
        delivered = {r: int(body["delivered"].get(r, 0)) for r in RESOURCES}
        lost = {r: int(body["lost"].get(r, 0)) for r in RESOURCES}
        if {r: int(body["sent"].get(r, 0)) for r in RESOURCES} != {
            r: trade.resources.get(r, 0) for r in RESOURCES
        }:
            c.fail(f"trade {trade.trade_id} reports {body['sent']} sent, the send took "
                   f"{trade.resources}")  # fmt: skip
        if any(n < 0 for n in (*delivered.values(), *lost.values())):
            c.fail(f"trade {trade.trade_id}: negative delivered {delivered} or lost {lost}")
        if int(body["time_ms"]) != trade.arrive_ms:
            c.fail(f"trade {trade.trade_id} arrived at {body['time_ms']}, due {trade.arrive_ms}")
        if row is not None and (row["delivered"] != delivered or row["lost"] != lost):
            c.fail(f"trade {trade.trade_id}: its row and its report disagree")
        if row is not None and int(row["return_ms"]) < final.now_ms - grace_ms:
            c.fail(f"trade {trade.trade_id}: merchants not home past their return")
        accounted.update(delivered)
        accounted.update(lost)
    for res in RESOURCES:
        c.checked += 1
        if sent[res] != accounted[res]:
            c.fail(f"{res}: {sent[res]} sent, {accounted[res]} delivered + lost + in transit")
    for trade_id in set(rows) - set(world.trades):
        c.fail(f"trade row {trade_id} that no committed send made")
    _check_merchants(c, world, final)
    return c


def _check_merchants(c: Check, world: World, final: Final) -> None:
    """Busy merchants over time (send to due return, from the answers) and at the end."""
    spans: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for t in world.trades.values():
        spans[t.origin].append(
            (t.depart_ms, t.arrive_ms + (t.arrive_ms - t.depart_ms), t.merchants)
        )
    for village, trades in spans.items():
        total = merchants_total(final.buildings.get(village, {}).get("marketplace", 0))
        for depart, _, _ in trades:
            c.checked += 1
            busy = sum(n for d, back, n in trades if d <= depart < back)
            if busy > total:
                c.fail(f"village {village}: {busy} merchants out at {depart}, it has {total}")
    busy_now: Counter[int] = Counter()
    for row in final.trades:
        c.checked += 1
        n = int(row["merchants"])
        busy_now[int(row["origin_village_id"])] += n
        load = sum(int(v) for v in row["resources"].values())
        if n < 1 or load > n * MERCHANT_CAPACITY:
            c.fail(f"trade {row['id']}: {load} units on {n} merchants")
    for village, n in busy_now.items():
        total = merchants_total(final.buildings.get(village, {}).get("marketplace", 0))
        if not 0 <= total - n <= total:
            c.fail(f"village {village}: {total - n} of {total} merchants free")
