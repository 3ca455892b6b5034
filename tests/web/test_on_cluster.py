"""The web tier on Redis Cluster: a player's keys in one slot, the cluster client when
Redis is a cluster, and players spread over the masters (the subset of the web tests
marked ``ON_BOTH_TOPOLOGIES`` runs whole on the cluster too)."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from common.fastredis import ClusterFastRedis, FastRedis
from common.snapshot_versions import version_key
from tests.web.conftest import PASSWORD, MakeClient
from webfront import keys
from webfront.state import FAST_REDIS, LOCAL_CACHE, REDIS, SETTINGS


def test_a_players_keys_share_one_slot_and_players_spread() -> None:
    slots = set()
    for player_id in (1, 42, 10**12):
        mine = {
            key_slot(version_key("wg", player_id).encode()),
            key_slot(keys.snapshot("wg", player_id, "j").encode()),
            key_slot(keys.snapshot("wg", player_id, "m").encode()),
        }
        assert len(mine) == 1
        slots |= mine
    assert len(slots) == 3
    # one counter, one slot, whatever its window
    assert key_slot(keys.rate_limit("wg", "login-account", "7", 0).encode()) == key_slot(
        keys.rate_limit("wg", "login-account", "7", 900_000).encode()
    )


@pytest.mark.parametrize("redis_topology", ["cluster"])
async def test_on_a_cluster_the_app_uses_the_cluster_client(
    make_client: MakeClient, redis_topology: str
) -> None:
    client: TestClient = await make_client()
    redis = client.app[REDIS]
    assert isinstance(redis, RedisCluster)
    assert isinstance(client.app[FAST_REDIS], ClusterFastRedis)
    assert not client.app[LOCAL_CACHE].active  # no client tracking on a cluster: see there
    masters = set()
    for i in range(6):
        resp = await client.post("/api/register", json={"name": f"Spread{i}", "password": PASSWORD})
        assert resp.status == 201, await resp.text()
        data = await resp.json()
        client.session.cookie_jar.clear()
        auth = {"Authorization": f"Bearer {data['token']}"}
        first = await client.get("/api/snapshot", headers=auth)
        assert first.status == 200
        again = await client.get(
            "/api/snapshot", headers={**auth, "If-None-Match": first.headers["ETag"]}
        )
        assert again.status == 304
        prefix = client.app[SETTINGS].redis_prefix
        node = redis.get_node_from_key(version_key(prefix, data["player_id"]))
        masters.add(node.port if node is not None else None)
    assert len(masters) >= 2  # the polls really crossed masters


@pytest.mark.parametrize("redis_topology", ["standalone"])
async def test_on_a_single_server_the_lean_connection_stays(
    make_client: MakeClient, redis_topology: str
) -> None:
    client: TestClient = await make_client()
    fast = client.app[FAST_REDIS]
    assert type(fast) is FastRedis
