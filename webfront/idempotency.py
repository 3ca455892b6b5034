"""``Idempotency-Key``: a repeated command returns its first answer and changes nothing.

The first successful answer is stored (``IdempotentResponse``) *in the same
transaction* as the command's effects, keyed by (player, key) with a SHA-256
of the request (path and canonical body). So:

- a replay with the same request returns the stored status and body, with
  ``Idempotent-Replayed: true``, without running the command;
- a replay with a different request is refused (422 ``idempotency_key_reused``);
- two concurrent requests with one key cannot both commit: the second insert
  violates the primary key, its transaction (and its spend) rolls back, and it
  answers with the first one's stored response.

Errors are not stored: a refused command changed nothing, so retrying it with
the same key is safe and may succeed later.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pydantic import BaseModel
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from db.models import IdempotentResponse
from webfront.codec import respond
from webfront.errors import ApiError

HEADER = "Idempotency-Key"
# built once: a Core insert with parameters skips the ORM's per-call statement work
STORE = insert(IdempotentResponse.__table__)  # type: ignore[arg-type]
_KEY_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}")


@dataclass(frozen=True)
class Stored:
    request_hash: str
    status: int
    body: dict[str, Any]


def key_of(request: web.Request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if _KEY_RE.fullmatch(key) is None:
        raise ApiError(
            400,
            "invalid_idempotency_key",
            f"{HEADER} must be 1 to 64 characters of letters, digits and . _ : -",
        )
    return key


def request_hash(path: str, body: BaseModel) -> str:
    canonical = json.dumps(
        body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(f"{path}\n{canonical}".encode()).hexdigest()


async def lookup(engine: AsyncEngine, player_id: int, key: str) -> Stored | None:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(
                    IdempotentResponse.request_hash,
                    IdempotentResponse.status,
                    IdempotentResponse.body,
                ).where(IdempotentResponse.player_id == player_id, IdempotentResponse.key == key)
            )
        ).first()
    return None if row is None else Stored(row.request_hash, row.status, row.body)


def record(
    player_id: int, key: str, digest: str, status: int, body: dict[str, Any], now_ms: int
) -> dict[str, Any]:
    """The values of a command's first answer (a row for ``STORE``)."""
    return {
        "player_id": player_id,
        "key": key,
        "request_hash": digest,
        "status": status,
        "body": body,
        "created_ms": now_ms,
    }


def replay(request: web.Request, stored: Stored, path: str, body: BaseModel) -> web.Response:
    """The stored answer to a repeat of the request (``path``, ``body``) that made it; 422 for
    another request with the same key. The hash is taken here, when a key's row is found,
    not for every command that carries a key: most never meet their row."""
    if stored.request_hash != request_hash(path, body):
        raise ApiError(
            422,
            "idempotency_key_reused",
            f"this {HEADER} was already used for a different request; use a new key",
        )
    response = respond(request, stored.body, status=stored.status)
    response.headers["Idempotent-Replayed"] = "true"
    return response
