"""Rate limits in Redis: fixed windows, several limits checked in one round trip.

A window is ``[floor(now / window) * window, +window)`` on the app clock, so
tests move a ``ManualClock`` past it instead of sleeping. Fixed windows allow
a burst of up to twice the limit across a window edge; that is acceptable for
the purpose (stopping password guessing and command floods) and costs one INCR.

The checks of one hit are staged: a hit counts against a check only when every
check before it let it through, so an attacker over their own address's limit
spends nobody else's budget. Refused hits count against the check that refused
them (an address over its limit stays over it).

On a single Redis all checks of a hit run in one script call. On Redis Cluster
their counters lie in different slots (an address, an account), and a script may
touch one slot only: the checks run one call each, in order, up to the first
that refuses (the same staging, a round trip per check).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from redis.asyncio.cluster import RedisCluster

from common.clock import Clock
from common.fastredis import FastRedis, Script
from common.redis_conn import AnyRedis
from webfront import keys
from webfront.config import Limit
from webfront.errors import too_many

_SCRIPT = (Path(__file__).parent / "rate_limit.lua").read_text()


@dataclass(frozen=True)
class Check:
    scope: str  # e.g. "login-account"
    ident: str  # who is counted: a player id, an address, a hashed account name
    limit: Limit
    message: str  # said when the limit is hit


def hashed(text: str) -> str:
    """A short stable key part for arbitrary user text (names, addresses)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class RateLimiter:
    """With ``fast`` (the web tier's ``FastRedis``) a hit is one EVALSHA on its shared
    pipelined connection: every command pays for a hit, redis-py costs several times more."""

    def __init__(
        self, redis: AnyRedis, prefix: str, clock: Clock, fast: FastRedis | None = None
    ) -> None:
        self._redis = redis
        self._staged = isinstance(redis, RedisCluster)
        self._prefix = prefix
        self._clock = clock
        self._script = redis.register_script(_SCRIPT)
        self._fast = fast
        self._fast_script = Script(_SCRIPT)

    async def hit(self, *checks: Check, code: str = "rate_limited") -> None:
        """Count one hit against each check in order, up to the first one it is over;
        raise 429 with ``Retry-After`` then."""
        now = self._clock.now_ms()
        starts = [now - now % c.limit.window_ms for c in checks]
        counter_keys = [
            keys.rate_limit(self._prefix, c.scope, c.ident, start)
            for c, start in zip(checks, starts, strict=True)
        ]
        args = [n for c in checks for n in (c.limit.window_ms, c.limit.count)]
        if self._staged:  # a cluster: one call per check (its keys are in different slots)
            counts = []
            for i, key in enumerate(counter_keys):
                (count,) = await self._script(keys=[key], args=args[2 * i : 2 * i + 2])
                counts.append(count)
                if int(count) > checks[i].limit.count:
                    break
        elif self._fast is not None:
            counts = await self._fast.evalsha(self._fast_script, tuple(counter_keys), tuple(args))
        else:
            counts = await self._script(keys=counter_keys, args=args)
        retry_after_ms = 0
        message = ""
        # staged calls may stop early: the checks after a refusal were not counted
        for check, start, count in zip(checks, starts, counts, strict=False):
            if int(count) > check.limit.count:
                wait = start + check.limit.window_ms - now
                if wait > retry_after_ms:
                    retry_after_ms, message = wait, check.message
        if retry_after_ms:
            raise too_many(code, message, max(1, -(-retry_after_ms // 1000)))
