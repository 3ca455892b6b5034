"""Shared start-up of the console scripts: logging, and one clear line on fatal errors."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

from common.errors import FatalError


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


def run_async(main: Callable[[], Coroutine[Any, Any, int | None]]) -> int:
    """Run ``main()``; a FatalError ends the process with its one-line message."""
    try:
        return asyncio.run(main()) or 0
    except FatalError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        return 130
