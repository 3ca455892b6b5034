"""/api/time, /healthz and /metrics (per route template; loopback or token only)."""

from __future__ import annotations

from aiohttp.test_utils import TestClient
from redis.asyncio import Redis

from common import ids
from common.clock import ManualClock
from common.node_lease import node_keys
from tests.web.conftest import MakeClient, RegisterFn
from webfront.state import IDS


async def test_time_is_the_app_clock(client: TestClient, clock: ManualClock) -> None:
    await clock.advance(1234)
    resp = await client.get("/api/time")
    assert await resp.json() == {"server_time_ms": clock.now_ms()}
    assert resp.headers["Cache-Control"] == "no-store"


async def test_healthz(client: TestClient) -> None:
    resp = await client.get("/healthz")
    assert resp.status == 200
    assert await resp.json() == {"status": "ok", "redis": "ok", "db": "ok"}


async def test_metrics_count_per_route_template(client: TestClient, register: RegisterFn) -> None:
    alice = await register("Alice")
    for report_id in (111, 222, 333):
        assert (await client.get(f"/api/reports/{report_id}", headers=alice.auth)).status == 404
    await client.get("/no/such/path")
    text = await (await client.get("/metrics")).text()
    assert (
        'webfront_requests_total{method="GET",route="/api/reports/{id}",status="404"} 3.0' in text
    )
    assert 'route="unmatched",status="404"' in text
    # no raw path in a label (a bare "111" could be digits of a latency sum)
    assert "reports/111" not in text and "/no/such/path" not in text
    assert (
        'webfront_request_duration_seconds_bucket{le="0.005",method="GET",route="/api/reports/{id}"}'
        in text
    )


async def test_metrics_are_hidden_behind_a_proxy_and_open_with_the_token(
    make_client: MakeClient,
) -> None:
    client = await make_client(metrics_token="s3cret-token")
    proxied = {"X-Forwarded-For": "203.0.113.9"}
    resp = await client.get("/metrics", headers=proxied)
    assert resp.status == 404
    assert (await resp.json())["error"]["code"] == "not_found"
    resp = await client.get("/metrics", headers={**proxied, "Authorization": "Bearer wrong"})
    assert resp.status == 404
    resp = await client.get("/metrics", headers={**proxied, "Authorization": "Bearer s3cret-token"})
    assert resp.status == 200 and "webfront_requests_total" in await resp.text()
    assert (await client.get("/metrics")).status == 200  # loopback, no proxy header


async def test_each_web_process_leases_its_id_node(
    make_client: MakeClient, redis: Redis, redis_prefix: str
) -> None:
    """Command ids (scheduled_events keys) unique among the world's processes: each app
    leases a node of its own while it runs (common.node_lease)."""
    first, second = await make_client(), await make_client()
    _, owners = node_keys(redis_prefix)
    leased = await redis.hgetall(owners)  # type: ignore[misc]
    assert len(leased) == 2  # two apps, two nodes, both live
    assert first.app[IDS].node == ids.process_node() and ids.process_node() in map(int, leased)
    await second.close()


def test_latency_buckets_count_up_to_and_including_their_bound() -> None:
    from webfront.metrics import Metrics

    metrics = Metrics()
    for seconds in (0.005, 0.004, 7.0):
        metrics.observe("GET", "/x", 200, seconds)
    text = metrics.render().decode()
    bucket = 'webfront_request_duration_seconds_bucket{{le="{}",method="GET",route="/x"}} {}'
    assert bucket.format("0.0025", "0.0") in text
    assert bucket.format("0.005", "2.0") in text and bucket.format("5.0", "2.0") in text
    assert bucket.format("+Inf", "3.0") in text
    assert 'webfront_request_duration_seconds_count{method="GET",route="/x"} 3.0' in text
    assert 'webfront_requests_total{method="GET",route="/x",status="200"} 3.0' in text
