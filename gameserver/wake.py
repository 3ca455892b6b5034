"""Wake-ups: one pub/sub connection per process wakes the worker of a partition when an
event is scheduled earlier than the time that worker sleeps until.

Scheduling publishes ``partition:due_ms[,partition:due_ms...]`` on the world's
wake channel; a worker that is busy (not sleeping) ignores it, it claims
again anyway.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from common.queue.constants import wake_channel
from common.redis_conn import AnyRedis
from gameserver.redis_client import node_client

log = logging.getLogger(__name__)


class Sleeper(Protocol):
    @property
    def wake(self) -> asyncio.Event: ...

    wake_before: float  # ms; math.inf while not sleeping


class WakeListener:
    """Wakes the sleeper attached to a partition when an event due before its wake-up
    time is scheduled there."""

    def __init__(self, redis: AnyRedis, prefix: str) -> None:
        self._redis = redis
        self._channel = wake_channel(prefix)
        self._sleepers: dict[int, Sleeper] = {}
        self.ready = asyncio.Event()  # subscribed (tests wait for it)

    def attach(self, partition: int, sleeper: Sleeper) -> None:
        self._sleepers[partition] = sleeper

    def detach(self, partition: int) -> None:
        self._sleepers.pop(partition, None)

    def _wake_all(self) -> None:
        for sleeper in self._sleepers.values():
            sleeper.wake.set()

    def notify(self, data: bytes) -> None:
        """Handle one wake message."""
        for item in data.split(b","):
            try:
                partition, due = item.split(b":")
                sleeper = self._sleepers.get(int(partition))
                if sleeper is not None and int(due) < sleeper.wake_before:
                    sleeper.wake.set()
            except ValueError:
                log.warning("ignoring a malformed wake message %r", item[:64])

    async def run(self) -> None:
        """Listen until cancelled; reconnect after errors (and wake everyone: a message
        may have been missed meanwhile)."""
        client = node_client(self._redis)
        owned = client is not self._redis
        try:
            while True:
                try:
                    await self._listen(client)
                except (RedisError, OSError) as exc:
                    self.ready.clear()
                    log.warning("wake-up subscription lost (%s); reconnecting", exc)
                    await asyncio.sleep(0.5)
        finally:
            if owned:
                await client.aclose()

    async def _listen(self, client: Redis) -> None:
        async with client.pubsub() as pubsub:
            await pubsub.subscribe(self._channel)
            self._wake_all()
            self.ready.set()
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=30.0)
                if message is not None and message["type"] == "message":
                    self.notify(message["data"])
