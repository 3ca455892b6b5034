"""Shared start-up of the console scripts: logging, and one clear line on fatal errors."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, TypeVar

from common.errors import ConfigError, FatalError
from common.settings import load_settings

T = TypeVar("T")


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # the task server's scheduler logs two INFO lines per job run (the tick: every second)
    quiet = max(logging.WARNING, logging.getLevelName(level))
    logging.getLogger("apscheduler").setLevel(logging.NOTSET if level == "DEBUG" else quiet)
    # aiosqlite logs every statement with its parameters at DEBUG (password hashes too)
    logging.getLogger("aiosqlite").setLevel(max(logging.INFO, logging.getLevelName(level)))


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def serve_on(event_loop: str, server: Coroutine[Any, Any, T]) -> T:
    """Run a server's ``server`` coroutine on the event loop ``EVENT_LOOP`` names: uvloop's
    (libuv), whose sockets, timers and callbacks cost the web and task servers less CPU
    per request and per event than asyncio's own, or asyncio's."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if event_loop == "uvloop":
        try:
            import uvloop
        except ImportError:
            server.close()
            raise ConfigError(
                "EVENT_LOOP: uvloop is not installed (pip install uvloop, or EVENT_LOOP=asyncio)"
            ) from None
        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(server)


def run_async(main: Callable[[], Coroutine[Any, Any, int | None]], *, server: bool = False) -> int:
    """Run ``main()`` (a server's on the event loop ``EVENT_LOOP`` names, ``serve_on``); a
    FatalError ends the process with its one-line message."""
    try:
        if server:
            return serve_on(load_settings().event_loop, main()) or 0
        return asyncio.run(main()) or 0
    except FatalError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        return 130
