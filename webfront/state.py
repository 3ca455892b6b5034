"""Every piece of app state, each behind a typed ``web.AppKey``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from aiohttp import web
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from common.clock import Clock
from common.fastredis import FastRedis
from common.ids import IdGenerator
from common.queue import EventQueue, HandlerRegistry
from common.settings import Settings
from db.connection_shelf import ConnectionShelf
from db.shared_reads import SharedReads
from db.shared_writes import SharedWrites
from gameapi.game import Game
from webfront.config import WebConfig
from webfront.localcache import LocalCache
from webfront.metrics import Metrics
from webfront.proxies import ClientResolver
from webfront.ratelimit import RateLimiter
from webfront.sessions import SessionStore

SETTINGS = web.AppKey("settings", Settings)
CLOCK = web.AppKey("clock", Clock)  # type: ignore[type-abstract]
CONFIG = web.AppKey("config", WebConfig)
METRICS = web.AppKey("metrics", Metrics)
CLIENTS = web.AppKey("clients", ClientResolver)  # who a request comes from (trusted proxies)
# opened in cleanup_ctx (webfront.app._resources):
ENGINE = web.AppKey("engine", AsyncEngine)
REDIS = web.AppKey("redis", Redis)
FAST_REDIS = web.AppKey("fast_redis", FastRedis)
LOCAL_CACHE = web.AppKey("local_cache", LocalCache)
SESSIONS = web.AppKey("sessions", SessionStore)
SHELF = web.AppKey("shelf", ConnectionShelf)  # connections kept between commands
# the commands' reads before BEGIN, batched (None on SQLite)
SHARED_READS: web.AppKey[SharedReads | None] = web.AppKey("shared_reads")
# where commands' closing statements are written together (PostgreSQL; None on SQLite)
SHARED_WRITES: web.AppKey[SharedWrites | None] = web.AppKey("shared_writes")
LIMITER = web.AppKey("limiter", RateLimiter)
HASH_POOL = web.AppKey("hash_pool", ThreadPoolExecutor)
IDS = web.AppKey("ids", IdGenerator)
SESSION_FACTORY = web.AppKey("session_factory", async_sessionmaker[AsyncSession])
QUEUE = web.AppKey("queue", EventQueue)
GAME = web.AppKey("game", Game)
# the event kinds the game handles: a command scheduling another kind is refused
EVENT_KINDS = web.AppKey("event_kinds", HandlerRegistry)
