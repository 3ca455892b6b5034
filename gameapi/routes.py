"""A game's HTTP routes: commands (``POST /api/<path>``) and queries (``GET /api/<path>``).

The web tier gives every route, uniformly: authentication, strict validation of
its model, the JSON error shape and an OpenAPI entry. A command also gets the
per-player command rate limit, ``Idempotency-Key`` handling and one database
transaction (``gameapi.Tx``) committed with the events it scheduled; a query
gets a read-only session.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from common.queue.tx import Tx

B = TypeVar("B", bound=BaseModel)
_PATH = re.compile(r"[a-z][a-z0-9_-]*(/[a-z][a-z0-9_-]*)*")
# the framework's own routes under /api/
RESERVED = frozenset({"register", "login", "logout", "time", "snapshot", "map", "openapi.json"})


def check_path(path: str) -> str | None:
    """What is wrong with a route path (None: nothing)."""
    if _PATH.fullmatch(path) is None:
        return "must be lower-case words joined by '/'"
    if path.split("/")[0] in RESERVED:
        return f"must not start with one of {sorted(RESERVED)}"
    return None


@dataclass(frozen=True)
class CommandRoute(Generic[B]):
    """``async def handler(tx, player_id, body) -> dict``; served as ``POST /api/<path>``."""

    path: str
    body_model: type[B]
    handler: Callable[[Tx, int, B], Awaitable[dict[str, Any]]]
    summary: str = ""
    response_model: type[BaseModel] | None = None
    status: int = 200


@dataclass(frozen=True)
class QueryRoute(Generic[B]):
    """``async def handler(session, player_id, query) -> dict``; served as ``GET /api/<path>``.

    ``query_model`` validates the query string (subclass ``gameapi.Query``);
    the session is read-only and sees one consistent snapshot of the data.
    """

    path: str
    query_model: type[B]
    handler: Callable[[AsyncSession, int, B], Awaitable[dict[str, Any]]]
    summary: str = ""
    response_model: type[BaseModel] | None = None
