"""``node_client``: a plain client for pub/sub on the task server's Redis, cluster or not
(``common.redis_conn.connect_redis`` makes the connection itself)."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from common.redis_conn import AnyRedis


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
