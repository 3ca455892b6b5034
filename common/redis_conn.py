"""Redis connections from settings, with one clear error when the server is not there."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from common.errors import UnreachableError
from common.settings import Settings

AnyRedis = Redis | RedisCluster


def create_redis(settings: Settings, cluster: bool = False) -> AnyRedis:
    if cluster:
        return RedisCluster.from_url(settings.redis_url)
    return Redis.from_url(settings.redis_url, health_check_interval=10)


def _hide_password(url: str) -> str:
    if "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    return f"{scheme}://***@{rest.split('@', 1)[1]}"


async def check_redis(client: AnyRedis, url: str) -> None:
    """Raise UnreachableError (naming REDIS_URL) unless Redis answers PING."""
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UnreachableError(f"REDIS_URL: cannot reach {_hide_password(url)}: {reason}") from None


async def connect_redis(settings: Settings) -> AnyRedis:
    """Connect to REDIS_URL: a plain client, or a cluster client when the server is a
    Redis Cluster node (it says so in ``INFO cluster``; no setting to keep in step).

    Raises UnreachableError (one clear line) when nobody answers.
    """
    client = create_redis(settings)
    try:
        await check_redis(client, settings.redis_url)
        info = await client.info("cluster")
    except BaseException:
        await client.aclose()
        raise
    if not int(info.get("cluster_enabled", 0)):
        return client
    await client.aclose()
    cluster = create_redis(settings, cluster=True)
    try:
        await check_redis(cluster, settings.redis_url)
    except BaseException:
        await cluster.aclose()
        raise
    return cluster
