"""A dead letter is never silent: the worker logs it at WARNING when it happens (its id,
kind and reason, never its payload) and counts it."""

from __future__ import annotations

import logging

import pytest

from common.queue import Event, EventQueue, NewEvent, RetryPolicy
from common.queue.handlers import HandlerRegistry
from common.queue.tx import Tx
from tests.queue.conftest import START_MS, Workers, eventually

SECRET = "payload-only-the-handler-sees"


async def always_fails(ctx: Tx, events: list[Event]) -> None:
    raise LookupError("village 0 does not exist")


async def test_a_dead_letter_is_logged_and_counted(
    queue: EventQueue, workers: Workers, caplog: pytest.LogCaptureFixture
) -> None:
    registry = HandlerRegistry()
    registry.register(
        "k", always_fails, durable=False, retry=RetryPolicy(max_attempts=1, base_ms=1, max_ms=1)
    )
    caplog.set_level(logging.WARNING)
    event_id = await queue.schedule(NewEvent("k", 0, START_MS, {"note": SECRET}))
    worker = workers.start(queue, registry, 0)

    async def dead() -> bool:
        return len(await queue.dead()) == 1

    await eventually(dead)
    records = [r for r in caplog.records if "dead letters" in r.getMessage()]
    assert len(records) == 1
    (record,) = records
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert str(event_id) in message and "(k," in message
    assert "LookupError: village 0 does not exist" in message
    assert SECRET not in message and all(SECRET not in r.getMessage() for r in caplog.records)
    assert worker.metrics.dead.labels("0")._value.get() == 1
