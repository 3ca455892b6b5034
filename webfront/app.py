"""``create_app(settings)``: the aiohttp application, its routes and its resources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from aiohttp import web
from redis.asyncio.cluster import RedisCluster

from common import supervise
from common.clock import SYSTEM_CLOCK, Clock, ClockCheck, is_simulated
from common.fastredis import ClusterFastRedis, FastRedis
from common.ids import IdGenerator
from common.node_lease import NodeLease
from common.queue import EventQueue
from common.redis_conn import connect_redis
from common.settings import Settings
from db.connection_shelf import ConnectionShelf
from db.engine import create_engine, session_factory
from db.shared_reads import SharedReads
from db.shared_writes import SharedWrites
from gameapi.loading import handler_registry, load_game
from webfront import (
    admin,
    auth,
    clocksync,
    health,
    keys,
    mapview,
    openapi,
    protocol,
    push,
    reports,
    snapshot,
)
from webfront.commands import endpoints_for
from webfront.config import WebConfig
from webfront.localcache import LocalCache
from webfront.metrics import Metrics
from webfront.proxies import ClientResolver, parse_networks
from webfront.queries import query_endpoints
from webfront.ratelimit import RateLimiter
from webfront.routing import Endpoint, mount
from webfront.sessions import SessionStore
from webfront.state import (
    CLIENTS,
    CLOCK,
    CONFIG,
    ENGINE,
    EVENT_KINDS,
    FAST_REDIS,
    GAME,
    HASH_POOL,
    IDS,
    LIMITER,
    LOCAL_CACHE,
    METRICS,
    QUEUE,
    REDIS,
    SESSION_FACTORY,
    SESSIONS,
    SETTINGS,
    SHARED_READS,
    SHARED_WRITES,
    SHELF,
)
from webfront.static_files import INDEX, SDK_DIR, client_dir

__all__ = ["CLOCK", "CONFIG", "ENGINE", "REDIS", "SETTINGS", "create_app"]


# PostgreSQL connections per process; up to two thirds idle on the commands' shelf
# (``db.connection_shelf``) and a few for their shared reads and writes
# (``db.shared_reads``, ``db.shared_writes``), so the rest (logins, reports, health) never
# waits for them
_POOL = 30
_KEPT_FOR_COMMANDS = _POOL * 2 // 3
# connections of the commands' shared reads (``db.shared_reads``), beside the shelf's
_SHARED_READ_SLOTS = 3
_SHARED_READ_BATCH = 64


async def _resources(app: web.Application) -> AsyncIterator[None]:
    settings, config, clock = app[SETTINGS], app[CONFIG], app[CLOCK]
    # Every connection is kept: an overflow one is closed when returned, so under load the
    # pool would start a server process for each burst.
    kept = {} if settings.is_sqlite else {"pool_size": _POOL, "max_overflow": 0}
    engine = create_engine(settings, **kept)
    redis = await connect_redis(settings)  # a cluster client when Redis is a cluster
    local = LocalCache(
        keys.session(settings.redis_prefix, ""),
        keys.version_prefix(settings.redis_prefix),
        max_entries=config.local_cache_entries,
        max_bodies=config.local_cache_bodies,
        max_age_ms=config.local_cache_max_age_ms,
    )
    fast: FastRedis
    if isinstance(redis, RedisCluster):  # no local cache of sessions and versions: see there
        fast = ClusterFastRedis(redis)
    else:
        fast = FastRedis(settings.redis_url, tracker=local if config.local_cache else None)
    pool = ThreadPoolExecutor(config.hash_threads, thread_name_prefix="password-hash")
    sessions = SessionStore(
        engine,
        redis,  # type: ignore[arg-type]
        fast,
        settings.redis_prefix,
        clock,
        ttl_ms=settings.session_ttl_s * 1000,
        negative_ttl_ms=config.negative_session_ttl_ms,
        local=local,
    )
    app[ENGINE] = engine
    shelf = ConnectionShelf(engine, keep=0 if settings.is_sqlite else _KEPT_FOR_COMMANDS)
    app[SHELF] = shelf
    shared_reads = None
    if not settings.is_sqlite:
        shared_shelf = ConnectionShelf(engine, keep=_SHARED_READ_SLOTS)
        shared_reads = SharedReads(shared_shelf, _SHARED_READ_SLOTS, _SHARED_READ_BATCH)
    app[SHARED_READS] = shared_reads
    shared_writes = None
    if not settings.is_sqlite:  # SQLite has one writer at a time: nothing to write together
        shared_writes = SharedWrites(
            ConnectionShelf(engine, keep=config.command_writers),
            config.command_writers,
            config.command_batch,
            config.command_gather_ms,
        )
    app[SHARED_WRITES] = shared_writes
    app[METRICS].shared_writes = shared_writes
    app[REDIS] = redis  # type: ignore[misc]
    app[FAST_REDIS] = fast
    app[LOCAL_CACHE] = local
    app[HASH_POOL] = pool
    app[SESSIONS] = sessions
    app[LIMITER] = RateLimiter(redis, settings.redis_prefix, clock, fast)  # type: ignore[arg-type]
    ids = IdGenerator(clock)
    app[IDS] = ids
    app[SESSION_FACTORY] = session_factory(engine)
    app[QUEUE] = EventQueue(
        redis,
        prefix=settings.redis_prefix,
        partitions=settings.queue_partitions,
        clock=clock,
        ids=ids,
    )
    snapshot_engine = snapshot.read_engine(settings, config.snapshot_builds)
    app[snapshot.SNAPSHOTS] = snapshot.SnapshotService(
        snapshot_engine,
        redis,  # type: ignore[arg-type]
        fast,
        local,
        sessions,
        clock,
        settings.redis_prefix,
        config.snapshot_cache_ttl_ms,
        config.snapshot_cache_jitter,
        config.snapshot_builds,
        config.snapshot_batch,
        config.snapshot_gather_ms,
        app[GAME],
        app[METRICS],
    )
    yield
    await app[snapshot.SNAPSHOTS].drain()
    await shelf.close()
    if shared_reads is not None:
        await shared_reads.close()
    if shared_writes is not None:
        await shared_writes.close()
    pool.shutdown(wait=True)
    await fast.close()
    await redis.aclose()
    await snapshot_engine.dispose()
    await engine.dispose()


async def _id_node(app: web.Application) -> AsyncIterator[None]:
    """Lease this process's id node while the app runs: ids unique among a world's processes
    (``common.node_lease``)."""
    lease = NodeLease(app[REDIS], app[SETTINGS].redis_prefix)
    await lease.acquire()
    renewing = supervise.start("id-node-lease", lease.run)
    yield
    lease.stop()
    await renewing
    await lease.release()


async def _clock_check(app: web.Application) -> AsyncIterator[None]:
    """Compare this host's clock with Redis TIME at start and every minute (a gauge and a
    warning; the web tier refuses nothing: game time is the task servers')."""
    settings = app[SETTINGS]
    if is_simulated(app[CLOCK]):
        yield
        return
    check = ClockCheck(
        app[REDIS],
        app[CLOCK],
        warn_ms=settings.clock_skew_warn_ms,
        max_ms=settings.clock_skew_max_ms,
        registry=app[METRICS].registry,
        what="web server",
    )
    await check.check_or_warn()
    checking = supervise.start("clock-check", check.run)
    yield
    check.stop()
    await checking


def client_endpoints(game: str) -> list[Endpoint]:
    """``/``, ``/static/`` (the game's client or the generic page) and ``/sdk/``."""
    folder = client_dir(game)

    async def index(_request: web.Request) -> web.FileResponse:
        return web.FileResponse(folder / INDEX)

    return [
        Endpoint(
            "GET", "/", index, "The browser client", "client", auth=False, media_type="text/html"
        ),
        Endpoint(
            "GET",
            "/static/{filename:.+}",
            None,
            "Files of the browser client (the game's own, or the generic page)",
            "client",
            auth=False,
            media_type="application/octet-stream",
            errors=(404,),
            static_dir=folder,
        ),
        Endpoint(
            "GET",
            "/sdk/{filename}",
            None,
            "The browser SDK every client imports (webgame.js)",
            "client",
            auth=False,
            media_type="application/octet-stream",
            errors=(404,),
            static_dir=SDK_DIR,
        ),
    ]


def create_app(
    settings: Settings, clock: Clock = SYSTEM_CLOCK, *, config: WebConfig | None = None
) -> web.Application:
    config = config or WebConfig()
    protocol.install()  # parser refusals in the error shape, logged without the request
    metrics = Metrics()
    app = web.Application(client_max_size=config.max_body_bytes)
    app[SETTINGS] = settings
    app[CLOCK] = clock
    app[CONFIG] = config
    app[METRICS] = metrics
    game = load_game(settings.game)
    app[GAME] = game
    app[EVENT_KINDS] = handler_registry(game, settings)
    app[CLIENTS] = ClientResolver(parse_networks(settings.trusted_proxies))
    app.cleanup_ctx.append(_resources)
    app.cleanup_ctx.append(_id_node)
    app.cleanup_ctx.append(_clock_check)
    push.install(app)
    mount(
        app,
        [
            *clocksync.ENDPOINTS,
            *auth.ENDPOINTS,
            *snapshot.endpoints(game),
            *push.ENDPOINTS,
            *mapview.ENDPOINTS,
            *reports.ENDPOINTS,
            *endpoints_for(game.commands, game.rule_errors),
            *query_endpoints(game.queries, game.rule_errors),
            *openapi.ENDPOINTS,
            *health.ENDPOINTS,
            *admin.endpoints(settings.game),
            *client_endpoints(settings.game),
        ],
        metrics,
    )
    openapi.document_app(app)
    return app
