"""Background loops that crash are logged, counted and started again; a loop that returns
(asked to stop) is not."""

from __future__ import annotations

import logging

import pytest

from common.supervise import supervised


async def test_a_crashed_loop_is_logged_and_restarted(caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []
    crashes: list[str] = []

    async def loop() -> None:
        runs.append(len(runs))
        if len(runs) < 3:
            raise RuntimeError(f"crash {len(runs)}")

    caplog.set_level(logging.ERROR, logger="supervise")
    await supervised("the loop", loop, backoff_s=0, on_crash=crashes.append)
    assert runs == [0, 1, 2]  # ran until it returned
    assert crashes == ["the loop", "the loop"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["the loop crashed; restarting it in 0.0 s"] * 2
    assert all(r.exc_info and "crash" in str(r.exc_info[1]) for r in caplog.records)
