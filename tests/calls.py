"""Counting the calls of a method in tests: what a change saves (pings, order checks, asks
for a connection) is asserted as a number of calls, never as a time."""

from __future__ import annotations

import inspect
from typing import Any

import pytest


def record_calls(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> list[tuple[Any, ...]]:
    """Wrap ``owner.name`` (sync or async) for the test; returns the list each call's
    positional arguments (``self`` first) are appended to, in order."""
    original = getattr(owner, name)
    calls: list[tuple[Any, ...]] = []
    if inspect.iscoroutinefunction(original):

        async def recorded_async(*args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            return await original(*args, **kwargs)

        monkeypatch.setattr(owner, name, recorded_async)
    else:

        def recorded(*args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, recorded)
    return calls
