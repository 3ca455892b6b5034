"""Room for a run: the events must fit in Redis's maxmemory and in this machine's memory."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.queue.constants import PY_BYTES_PER_EVENT, REDIS_BYTES_PER_EVENT
from common.errors import FatalError


def _mem_available() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


async def check_memory(redis: Redis, redis_url: str, events: int) -> dict[str, Any]:
    """Refuse a size that would not fit in Redis (maxmemory) or in this machine's memory."""
    info = await redis.info("memory")
    need_redis = events * REDIS_BYTES_PER_EVENT
    need_local = events * PY_BYTES_PER_EVENT
    maxmemory = int(info.get("maxmemory", 0))
    used = int(info.get("used_memory", 0))
    gib = 2**30
    if maxmemory and used + need_redis > maxmemory * 0.9:
        raise FatalError(
            f"{events:,} events need about {need_redis / gib:.1f} GiB in Redis, but its "
            f"maxmemory is {maxmemory / gib:.1f} GiB with {used / gib:.1f} GiB used: "
            "use a smaller --events"
        )
    local = redis_url.startswith("unix://") or any(
        h in redis_url for h in ("127.0.0.1", "localhost", "[::1]")
    )
    available = _mem_available()
    need_here = need_local + (need_redis if local else 0)
    if available is not None and need_here > available * 0.8:
        raise FatalError(
            f"{events:,} events need about {need_here / gib:.1f} GiB of memory on this machine "
            f"(Redis and the bench), but only {available / gib:.1f} GiB are available: "
            "use a smaller --events"
        )
    return {"redis_used_bytes": used, "redis_maxmemory": maxmemory, "mem_available": available}
