"""Event kinds every task server knows, for smoke tests and benchmarks."""

from __future__ import annotations

from common.queue.events import Event
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx

NOOP = "gameserver.noop"  # in-memory, does nothing
NOOP_DURABLE = "gameserver.noop.durable"  # durable: only the processed record is written


async def noop(ctx: Tx, events: list[Event]) -> None:
    """Do nothing: measures the queue itself."""


def register(registry: HandlerRegistry) -> None:
    registry.register(NOOP, noop, durable=False)
    registry.register(NOOP_DURABLE, noop, durable=True)
