"""Lua scripts as files next to this module, loaded once and run with EVALSHA.

A line ``--@include name.lua`` pastes a shared fragment (for example the code
that returns an in-flight batch to *due*), so each script file stays one
atomic operation while the fragment exists once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis.exceptions import NoScriptError

from common.redis_conn import AnyRedis

_HERE = Path(__file__).parent


def _read(path: Path, seen: tuple[str, ...] = ()) -> str:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("--@include "):
            name = line.split(maxsplit=1)[1].strip()
            if name in seen:
                raise ValueError(f"{path.name}: include cycle through {name}")
            out.append(_read(path.with_name(name), (*seen, name)))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


class Script:
    """One Lua script; calling it runs EVALSHA and loads the script if the server lacks it."""

    __slots__ = ("name", "sha", "text")

    def __init__(self, path: Path) -> None:
        self.name = path.stem
        self.text = _read(path)
        self.sha = hashlib.sha1(self.text.encode()).hexdigest()

    async def __call__(self, client: AnyRedis, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)  # type: ignore[misc]
        except NoScriptError:
            # A restarted Redis (or a cluster node that never saw it) forgot the script.
            await client.script_load(self.text)  # type: ignore[misc]
            return await client.evalsha(self.sha, len(keys), *keys, *args)  # type: ignore[misc]

    async def load(self, client: AnyRedis) -> None:
        await client.script_load(self.text)  # type: ignore[misc]


def load_script(name: str, directory: Path = _HERE) -> Script:
    return Script(directory / name)
