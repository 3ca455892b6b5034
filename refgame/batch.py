"""The villages a batch of events works on, held in memory for the length of the batch.

A march arrival touches a dozen rows (the stock of the village, the troops in
it, its wall, two reports, the march). Run one by one, that is ~15 statements
per event; a batch of hundreds spends its time in round trips. ``BatchState``
instead reads what the batch needs with one SELECT per table, lets the rules
run in Python in the batch's run order against that state (so a return that
lands before a battle in the same batch is seen by it), and writes the result
back with one statement per table.

Rows that are rewritten from their in-memory value (stocks, troop counts) are
read ``FOR UPDATE`` on PostgreSQL, troops before stocks as every handler does,
so a concurrent command (a spend, troops leaving) waits for the batch instead
of being overwritten. On SQLite the batch's transaction already holds the
database's write lock (it began by deleting its event rows).

The arithmetic is ``db.stock``'s, in Python: settle with ``economy.stock_at`` at a time
(never backwards), then spend, deposit or change rates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from refgame import economy, state
from refgame.batch_io import BatchIO, TroopKey
from refgame.economy import starvation_time_ms
from refgame.resources import RESOURCES


class BatchState:
    """Stocks, troops, walls and village infos of a batch's villages; writes buffered."""

    def __init__(self, io: BatchIO, events: state.Scheduler) -> None:
        self.io = io
        self.events = events
        self.villages: dict[int, state.VillageInfo] = {}
        self.stocks: dict[int, dict[str, int]] = {}
        self.walls: dict[int, int] = {}
        # village -> home village -> unit -> count (what stands there now, in memory)
        self.troops: dict[int, dict[int, dict[str, int]]] = {}
        self._troop_deltas: dict[TroopKey, int] = defaultdict(int)
        self._dirty_stocks: set[int] = set()
        self._reports: list[dict[str, Any]] = []
        self._marches_deleted: list[int] = []
        self._marches_returning: list[dict[str, Any]] = []
        self._points: dict[int, list[int]] = {}  # player -> [attack, defence] points earned

    # ---- loading -------------------------------------------------------------------------

    async def load(self, villages: Iterable[int], info_for: Iterable[int] = ()) -> None:
        """Read (and lock) the troops and stocks of ``villages``, their walls, and the
        infos of them, of ``info_for`` and of every home village of troops standing in them."""
        ids = sorted(set(villages) - self.stocks.keys())
        if ids:
            for vid in ids:
                self.troops[vid] = {}
            for vid, home, unit, count in await self.io.troops(ids):  # troops, then stocks
                self.troops[vid].setdefault(home, {})[unit] = count
            self.stocks.update((row["village_id"], row) for row in await self.io.stocks(ids))
            self.walls.update(await self.io.walls(ids))
        homes = {home for vid in ids for home in self.troops[vid]}
        wanted = sorted((set(ids) | set(info_for) | homes) - self.villages.keys())
        if wanted:
            self.villages.update((v.id, v) for v in await self.io.villages(wanted))

    # ---- stocks: db.stock's rules on the in-memory row ------------------------------------

    def stock_at(self, village_id: int, at_ms: int) -> dict[str, int]:
        return economy.stock_at(self.stocks[village_id], at_ms)

    def _settle(
        self, village_id: int, at_ms: int, settled: dict[str, int] | None = None
    ) -> dict[str, int]:
        row = self.stocks[village_id]
        row.update(settled or self.stock_at(village_id, at_ms))
        row["updated_ms"] = max(row["updated_ms"], at_ms)
        self._dirty_stocks.add(village_id)
        return row

    def spend(self, village_id: int, amounts: Mapping[str, int], at_ms: int) -> bool:
        """Take fixed-point ``amounts`` if the stock at ``at_ms`` covers them (else nothing)."""
        settled = self.stock_at(village_id, at_ms)
        if any(settled[r] < amounts.get(r, 0) for r in RESOURCES):
            return False
        row = self._settle(village_id, at_ms, settled)
        for r in RESOURCES:
            row[r] -= amounts.get(r, 0)
        return True

    def deposit(self, village_id: int, amounts: Mapping[str, int], at_ms: int) -> None:
        """Add fixed-point ``amounts`` at ``at_ms``, capped by storage (the excess is lost)."""
        row = self._settle(village_id, at_ms)
        for r in RESOURCES:
            row[r] = min(_cap(row, r), row[r] + amounts.get(r, 0))

    def change_rates(self, village_id: int, at_ms: int, deltas: Mapping[str, int]) -> None:
        """``state.change_rates`` in memory: settle, add the deltas, watch for starvation."""
        deltas = {r: d for r, d in deltas.items() if d}
        if not deltas:
            return
        row = self._settle(village_id, at_ms)
        for r, d in deltas.items():
            row[f"{r}_rate"] += d
        if deltas.get("crop", 0) < 0 and row["crop_rate"] < 0:
            due = starvation_time_ms(row["crop"], row["crop_rate"], at_ms)
            if due is not None:
                self.events.schedule(state.STARVATION, village_id, due, {})

    # ---- troops ---------------------------------------------------------------------------

    def troops_in(self, village_id: int) -> dict[int, dict[str, int]]:
        """Every troop standing in the village by home village (counts > 0; a copy)."""
        out: dict[int, dict[str, int]] = {}
        for home, units in self.troops[village_id].items():
            alive = {u: n for u, n in units.items() if n > 0}
            if alive:
                out[home] = alive
        return out

    def add_troops(self, village_id: int, home_id: int, troops: Mapping[str, int]) -> None:
        units = self.troops[village_id].setdefault(home_id, {})
        for unit, n in troops.items():
            if n > 0:
                units[unit] = units.get(unit, 0) + n
                self._troop_deltas[(village_id, home_id, unit)] += n

    def remove_losses(
        self, village_id: int, losses_by_home: Mapping[int, Mapping[str, int]]
    ) -> None:
        for home, losses in losses_by_home.items():
            units = self.troops[village_id][home]
            for unit, lost in losses.items():
                units[unit] -= lost
                self._troop_deltas[(village_id, home, unit)] -= lost

    # ---- marches and reports --------------------------------------------------------------

    def delete_march(self, march_id: int) -> None:
        self._marches_deleted.append(march_id)

    def turn_march_home(self, march_id: int, values: Mapping[str, Any]) -> None:
        """Make the march row the return march (``values``: the columns that change)."""
        self._marches_returning.append({"march_id": march_id, **values})

    def add_report(
        self, player_id: int | None, kind: str, title: str, body: dict[str, Any], at_ms: int
    ) -> None:
        if player_id is not None:  # nobody gets a report for an abandoned village
            self._reports.append(
                {"player_id": player_id, "kind": kind, "title": title, "body": body,
                 "created_ms": at_ms}
            )  # fmt: skip

    def add_points(self, player_id: int, attack: int, defence: int) -> None:
        earned = self._points.setdefault(player_id, [0, 0])
        earned[0] += attack
        earned[1] += defence

    # ---- writing back ---------------------------------------------------------------------

    async def flush(self) -> None:
        """Write what the batch changed: about one statement per table."""
        changed = [(key, d) for key, d in sorted(self._troop_deltas.items()) if d]
        if changed:
            # relative writes: exact even beside a writer these rows were not locked against
            await self.io.add_troop_counts(changed)
            emptied = sorted({v for (v, h, u), _ in changed if self.troops[v][h][u] <= 0})
            if emptied:
                await self.io.delete_empty_troops(emptied)
        if self._dirty_stocks:
            await self.io.write_stocks([self.stocks[v] for v in sorted(self._dirty_stocks)])
        if self._marches_deleted:
            await self.io.delete_marches(self._marches_deleted)
        if self._marches_returning:
            await self.io.turn_marches_home(self._marches_returning)
        if self._reports:
            await self.io.insert_reports(self._reports)
        if self._points:
            await self.io.add_points([(p, a, d) for p, (a, d) in sorted(self._points.items())])
            self._points.clear()
        self._troop_deltas.clear()
        self._dirty_stocks.clear()
        self._marches_deleted, self._marches_returning, self._reports = [], [], []


def _cap(row: Mapping[str, int], resource: str) -> int:
    return row["granary_cap"] if resource == "crop" else row["warehouse_cap"]
