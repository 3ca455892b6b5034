"""``GET /api/snapshot``: everything a player's client shows, with an ETag.

The ETag is the player's snapshot version (``common.snapshot_versions``),
bumped by every change the player can see. One Lua call reads the session,
the version and, when the client's copy is stale, a cached body of that
version: a 304 or a cached snapshot costs one Redis round trip and no
database read. A missing body is built with a few set-based Core selects of
just the needed columns and cached per (player, version, format): a body is
valid for as long as its version is current, so it is cached for long
(``WebConfig.snapshot_cache_ttl_ms``, stretched by a random jitter so bodies
built together do not expire together). One build per version runs in a
process at a time (later polls of that version wait for it), and at most
``WebConfig.snapshot_builds`` builds read the database at once.

The version is read *before* the database, so a body can only be newer than
its ETag, never older: a change committed meanwhile bumps the version again
and the client fetches once more. ``server_time_ms`` is added to each answer
(also to cached bodies), so clients always see the time of the answer.
Production ticks do not change the version: stocks come with ``updated_ms``
and rates, and the client interpolates ``min(cap, fixed + rate * dt) // scale``.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import Field
from redis.asyncio import Redis
from sqlalchemy import false, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.orm import aliased

from common.amounts import SCALE
from common.clock import Clock
from common.snapshot_versions import read_version
from db.models import (
    Building,
    BuildOrder,
    March,
    Player,
    Report,
    TrainingOrder,
    Troop,
    Village,
    VillageStock,
)
from webfront import keys
from webfront.codec import JSON, MSGPACK, encode, wants_msgpack, with_field_first
from webfront.errors import unauthorized
from webfront.fastredis import FastRedis, Script
from webfront.localcache import LocalCache
from webfront.routing import Endpoint
from webfront.sessions import SessionStore, parse_cached, token_from_headers, token_hash
from webfront.validation import Out

RESOURCES = ("wood", "clay", "iron", "crop")
_SCRIPT = Script((Path(__file__).parent / "snapshot_poll.lua").read_text())
_NO_SESSION = "the session is unknown, expired or logged out; log in again"


# ---- response models (documentation, and checked against real answers by the tests)


class ResourceOut(Out):
    units: int = Field(description="whole units at updated_ms (fixed // scale)")
    fixed: int = Field(description="exact stock at updated_ms in fixed-point units")
    rate_per_hour: int = Field(description="whole units per hour; crop may be negative")
    cap: int = Field(description="storage cap in whole units")


class StocksOut(Out):
    updated_ms: int
    scale: int = Field(description="fixed-point units per resource unit")
    wood: ResourceOut
    clay: ResourceOut
    iron: ResourceOut
    crop: ResourceOut


class BuildOrderOut(Out):
    id: int
    kind: str
    target_level: int
    started_ms: int
    done_ms: int


class TrainingOrderOut(Out):
    id: int
    unit: str
    count: int
    started_ms: int
    done_ms: int


class TroopsAtOut(Out):
    village_id: int = Field(description="the other village (where they stand, or their home)")
    unit: str
    count: int


class PlaceOut(Out):
    id: int
    x: int | None
    y: int | None
    name: str | None


class MarchOut(Out):
    id: int
    kind: str = Field(description="attack, raid, reinforce or return")
    origin: PlaceOut
    target: PlaceOut
    depart_ms: int
    arrive_ms: int
    troops: dict[str, int] | None = Field(description="null on marches of another player")
    loot: dict[str, int] | None = Field(description="null on marches of another player")


class VillageOut(Out):
    id: int
    name: str
    x: int
    y: int
    stocks: StocksOut
    buildings: dict[str, int]
    build_queue: list[BuildOrderOut]
    troops: dict[str, int] = Field(description="own troops at home")
    reinforcements: list[TroopsAtOut] = Field(description="other villages' troops standing here")
    troops_away: list[TroopsAtOut] = Field(description="own troops standing in other villages")
    training_queue: list[TrainingOrderOut]
    marches_out: list[MarchOut]
    marches_in: list[MarchOut]


class SnapshotOut(Out):
    server_time_ms: int
    player_id: int
    name: str
    unread_reports: int
    villages: list[VillageOut]


# ---- building a snapshot


async def build_snapshot(conn: AsyncConnection, player_id: int) -> dict[str, Any]:
    """The snapshot of ``player_id`` without ``server_time_ms``."""
    unread = (
        select(func.count())
        .where(Report.player_id == player_id, Report.is_read == false())
        .scalar_subquery()
    )
    head = (await conn.execute(select(Player.name, unread).where(Player.id == player_id))).first()
    if head is None:  # the player was deleted while a cached session outlived them
        raise unauthorized("this player no longer exists")
    s = VillageStock
    rows = (
        await conn.execute(
            select(
                Village.id,
                Village.name,
                Village.x,
                Village.y,
                s.updated_ms,
                s.wood,
                s.clay,
                s.iron,
                s.crop,
                s.wood_rate,
                s.clay_rate,
                s.iron_rate,
                s.crop_rate,
                s.warehouse_cap,
                s.granary_cap,
            )
            .join(s, s.village_id == Village.id)
            .where(Village.player_id == player_id)
            .order_by(Village.id)
        )
    ).all()
    villages: dict[int, dict[str, Any]] = {}
    for r in rows:
        stocks: dict[str, Any] = {"updated_ms": r.updated_ms, "scale": SCALE}
        for res, fixed, rate in (
            ("wood", r.wood, r.wood_rate),
            ("clay", r.clay, r.clay_rate),
            ("iron", r.iron, r.iron_rate),
            ("crop", r.crop, r.crop_rate),
        ):
            cap = r.granary_cap if res == "crop" else r.warehouse_cap
            stocks[res] = {
                "units": fixed // SCALE,
                "fixed": fixed,
                "rate_per_hour": rate,
                "cap": cap // SCALE,
            }
        villages[r.id] = {
            "id": r.id,
            "name": r.name,
            "x": r.x,
            "y": r.y,
            "stocks": stocks,
            "buildings": {},
            "build_queue": [],
            "troops": {},
            "reinforcements": [],
            "troops_away": [],
            "training_queue": [],
            "marches_out": [],
            "marches_in": [],
        }
    if villages:
        await _add_details(conn, villages)
    return {
        "player_id": player_id,
        "name": head.name,
        "unread_reports": int(head[1]),
        "villages": list(villages.values()),
    }


async def _add_details(conn: AsyncConnection, villages: dict[int, dict[str, Any]]) -> None:
    ids = list(villages)
    for b in await conn.execute(
        select(Building.village_id, Building.kind, Building.level)
        .where(Building.village_id.in_(ids))
        .order_by(Building.village_id, Building.kind)
    ):
        villages[b.village_id]["buildings"][b.kind] = b.level
    for o in await conn.execute(
        select(
            BuildOrder.id,
            BuildOrder.village_id,
            BuildOrder.kind,
            BuildOrder.target_level,
            BuildOrder.started_ms,
            BuildOrder.done_ms,
        )
        .where(BuildOrder.village_id.in_(ids))
        .order_by(BuildOrder.done_ms, BuildOrder.id)
    ):
        villages[o.village_id]["build_queue"].append(
            {"id": o.id, "kind": o.kind, "target_level": o.target_level,
             "started_ms": o.started_ms, "done_ms": o.done_ms}
        )  # fmt: skip
    for t in await conn.execute(
        select(
            TrainingOrder.id,
            TrainingOrder.village_id,
            TrainingOrder.unit,
            TrainingOrder.count,
            TrainingOrder.started_ms,
            TrainingOrder.done_ms,
        )
        .where(TrainingOrder.village_id.in_(ids))
        .order_by(TrainingOrder.done_ms, TrainingOrder.id)
    ):
        villages[t.village_id]["training_queue"].append(
            {"id": t.id, "unit": t.unit, "count": t.count,
             "started_ms": t.started_ms, "done_ms": t.done_ms}
        )  # fmt: skip
    for t in await conn.execute(
        select(Troop.village_id, Troop.home_village_id, Troop.unit, Troop.count)
        .where(or_(Troop.village_id.in_(ids), Troop.home_village_id.in_(ids)), Troop.count > 0)
        .order_by(Troop.village_id, Troop.home_village_id, Troop.unit)
    ):
        if t.village_id == t.home_village_id:
            villages[t.village_id]["troops"][t.unit] = t.count
            continue
        if t.village_id in villages:
            villages[t.village_id]["reinforcements"].append(
                {"village_id": t.home_village_id, "unit": t.unit, "count": t.count}
            )
        if t.home_village_id in villages:
            villages[t.home_village_id]["troops_away"].append(
                {"village_id": t.village_id, "unit": t.unit, "count": t.count}
            )
    origin, target = aliased(Village), aliased(Village)
    for m in await conn.execute(
        select(
            March.id,
            March.kind,
            March.origin_village_id,
            March.target_village_id,
            March.troops,
            March.loot,
            March.depart_ms,
            March.arrive_ms,
            origin.x.label("ox"),
            origin.y.label("oy"),
            origin.name.label("oname"),
            target.x.label("tx"),
            target.y.label("ty"),
            target.name.label("tname"),
        )
        .outerjoin(origin, origin.id == March.origin_village_id)
        .outerjoin(target, target.id == March.target_village_id)
        .where(or_(March.origin_village_id.in_(ids), March.target_village_id.in_(ids)))
        .order_by(March.arrive_ms, March.id)
    ):
        # A march's origin is its troops' home, on the way back too: a return march is
        # coming home to its origin, and the village it leaves does not see it.
        mine = m.origin_village_id in villages
        march = {
            "id": m.id,
            "kind": m.kind,
            "origin": {"id": m.origin_village_id, "x": m.ox, "y": m.oy, "name": m.oname},
            "target": {"id": m.target_village_id, "x": m.tx, "y": m.ty, "name": m.tname},
            "depart_ms": m.depart_ms,
            "arrive_ms": m.arrive_ms,
            "troops": dict(m.troops) if mine else None,
            "loot": dict(m.loot or {}) if mine else None,
        }
        if m.kind == "return":
            if mine:
                villages[m.origin_village_id]["marches_in"].append(march)
            continue
        if mine:
            villages[m.origin_village_id]["marches_out"].append(march)
        if m.target_village_id in villages:
            villages[m.target_village_id]["marches_in"].append(march)


# ---- serving


@dataclass(frozen=True)
class SnapshotService:
    engine: AsyncEngine
    redis: Redis
    fast: FastRedis
    local: LocalCache
    sessions: SessionStore
    clock: Clock
    prefix: str
    cache_ttl_ms: int
    cache_jitter: float = 0.25
    max_builds: int = 4

    # builds in progress in this process: concurrent polls of one version wait for one build
    building: dict[tuple[int, str, bool], asyncio.Future[bytes]] = field(default_factory=dict)
    # at most max_builds database reads at once: a burst of misses queues here, not in the pool
    build_slots: asyncio.Semaphore = field(init=False)
    # key prefixes, computed once: the hot path only concatenates
    session_prefix: str = field(init=False)
    version_prefix: str = field(init=False)
    snapshot_prefix: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "build_slots", asyncio.Semaphore(self.max_builds))
        object.__setattr__(self, "session_prefix", keys.session(self.prefix, ""))
        object.__setattr__(self, "version_prefix", keys.version_prefix(self.prefix))
        object.__setattr__(self, "snapshot_prefix", keys.snapshot_prefix(self.prefix))

    def body_ttl_ms(self) -> int:
        """The cache TTL of one body: the base TTL stretched by a random share of the jitter."""
        return self.cache_ttl_ms + int(self.cache_ttl_ms * self.cache_jitter * random.random())

    async def body(self, player_id: int, version: str, packed: bool) -> bytes:
        """The encoded snapshot of ``version``: built once, cached in Redis for every process.

        The cache key holds the version, so a body is served only for the version it
        was built at: any change bumps the version, and the next poll builds anew.
        """
        key = (player_id, version, packed)
        pending = self.building.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self.building[key] = future
        try:
            async with self.build_slots, self.engine.connect() as conn:
                data = await build_snapshot(conn, player_id)
            body = encode(data, packed)
            await self.redis.set(
                keys.snapshot(self.prefix, player_id, int(version), "m" if packed else "j"),
                body,
                px=self.body_ttl_ms(),
            )
            self.local.put_body(player_id, version, packed, body)
            future.set_result(body)
            return body
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters (if any) re-raise it themselves
            raise
        finally:
            del self.building[key]


SNAPSHOTS = web.AppKey("snapshots", SnapshotService)


def held_version(if_none_match: str | None) -> str:
    """The version in the client's ``If-None-Match`` (first tag; weak or strong), or ''."""
    if not if_none_match:
        return ""
    tag = if_none_match.split(",", 1)[0].strip().removeprefix("W/")
    if len(tag) >= 2 and tag[0] == '"' and tag[-1] == '"':
        return tag[1:-1]
    return tag if tag == "*" else ""


def _not_modified(version: str) -> web.Response:
    return web.Response(
        status=304,
        headers={"ETag": f'"{version}"', "Cache-Control": "private, no-cache", "Vary": "Accept"},
    )


def _full(body: bytes, version: str, packed: bool, now_ms: int) -> web.Response:
    return web.Response(
        body=with_field_first(body, packed, "server_time_ms", now_ms),
        headers={
            "Content-Type": MSGPACK if packed else JSON,
            "ETag": f'"{version}"',
            "Cache-Control": "private, no-cache",
            "Vary": "Accept",
        },
    )


async def snapshot(request: web.Request) -> web.Response:
    service = request.app[SNAPSHOTS]
    headers = request.headers
    token = token_from_headers(headers.get("Authorization"), headers.get("Cookie"))
    if token is None:
        raise unauthorized()
    digest = token_hash(token)
    held = held_version(headers.get("If-None-Match"))
    packed = wants_msgpack(request)
    # remembered session and version (see webfront.localcache): no Redis round trip
    local = service.local
    now = service.clock.now_ms()
    player_id = local.player(digest, now)
    if player_id is not None and (version := local.version(player_id, now)) is not None:
        if held == version or held == "*":
            return _not_modified(version)
        body = local.body(player_id, version, packed)
        if body is not None:
            return _full(body, version, packed, now)
    return await _poll_redis(service, digest, held, packed)


async def _poll_redis(
    service: SnapshotService, digest: str, held: str, packed: bool
) -> web.Response:
    """Session, version and a cached body in one Lua call, remembered as the reply is read."""
    local, clock = service.local, service.clock
    reply = await service.fast.evalsha(
        _SCRIPT,
        (service.session_prefix + digest,),
        (service.version_prefix, service.snapshot_prefix, held, "m" if packed else "j"),
        on_reply=lambda r: local.fill_from_poll(digest, r, packed, clock.now_ms()),
    )
    now = clock.now_ms()
    if reply:
        player_id = parse_cached(reply[0], now)
        version = reply[1].decode() if len(reply) > 1 else None
    else:  # session not cached yet (new process, evicted, Redis restarted)
        player_id = await service.sessions.load(digest)
        version = None
    if player_id is None:
        raise unauthorized(_NO_SESSION)
    if version is None:
        version = str(await read_version(service.redis, service.prefix, player_id, now))
    if held == version or held == "*":
        return _not_modified(version)
    body: bytes | None = reply[2] if len(reply) > 2 else local.body(player_id, version, packed)
    if body is None:
        body = await service.body(player_id, version, packed)
    return _full(body, version, packed, now)


ENDPOINTS = [
    Endpoint(
        "GET",
        "/api/snapshot",
        snapshot,
        "The player's villages, queues, troops, marches and unread reports count",
        "game",
        response=SnapshotOut,
        etag=True,
    ),
]
