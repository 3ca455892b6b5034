"""The stack's Prometheus config, run for real (Debian's ``prometheus``) against a real task
server and a real web server on this machine: both tiers are scraped, every alert rule
evaluates without error, and every dashboard query runs and the main ones find data."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from redis.asyncio import Redis

from common.clock import SYSTEM_CLOCK
from common.embedded_redis import free_port, port_open
from common.queue.handlers import HandlerRegistry
from common.settings import Settings, load_settings
from gameserver import builtin
from gameserver.config import TaskServerConfig
from gameserver.taskserver import TaskServer
from gameserver.tick import ShardedTick
from tests.conftest import TEST_REDIS_URL
from tests.queue.conftest import eventually
from webfront.app import create_app

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TOKEN = "scrape-token-of-this-test-0123456789"
# Series a running world exports at once (others need traffic, lag or failures first).
ALWAYS_THERE = (
    'up{job="gameserver"} == 1',
    'up{job="webfront"} == 1',
    'up{job="prometheus"} == 1',
    "gameserver_partitions_held",
    "tick_lag_seconds",
    "gameserver_queue_depth",
    "webfront_requests_total",
)


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _answers_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError:
        return False


@pytest.fixture
def world(sqlite_url: str, redis_prefix: str, redis: Redis) -> Settings:
    return load_settings(
        database_url=sqlite_url,
        redis_url=TEST_REDIS_URL,
        redis_prefix=redis_prefix,
        queue_partitions=2,
        tick_shards=2,
        gameserver_metrics_port=free_port(),
        web_metrics_token=TOKEN,
    )


@pytest.fixture
async def tiers(world: Settings) -> AsyncIterator[tuple[int, int]]:
    """A task server (with its tick) and a web server; their metrics ports."""
    registry = HandlerRegistry()
    builtin.register(registry)
    server = TaskServer(world, registry, SYSTEM_CLOCK, config=TaskServerConfig(stats_every_s=0.2))
    ShardedTick(server)
    task = asyncio.create_task(server.run())
    runner = web.AppRunner(create_app(world))
    await runner.setup()
    web_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", web_port).start()
    try:
        await asyncio.wait_for(server.started.wait(), 20)
        yield world.gameserver_metrics_port, web_port
    finally:
        await runner.cleanup()
        server.stop()
        await asyncio.wait_for(task, 15)


def _config(tmp_path: Path, prometheus_port: int, gameserver: int, webfront: int) -> Path:
    """deploy/prometheus/prometheus.yml with what only exists in the stack pointed at this
    machine: targets instead of Docker's DNS, the token file, a fast scrape."""
    config = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str(DEPLOY / "prometheus" / f) for f in config["rule_files"]]
    token = tmp_path / "token"
    token.write_text(TOKEN)
    targets = {"gameserver": gameserver, "webfront": webfront, "prometheus": prometheus_port}
    for job in config["scrape_configs"]:
        job.pop("dns_sd_configs", None)
        job["static_configs"] = [{"targets": [f"127.0.0.1:{targets[job['job_name']]}"]}]
        if "authorization" in job:
            assert job["authorization"]["credentials_file"] == "/run/secrets/web_metrics_token"
            job["authorization"]["credentials_file"] = str(token)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _dashboard_exprs() -> list[str]:
    exprs = []
    for path in sorted((DEPLOY / "grafana/dashboards").glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel.get("targets", []):
                exprs.append(target["expr"].replace("$__rate_interval", "1m"))
    return exprs


async def test_prometheus_scrapes_both_tiers_and_runs_every_rule_and_panel(
    tiers: tuple[int, int], tmp_path: Path
) -> None:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: run scripts/ensure-services.sh"
    port = free_port()
    config = _config(tmp_path, port, *tiers)
    proc = await asyncio.create_subprocess_exec(
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    api = f"http://127.0.0.1:{port}/api/v1"

    def query(expr: str) -> dict[str, Any]:
        reply: dict[str, Any] = _get_json(f"{api}/query?query={urllib.parse.quote(expr)}")
        return reply

    try:
        deadline = time.monotonic() + 30
        while not port_open("127.0.0.1", port):
            if proc.returncode is not None:
                err = await proc.stderr.read() if proc.stderr else b""
                pytest.fail(f"prometheus exited: {err.decode()[-2000:]}")
            assert time.monotonic() < deadline, "prometheus did not open its port"
            await asyncio.sleep(0.1)
        # the port opens before the storage is loaded; until then every query answers 503

        async def ready() -> bool:
            return await asyncio.to_thread(_answers_ok, f"http://127.0.0.1:{port}/-/ready")

        await eventually(ready, 30)
        # a request the web tier counts
        await asyncio.to_thread(_get_json, f"http://127.0.0.1:{tiers[1]}/healthz")

        async def scraped() -> bool:
            for expr in ALWAYS_THERE:
                reply = await asyncio.to_thread(query, expr)
                if reply["status"] != "success" or not reply["data"]["result"]:
                    return False
            return True

        await eventually(scraped, 30)
        targets = (await asyncio.to_thread(_get_json, f"{api}/targets"))["data"]
        health = {t["labels"]["job"]: t["health"] for t in targets["activeTargets"]}
        assert health == {"gameserver": "up", "webfront": "up", "prometheus": "up"}

        for expr in _dashboard_exprs():
            reply = await asyncio.to_thread(query, expr)
            assert reply["status"] == "success", (expr, reply)

        async def rules_evaluated() -> bool:
            groups = (await asyncio.to_thread(_get_json, f"{api}/rules"))["data"]["groups"]
            rules = [rule for group in groups for rule in group["rules"]]
            never = "0001-01-01T00:00:00Z"  # Go's zero time: not evaluated yet
            return bool(rules) and all(rule["lastEvaluation"] != never for rule in rules)

        await eventually(rules_evaluated, 30)
        groups = (await asyncio.to_thread(_get_json, f"{api}/rules"))["data"]["groups"]
        rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
        expected = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())["groups"]
        assert set(rules) == {r["alert"] for g in expected for r in g["rules"]}
        assert {name: rule["health"] for name, rule in rules.items()} == dict.fromkeys(rules, "ok")
        # a healthy world fires nothing
        assert [name for name, rule in rules.items() if rule["state"] != "inactive"] == []
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.communicate(), 15)
