"""Real task-server processes (``gameserver --no-tick``) sharing the partitions."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from common.errors import FatalError


class TaskProcesses:
    """``n`` real task-server processes (``gameserver --no-tick``) sharing the partitions by
    their leases, as a deployment runs them; events are counted in ``processed_events``."""

    def __init__(self, settings: Any, n: int, batch: int) -> None:
        self.settings, self.n, self.batch = settings, n, batch
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self) -> None:
        import sys

        s = self.settings
        env = {
            **os.environ, "DATABASE_URL": s.database_url, "REDIS_URL": s.redis_url,
            "REDIS_PREFIX": s.redis_prefix, "QUEUE_PARTITIONS": str(s.queue_partitions),
            "TICK_SHARDS": str(s.tick_shards), "GAME": s.game, "WORLD_SPEED": str(s.world_speed),
            "GAMESERVER_METRICS_PORT": "0", "LOG_LEVEL": "WARNING",
        }  # fmt: skip
        for _ in range(self.n):
            args = ["-m", "gameserver", "--no-tick", "--batch-size", str(self.batch)]
            self.procs.append(await asyncio.create_subprocess_exec(sys.executable, *args, env=env))

    async def drain(
        self, engine: Any, kind: str, expected: int, due_ms: int, timeout_s: float
    ) -> float:
        """Seconds from ``due_ms`` (when every event became due) until ``expected`` events of
        ``kind`` are processed (polled every 50 ms, so at most 50 ms pessimistic)."""
        from sqlalchemy import text

        deadline = time.time() + timeout_s
        done = 0
        async with engine.connect() as conn:
            while time.time() < deadline:
                if any(p.returncode is not None for p in self.procs):
                    raise FatalError("a task-server process exited during the bench")
                done = int(
                    (await conn.execute(
                        text("SELECT count(*) FROM processed_events WHERE kind = :k"), {"k": kind}
                    )).scalar() or 0
                )  # fmt: skip
                await conn.rollback()
                if done >= expected:
                    return max(time.time() - due_ms / 1000, 1e-9)
                await asyncio.sleep(0.05)
        raise FatalError(f"the task servers ran {done:,} of {expected:,} {kind} events in time")

    async def stop(self) -> None:
        for p in self.procs:
            if p.returncode is None:
                p.terminate()
        for p in self.procs:
            try:
                await asyncio.wait_for(p.wait(), 15)
            except TimeoutError:
                p.kill()
                await p.wait()


def due_after_writing(events: int) -> int:
    """A due time for ``events`` bench events that falls after they are all written (allowing
    5,000/s) and after task servers started now have shared out the partitions."""
    return int((time.time() + 6 + events / 5_000) * 1000)


async def wait_until(due_ms: int, written: str) -> None:
    late = time.time() * 1000 - due_ms
    if late > 0:
        raise FatalError(f"writing the {written} took longer than planned ({late:.0f} ms past "
                         "their due time); the window would be wrong")  # fmt: skip
    await asyncio.sleep(-late / 1000)
