"""The servers' event loop (``EVENT_LOOP``): uvloop's by default, asyncio's on request, and
one clear line when the choice cannot be had."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

from common.entrypoint import run_async, serve_on
from common.errors import ConfigError


def _loop_type() -> type[asyncio.AbstractEventLoop]:
    seen: list[type[asyncio.AbstractEventLoop]] = []

    async def main() -> int:
        seen.append(type(asyncio.get_running_loop()))
        return 0

    assert run_async(main, server=True) == 0
    return seen[0]


def test_a_server_runs_on_uvloop_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVENT_LOOP", raising=False)
    assert _loop_type() is uvloop.Loop
    monkeypatch.setenv("EVENT_LOOP", "asyncio")
    assert not issubclass(_loop_type(), uvloop.Loop)


def test_an_unknown_event_loop_is_one_line_and_a_nonzero_exit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVENT_LOOP", "trio")
    with pytest.raises(SystemExit) as exited:
        _loop_type()
    assert exited.value.code != 0
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: EVENT_LOOP: ") and "'trio'" in line


def test_uvloop_missing_is_a_config_error_naming_the_way_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError

    async def server() -> None:
        raise AssertionError("must not run")

    with pytest.raises(ConfigError, match="EVENT_LOOP=asyncio"):
        serve_on("uvloop", server())
