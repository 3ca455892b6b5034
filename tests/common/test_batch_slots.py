"""``common.batch_slots``: at most ``slots`` batch runners at once, and the next one starts
while work waits."""

from __future__ import annotations

import asyncio

from common.batch_slots import BatchSlots


async def test_at_most_slots_runners_run_and_the_next_starts_while_work_waits() -> None:
    work = list(range(5))
    at_once: list[int] = []
    in_flight = 0
    gate = asyncio.Event()

    async def run() -> None:
        nonlocal in_flight
        in_flight += 1
        at_once.append(in_flight)
        await gate.wait()
        if work:  # another runner may have taken the last of it
            work.pop()
        in_flight -= 1

    slots = BatchSlots(2, run, lambda: bool(work))
    for _ in range(4):
        slots.wake()
    assert slots.running == 2 and len(slots.tasks) == 2
    await asyncio.sleep(0)  # both runners wait at the gate
    gate.set()
    while slots.tasks:
        await asyncio.gather(*slots.tasks)
    assert work == [] and max(at_once) == 2 and slots.running == 0
