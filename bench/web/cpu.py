"""CPU accounting: which process burned the cores during a run."""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Sequence
from pathlib import Path


class CpuWatch:
    """CPU seconds of the server processes, Redis (INFO) and the load generator (children)."""

    def __init__(self, server_pids: Sequence[int], redis_url: str | None) -> None:
        self.server_pids = list(server_pids)
        self.redis_url = redis_url

    def _server(self) -> float:
        total = 0.0
        for pid in self.server_pids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def _redis(self) -> float:
        if not self.redis_url:
            return 0.0
        from redis import Redis as SyncRedis

        try:
            client = SyncRedis.from_url(self.redis_url, socket_timeout=2)
            info = client.info("cpu")
            client.close()
        except Exception:
            return 0.0
        return float(info.get("used_cpu_sys", 0)) + float(info.get("used_cpu_user", 0))

    def sample(self) -> dict[str, float]:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            "server": self._server(),
            "redis": self._redis(),
            "load_generator": children.ru_utime + children.ru_stime,
            "wall": time.perf_counter(),
        }

    def since(self, before: dict[str, float]) -> dict[str, float]:
        now = self.sample()
        return {k: round(now[k] - before[k], 3) for k in now}
