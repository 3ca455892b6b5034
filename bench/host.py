"""The machine around a bench run: load, CPU per process, server versions."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis.asyncio import Redis


def load_average() -> float:
    """The 1-minute load average (0 where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return 0.0


def warn_if_busy(load_at_start: float) -> None:
    """Say so when other processes kept the CPUs busy before the run started."""
    cores = os.cpu_count() or 1
    if load_at_start > 0.5 * cores:
        from bench.report import console

        console.print(
            f"[yellow]note: the load average was {load_at_start:.1f} on {cores} cores before "
            "this run: other processes share the CPUs, so the figures (even the ratios) are "
            "noisier than on a quiet machine[/yellow]"
        )


def cpu_by_pid(pids: Sequence[int]) -> dict[int, float]:
    """CPU seconds each live process of ``pids`` and its reaped children have used so far
    (user + system; a PostgreSQL backend that exits is added to the postmaster's)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited
        out[pid] = sum(int(f) for f in fields[11:15]) / tick
    return out


def backend_pids(database: str) -> list[int]:
    """The local PostgreSQL backends serving ``database`` (none if it runs elsewhere)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                title = (proc / "cmdline").read_bytes().decode(errors="replace").split()
                if title[:1] == ["postgres:"] and database in title:
                    pids.append(int(proc.name))
    return pids


class CpuMeter:
    """CPU used by the task server(s) and by the bench database's PostgreSQL backends during
    a phase: a rate measured on a shared machine says little; CPU per event says what it
    costs. Read ``per_event_us`` while the task servers still hold their connections."""

    def __init__(self, task_pids: Sequence[int], database: str) -> None:
        self.task_pids, self.database = list(task_pids), database
        self.before = cpu_by_pid(self.task_pids), cpu_by_pid(backend_pids(database))

    def per_event_us(self, events: int) -> dict[str, float]:
        out = {}
        for name, before, pids in (
            ("task_server", self.before[0], self.task_pids),
            ("postgres", self.before[1], backend_pids(self.database)),
        ):
            after = cpu_by_pid(pids)
            used = sum(t - before.get(pid, 0.0) for pid, t in after.items())
            out[name] = used / max(events, 1) * 1e6
        return out


def database_name(settings: Any) -> str:
    from sqlalchemy.engine import make_url

    return str(make_url(settings.database_url).database)


async def redis_version(redis_url: str) -> str | None:
    client = Redis.from_url(redis_url, socket_timeout=3)
    try:
        return str((await client.info("server")).get("redis_version"))
    except Exception:
        return None
    finally:
        await client.aclose()


async def db_version(engine: Any) -> str:
    from sqlalchemy import text

    async with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            return str((await conn.execute(text("SHOW server_version"))).scalar())
        return "sqlite " + str((await conn.execute(text("SELECT sqlite_version()"))).scalar())
