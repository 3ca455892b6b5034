"""``GET /api/snapshot``: everything a player's client shows, with an ETag.

The ETag is the player's snapshot version (``common.snapshot_versions``),
bumped by every change the player can see. The session is read first (from
the local cache, else one GET), then one Lua call reads the player's version
and, when the client's copy is stale, the cached body if it is of that
version: both keys carry the player's hash tag, so this works on Redis Cluster
too (``webfront.keys``). A 304 or a cached snapshot costs one Redis round trip
when the session is remembered, and no database read. A missing body is built
from one statement of just the needed columns (``webfront.snapshot_build``) and
cached per (player, format) with its version: a body is served only while its
version is current, so it is cached for long
(``WebConfig.snapshot_cache_ttl_ms``, stretched by a random jitter so bodies
built together do not expire together). One build per version runs in a
process at a time (later polls of that version wait for it), and at most
``WebConfig.snapshot_builds`` statements read the database at once; builds
that pile up behind them are read together, one statement per batch
(``webfront.snapshot_reads``).

The version is read *before* the database, so a body can only be newer than
its ETag, never older: a change committed meanwhile bumps the version again
and the client fetches once more. ``server_time_ms`` is added to each answer
(also to cached bodies), so clients always see the time of the answer.
Production ticks do not change the version: stocks come with ``updated_ms``
and rates, and the client interpolates ``min(cap, fixed + rate * dt) // scale``.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web
from multidict import CIMultiDict
from pydantic import Field, create_model
from redis.asyncio import Redis
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from common.clock import Clock
from common.fastredis import FastRedis, Script
from common.settings import Settings
from common.snapshot_versions import version_key
from db.engine import create_engine
from gameapi.game import Game, SnapshotPart
from gameapi.loading import load_game
from gameapi.stocks import stocks_of
from webfront import keys
from webfront.codec import JSON, MSGPACK, encode, wants_msgpack, with_field_first
from webfront.errors import unauthorized
from webfront.localcache import LocalCache
from webfront.metrics import Metrics
from webfront.routing import Endpoint
from webfront.sessions import SessionStore, token_from_headers, token_hash
from webfront.snapshot_build import builder_of, use_game
from webfront.snapshot_reads import SnapshotReads
from webfront.validation import Out

_SCRIPT = Script((Path(__file__).parent / "snapshot_poll.lua").read_text())
log = logging.getLogger("webfront")
_jitter = random.Random()  # its own generator: the global one may be seeded by others (tests)
_NO_SESSION = "the session is unknown, expired or logged out; log in again"


# ---- response models (documentation, and checked against real answers by the tests)


class ResourceOut(Out):
    units: int = Field(description="whole units at updated_ms (fixed // scale)")
    fixed: int = Field(description="exact stock at updated_ms in fixed-point units")
    rate_per_hour: int = Field(
        description="whole units per hour; negative only for a resource that may decline"
    )
    cap: int = Field(description="storage cap in whole units")


class StocksBase(Out):
    updated_ms: int
    scale: int = Field(description="fixed-point units per resource unit")

    if TYPE_CHECKING:  # the fields of the game's resources (stocks_model)

        def __getattr__(self, name: str) -> ResourceOut: ...


class VillageBase(Out):
    id: int
    name: str
    x: int
    y: int
    stocks: StocksBase

    if TYPE_CHECKING:  # the game's snapshot parts (snapshot_model)

        def __getattr__(self, name: str) -> Any: ...


class SnapshotBase(Out):
    server_time_ms: int
    player_id: int
    name: str
    villages: list[VillageBase]

    if TYPE_CHECKING:  # the game's parts of the player (snapshot_model)

        def __getattr__(self, name: str) -> Any: ...


def _part_type(part: SnapshotPart) -> Any:
    model = Any if part.model is None else part.model
    if part.shape == "list":
        return list[model]  # type: ignore[valid-type]
    if part.shape == "map":
        return dict[str, model]  # type: ignore[valid-type]
    if part.shape == "object":
        return model | None
    return model


_MODELS: dict[int, tuple[Game, type[SnapshotBase]]] = {}  # by id: a Game is not hashable


def snapshot_model(game: Game) -> type[SnapshotBase]:
    """``GET /api/snapshot``'s answer for ``game``: its resources and its snapshot parts."""
    found = _MODELS.get(id(game))
    if found is None or found[0] is not game:
        found = _MODELS[id(game)] = (game, _snapshot_model(game))
    return found[1]


def _snapshot_model(game: Game) -> type[SnapshotBase]:
    stocks = stocks_of(game)
    resources: dict[str, Any] = {n: (ResourceOut, ...) for n in stocks.names}
    stocks_out: Any = create_model("StocksOut", __base__=StocksBase, **resources)
    builder = builder_of(game)
    place: dict[str, Any] = {"stocks": (stocks_out, ...)}
    player: dict[str, Any] = {}
    for part in game.snapshot_parts:
        fields = player if part.key in builder.player_keys else place
        fields.setdefault(part.key, (_part_type(part), ...))
    village_out: Any = create_model("VillageOut", __base__=VillageBase, **place)
    player["villages"] = (list[village_out], ...)
    return create_model("SnapshotOut", __base__=SnapshotBase, **player)


def __getattr__(name: str) -> Any:
    """``SnapshotOut``: the answer of the default game (``GAME``'s default), for tests and
    documentation of this module; a served app documents the game it loaded."""
    if name == "SnapshotOut":
        return snapshot_model(load_game(Settings.model_fields["game"].default))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- serving


@dataclass(frozen=True)
class SnapshotService:
    engine: AsyncEngine  # the snapshot reads' own engine: see read_engine()
    redis: Redis
    fast: FastRedis
    local: LocalCache
    sessions: SessionStore
    clock: Clock
    prefix: str
    cache_ttl_ms: int
    cache_jitter: float = 0.25
    max_builds: int = 4
    max_batch: int = 64
    gather_ms: int = 0  # a statement starts no sooner than this after the last one
    game: Game | None = None  # whose snapshot (None: the process's, see snapshot_build.use_game)
    metrics: Metrics | None = None  # counts the builds and the statements

    # builds in progress in this process: concurrent polls of one version wait for one build
    building: dict[tuple[int, str, bool], asyncio.Future[bytes]] = field(default_factory=dict)
    # the database reads: at most max_builds statements at once, batched when they pile up
    reads: SnapshotReads = field(init=False)
    # body writes to Redis in flight (the polls that waited for a build do not wait for them)
    writes: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        builder = None if self.game is None else use_game(self.game)
        reads = SnapshotReads(
            self.engine, self.max_builds, self.max_batch, builder, self.gather_ms,
            metrics=self.metrics,
        )  # fmt: skip
        object.__setattr__(self, "reads", reads)

    def body_ttl_ms(self) -> int:
        """The cache TTL of one body: the base TTL stretched by a random share of the jitter."""
        return self.cache_ttl_ms + int(self.cache_ttl_ms * self.cache_jitter * _jitter.random())

    async def body(self, player_id: int, version: str, packed: bool) -> bytes:
        """The encoded snapshot of ``version``: built once, cached in Redis for every process.

        The cached value starts with the version, so a body is served only for the version
        it was built at: any change bumps the version, and the next poll builds anew.
        """
        key = (player_id, version, packed)
        pending = self.building.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.building[key] = future
        try:
            data = await self.reads.read(player_id)
            if data is None:  # deleted while a session outlived them
                raise unauthorized("this player no longer exists")
            body = encode(data, packed)
            if self.metrics is not None:
                self.metrics.snapshot_builds += 1
            self.local.put_body(player_id, version, packed, body)
            future.set_result(body)
            if self.cache_ttl_ms > 0:
                write = asyncio.create_task(self._store(player_id, version, packed, body))
                self.writes.add(write)
                write.add_done_callback(self.writes.discard)
            return body
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters (if any) re-raise it themselves
            raise
        finally:
            del self.building[key]

    async def drain(self) -> None:
        """Wait for the body writes still in flight (at shutdown)."""
        await asyncio.gather(*self.writes, return_exceptions=True)

    async def _store(self, player_id: int, version: str, packed: bool, body: bytes) -> None:
        """Cache a built body for every process; a failure only costs another build later.
        On the lean connection: redis-py's CPU per command would add to every build of a
        burst."""
        key = keys.snapshot(self.prefix, player_id, "m" if packed else "j")
        try:
            value = b"%s:%s" % (version.encode(), body)
            await self.fast.execute("SET", key, value, "PX", self.body_ttl_ms())
        except Exception as exc:
            log.warning("caching snapshot %s failed: %s: %s", key, type(exc).__name__, exc)


SNAPSHOTS = web.AppKey("snapshots", SnapshotService)


READ_SESSION = {"plan_cache_mode": "force_generic_plan", "enable_seqscan": "off"}


def read_engine(settings: Settings, builds: int) -> AsyncEngine:
    """The engine of snapshot builds: ``builds`` connections in autocommit, no pre-ping and
    no reset on return. A build is one SELECT: it needs no transaction, and each of those
    would be a round trip, each waiting for a loaded event loop (milliseconds).

    On PostgreSQL (asyncpg) these sessions (``READ_SESSION``) always use the statement's
    generic plan: it takes an array of player ids, whose length the planner cannot know,
    so it would judge the generic plan dearer and plan every read anew, which costs the
    server more CPU than the read itself. And they never scan a whole table where an
    index finds the rows: a build reads one player's few rows of each table, but a plan
    made from statistics that lag behind the world (taken when it was small) expects the
    whole table to match and scans it."""
    extra: dict[str, Any] = {}
    if make_url(settings.database_url).get_driver_name() == "asyncpg":
        extra["connect_args"] = {"server_settings": READ_SESSION}
    return create_engine(
        settings,
        isolation_level="AUTOCOMMIT",
        pool_size=builds,
        max_overflow=0,
        pool_reset_on_return=None,
        **extra,
    )


def held_version(if_none_match: str | None) -> str:
    """The version in the client's ``If-None-Match`` (first tag; weak or strong), or ''."""
    if not if_none_match:
        return ""
    tag = if_none_match.split(",", 1)[0].strip().removeprefix("W/")
    if len(tag) >= 2 and tag[0] == '"' and tag[-1] == '"':
        return tag[1:-1]
    return tag if tag == "*" else ""


# Headers of every snapshot answer; each answer adds its ETag (a 304 repeats them: RFC 9110)
_CACHING = CIMultiDict({"Cache-Control": "private, no-cache", "Vary": "Accept"})


def _not_modified(etag: str) -> web.StreamResponse:
    # No body: a StreamResponse skips Response's body and Content-Length handling.
    headers = _CACHING.copy()
    headers["ETag"] = etag
    return web.StreamResponse(status=304, headers=headers)


def _full(body: bytes, etag: str, packed: bool, now_ms: int) -> web.Response:
    headers = _CACHING.copy()
    headers["ETag"] = etag
    headers["Content-Type"] = MSGPACK if packed else JSON
    return web.Response(
        body=with_field_first(body, packed, "server_time_ms", now_ms), headers=headers
    )


async def snapshot(request: web.Request) -> web.StreamResponse:
    service = request.app[SNAPSHOTS]
    headers = request.headers
    token = token_from_headers(headers.get("Authorization"), headers.get("Cookie"))
    if token is None:
        raise unauthorized()
    digest = token_hash(token)
    if_none_match = headers.get("If-None-Match")
    # remembered session and version (see webfront.localcache): no Redis round trip
    local = service.local
    now = service.clock.now_ms()
    player_id = local.player(digest, now)
    if player_id is not None and (version := local.version(player_id, now)) is not None:
        etag = f'"{version}"'
        if if_none_match == etag:  # the usual poll: parse nothing more
            return _not_modified(etag)
        held = held_version(if_none_match)
        if held == version or held == "*":
            return _not_modified(etag)
        packed = wants_msgpack(request)
        body = local.body(player_id, version, packed)
        if body is not None:
            return _full(body, etag, packed, now)
        return await _poll_redis(service, player_id, held, packed)
    player_id = await service.sessions.player_of(digest)  # remembered as the reply is read
    if player_id is None:
        raise unauthorized(_NO_SESSION)
    return await _poll_redis(
        service, player_id, held_version(if_none_match), wants_msgpack(request)
    )


async def _poll_redis(
    service: SnapshotService, player_id: int, held: str, packed: bool
) -> web.StreamResponse:
    """Version and a cached body in one Lua call, remembered as the reply is read."""
    local, clock = service.local, service.clock
    reply = await service.fast.evalsha(
        _SCRIPT,
        (
            version_key(service.prefix, player_id),
            keys.snapshot(service.prefix, player_id, "m" if packed else "j"),
        ),
        (held, clock.now_ms()),
        on_reply=lambda r: local.fill_version(player_id, r, packed, clock.now_ms()),
    )
    version = reply[0].decode()
    if held == version or held == "*":
        return _not_modified(f'"{version}"')
    body: bytes | None = reply[1] if len(reply) > 1 else local.body(player_id, version, packed)
    if body is None:
        body = await service.body(player_id, version, packed)
    return _full(body, f'"{version}"', packed, clock.now_ms())


def endpoints(game: Game) -> list[Endpoint]:
    return [
        Endpoint(
            "GET",
            "/api/snapshot",
            snapshot,
            "The player's villages with their stocks and the game's parts of them",
            "game",
            response=snapshot_model(game),
            etag=True,
        ),
    ]
