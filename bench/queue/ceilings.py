"""The ceilings: the same event bytes through redis-py, with no queue logic."""

from __future__ import annotations

import time
from typing import Any

import msgpack
from redis.asyncio import Redis

from bench.queue.constants import BENCH_KIND, SCHEDULE_CALL

_POP = """
local m = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #m > 0 then redis.call('ZREM', KEYS[1], unpack(m)) end
return m
"""
_pack = msgpack.Packer().pack


def raw_key(prefix: str, partition: int) -> str:
    return f"{prefix}:raw:{{r{partition}}}"


def event_blob(i: int, due_ms: int) -> bytes:
    """An event as the queue stores it: member (priority, id), due ms, msgpack body."""
    body = _pack([i + 1, BENCH_KIND, i + 1, due_ms, 0, {"order_id": i + 1}, 0, False])
    return b"%04x%016x%013d" % (32768, i + 1, due_ms) + body


async def raw_zadd(
    redis: Redis, prefix: str, partitions: int, events: int, start_ms: int, progress: Any
) -> float:
    """Encode ``events`` events and ZADD them (the whole blob as member), as many members per
    command as fall in a partition, one pipeline per ``SCHEDULE_CALL`` events; return seconds.
    """
    keys = [raw_key(prefix, p) for p in range(partitions)]
    started = time.perf_counter()
    for call_start in range(0, events, SCHEDULE_CALL):
        call_stop = min(events, call_start + SCHEDULE_CALL)
        groups: dict[int, dict[bytes, int]] = {}
        for i in range(call_start, call_stop):
            group = groups.get(i % partitions)
            if group is None:
                group = groups[i % partitions] = {}
            group[event_blob(i, start_ms)] = start_ms
        async with redis.pipeline(transaction=False) as pipe:
            for p, members in groups.items():
                pipe.zadd(keys[p], members)
            await pipe.execute()
        progress.update(call_stop - call_start)
    return time.perf_counter() - started


async def bare_pop(
    redis: Redis, prefix: str, partitions: int, batch: int, progress: Any
) -> tuple[int, float]:
    """Pop every raw event in batches of ``batch`` with a bare Lua script (ZRANGEBYSCORE +
    ZREM), one call per non-empty partition per round trip; return (events, seconds)."""
    sha = await redis.script_load(_POP)
    keys = [raw_key(prefix, p) for p in range(partitions)]
    left = list(range(partitions))
    popped = 0
    now = int(time.time() * 1000) + 10_000
    started = time.perf_counter()
    while left:
        async with redis.pipeline(transaction=False) as pipe:
            for p in left:
                pipe.evalsha(sha, 1, keys[p], now, batch)
            replies = await pipe.execute()
        still = []
        for p, members in zip(left, replies, strict=True):
            popped += len(members)
            progress.update(len(members))
            if len(members) == batch:
                still.append(p)
        left = still
    return popped, time.perf_counter() - started
