"""``common.batch_slots``: at most ``slots`` batch runners at once, and the next one starts
while work waits."""

from __future__ import annotations

import asyncio

import pytest

from common.batch_slots import BatchSlots
from common.clock import ManualClock
from tests.waiting import wait_for


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


async def test_gathering_takes_quiet_work_at_once_and_work_within_the_window_in_one_batch() -> None:
    clock = ManualClock()
    work: list[str] = []
    batches: list[list[str]] = []
    taken = asyncio.Event()

    async def run() -> None:
        batches.append(work[:])
        work.clear()
        taken.set()

    slots = BatchSlots(4, run, lambda: bool(work), gather_ms=20, clock=clock)

    async def ask(item: str) -> None:
        work.append(item)
        slots.wake()

    await ask("a")  # nothing taken for 20 ms: at once, the clock standing still
    await taken.wait()
    assert batches == [["a"]]
    await clock.advance(5)
    taken.clear()
    await ask("b")
    await wait_for(clock.slept_on, "a runner gathering")
    await ask("c")  # no second runner starts: the one gathering takes it
    await ask("d")
    assert slots.running == 1 and slots.gathering and batches == [["a"]]
    await clock.advance(14)  # 19 ms after the first batch: still gathering
    await wait_for(clock.slept_on, "still gathering")
    assert batches == [["a"]]
    await clock.advance(1)
    await taken.wait()
    assert batches == [["a"], ["b", "c", "d"]]
    while slots.tasks:
        await asyncio.gather(*slots.tasks)
    assert slots.running == 0 and not slots.gathering
    await clock.advance(20)  # quiet for the window again: at once
    taken.clear()
    await ask("e")
    await taken.wait()
    assert batches[-1] == ["e"]


async def test_a_runner_that_finds_nothing_leaves_the_window_unused() -> None:
    clock = ManualClock()
    work: list[str] = []
    batches: list[list[str]] = []

    async def run() -> None:
        if work:
            batches.append(work[:])
            work.clear()

    slots = BatchSlots(4, run, lambda: bool(work), gather_ms=20, clock=clock)
    work += ["a", "b"]
    slots.wake()
    slots.wake()  # two runners start in one loop iteration: the first takes both
    await wait_for(lambda: slots.running == 0, "both runners done, the clock standing still")
    assert batches == [["a", "b"]] and not slots.gathering
    await clock.advance(20)  # quiet for the window since that batch: the next is at once
    work.append("c")
    slots.wake()
    await wait_for(lambda: batches == [["a", "b"], ["c"]], "c taken, the clock standing still")


async def test_a_whole_batch_waiting_ends_the_gathering_at_once() -> None:
    """A backlog: the window would only cap the batches a second, so a full batch is taken
    without waiting for it (the clock standing still)."""
    clock = ManualClock()
    start = clock.now_ms()
    work: list[str] = []
    batches: list[list[str]] = []

    async def run() -> None:
        batches.append(work[:3])
        del work[:3]

    slots = BatchSlots(
        4, run, lambda: bool(work), gather_ms=20, clock=clock, full=lambda: len(work) >= 3
    )
    work.append("a")
    slots.wake()
    await wait_for(lambda: batches == [["a"]], "a taken at once")
    work.append("b")
    slots.wake()
    await wait_for(clock.slept_on, "a runner gathering")
    work.append("c")
    slots.wake()
    assert slots.gathering and batches == [["a"]]  # two of three: it still gathers
    work.append("d")
    slots.wake()  # three wait: a whole batch
    await wait_for(lambda: batches == [["a"], ["b", "c", "d"]], "b-d taken, no clock moved")
    work.extend(["e", "f", "g"])
    slots.wake()  # within the window of the last batch, but whole: at once
    await wait_for(lambda: len(batches) == 3, "e-g taken, no clock moved")
    assert batches[-1] == ["e", "f", "g"] and clock.now_ms() == start


def test_a_negative_gather_is_refused() -> None:
    with pytest.raises(ValueError, match="gather_ms"):
        BatchSlots(1, _nothing, lambda: False, gather_ms=-1)


async def _nothing() -> None:
    return None
