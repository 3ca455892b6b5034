"""Every check run on one chaos run's final state, and their report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from chaos.checks.base import MAX_LISTED, Check
from chaos.checks.database import Baseline, Final, read_final
from chaos.checks.invariants import (
    check_answers,
    check_battles,
    check_events_once,
    check_ledger,
    check_levels,
    check_marches,
    check_non_negative,
    check_pending,
    check_troops,
)
from chaos.checks.outside import check_dead_letters, check_logs
from chaos.checks.resources import check_resources
from chaos.checks.social import check_alliances
from chaos.checks.trades import check_trades
from chaos.checks.world import World, parse_world
from chaos.faults import Garbage
from chaos.players import Ledger


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
        check_alliances(final),
        check_trades(world, final, grace_ms),
        await check_dead_letters(redis_url, redis_prefix, partitions, garbage),
        check_logs(log_dir, ledger, extra_logs),
    ]
    return CheckReport(checks), final, world
