"""The reference game's world for its browser tests: ``stack``, at the test module's
``WORLD_SPEED`` and ``MAP_RADIUS`` (the game's defaults where a module sets none)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.stack import Stack, run_stack

WORLD_SETTINGS = ("WORLD_SPEED", "MAP_RADIUS")


@pytest.fixture
def stack(
    request: pytest.FixtureRequest, sqlite_url: str, redis_prefix: str, tmp_path: Path
) -> Iterator[Stack]:
    """webfront and gameserver as subprocesses on a fresh SQLite world and the test Redis."""
    env = {
        name: str(getattr(request.module, name))
        for name in WORLD_SETTINGS
        if hasattr(request.module, name)
    }
    with run_stack(sqlite_url, redis_prefix, tmp_path, game="refgame", env=env) as running:
        yield running
