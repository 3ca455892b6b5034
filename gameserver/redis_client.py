"""The task server's Redis connection: a plain client, or a cluster client when Redis says so."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from common.redis_conn import AnyRedis, check_redis, create_redis
from common.settings import Settings


async def connect(settings: Settings) -> AnyRedis:
    """Connect to REDIS_URL; switch to a cluster client if the server is a cluster node.

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


def node_client(client: AnyRedis) -> Redis:
    """A plain client for pub/sub: any cluster node sees every PUBLISH of the cluster."""
    if isinstance(client, RedisCluster):
        node = client.get_default_node() or client.get_random_node()
        kwargs = {
            k: v
            for k, v in client.connection_kwargs.items()
            if k in ("username", "password", "ssl", "socket_timeout", "socket_connect_timeout")
        }
        return Redis(host=node.host, port=int(node.port), **kwargs)
    return client
