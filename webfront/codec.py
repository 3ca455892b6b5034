"""Response encoding: JSON by default, msgpack when the client's ``Accept`` asks for it.

Request bodies are always JSON (``Content-Type: application/json``), which is
also the CSRF defence: see ``webfront.guard``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgpack
from aiohttp import web

JSON = "application/json"
MSGPACK = "application/msgpack"
_MSGPACK_TYPES = (MSGPACK, "application/x-msgpack", "application/vnd.msgpack")

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_packb = msgpack.Packer(use_bin_type=True).pack


def wants_msgpack(request: web.Request) -> bool:
    accept = request.headers.get("Accept")
    # most clients send no Accept, or one that names no msgpack type
    return accept is not None and "msgpack" in accept and any(t in accept for t in _MSGPACK_TYPES)


def encode(data: Any, msgpack_format: bool) -> bytes:
    return _packb(data) if msgpack_format else _dumps(data).encode()


def respond(
    request: web.Request,
    data: Any,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """``data`` encoded in the format the client accepts."""
    packed = wants_msgpack(request)
    response = web.Response(
        body=encode(data, packed),
        status=status,
        content_type=MSGPACK if packed else JSON,
        headers=headers,
    )
    response.headers["Vary"] = "Accept"
    return response


def with_field_first(body: bytes, packed: bool, name: str, value: int) -> bytes:
    """Prepend ``name: value`` to an encoded map (a cached body plus a fresh field).

    JSON: ``{"name":value,`` + the rest. msgpack: a small map's header byte
    counts one more entry, then the new pair, then the old entries.
    """
    if not packed:
        rest = body[1:] if body == b"{}" else b"," + body[1:]
        return b'{"%s":%d%s' % (name.encode(), value, rest)
    header = body[0]
    if not 0x80 <= header < 0x8F:
        raise ValueError("with_field_first needs a msgpack fixmap of at most 14 entries")
    return bytes((header + 1,)) + _packb(name) + _packb(value) + body[1:]
