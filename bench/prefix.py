"""The bench's Redis key prefix: checked before use, cleared after."""

from __future__ import annotations

import re

from redis.asyncio import Redis

from common.errors import FatalError

_PREFIX_RE = re.compile(r"wgbench[A-Za-z0-9_-]*")


def check_bench_prefix(prefix: str) -> str:
    """Refuse a Redis prefix the bench does not own (it deletes every key under it)."""
    if not _PREFIX_RE.fullmatch(prefix):
        raise FatalError(
            f"--prefix {prefix!r}: a bench prefix starts with 'wgbench' and holds only letters, "
            "digits, '_' and '-' (the bench deletes every key under it)"
        )
    return prefix


async def clear_prefix(redis: Redis, prefix: str) -> int:
    """Delete every key under ``prefix:`` (a bench prefix only); return how many."""
    check_bench_prefix(prefix)
    deleted = 0
    batch: list[bytes] = []
    async for key in redis.scan_iter(match=f"{prefix}:*", count=5000):
        batch.append(key)
        if len(batch) >= 1000:
            deleted += int(await redis.unlink(*batch))
            batch.clear()
    if batch:
        deleted += int(await redis.unlink(*batch))
    return deleted
