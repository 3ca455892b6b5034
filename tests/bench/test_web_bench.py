"""Smoke tests of ``python -m bench web`` at tiny sizes: figures produced and sane, clear errors."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.web import PHASES, Req, python_load, wrk_script
from bench.web.model import LoadResult
from bench.web.phases import WebFigures
from bench.web.players import sweep_orders
from common.clock import ManualClock
from common.settings import Settings
from db.models import ScheduledEvent
from db.worldgen import generate_world
from gameapi import load_game
from gameapi.testing import GameDriver
from refgame import commands
from refgame.handlers import BUILD_DONE
from refgame.models import BuildOrder
from refgame.resources import STOCKS
from refgame.world import village_template
from tests.conftest import TEST_REDIS_URL


def test_web_bench_produces_sane_figures(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    tokens = tmp_path / "tokens.txt"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "web", "--players", "3", "--connections", "4",
         "--sweep", "2", "--duration", "1", "--sweep-duration", "1", "--no-full-cycle",
         "--db", "sqlite",
         "--db-name", f"wgbench_smoke_{tag}", "--prefix", f"wgbench_smoke_{tag}",
         "--redis-url", TEST_REDIS_URL, "--save-tokens", str(tokens), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((tmp_path / "web_sqlite.json").read_text())
    assert figures["players"] == 3 and figures["connections"] == 4
    assert figures["machine"]["cpu_count"] >= 1 and figures["machine"]["redis"]
    results = figures["results"]
    ceilings = ("bare_commands", "bare_refused")  # hand-written for PostgreSQL only
    assert {(r["phase"], r["connections"]) for r in results} == {
        (p, c) for p in PHASES for c in (2, 4) if p not in ceilings
    }
    for r in results:
        assert r["requests"] > 0 and r["rps"] > 0, r
        lat = r["latency_ms"]
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"], r
        assert sum(r["statuses"].values()) == r["requests"], r
    by_phase = {r["phase"]: r for r in results if r["connections"] == 4}
    assert set(by_phase["bare"]["statuses"]) == {"200"}
    assert set(by_phase["poll_304"]["statuses"]) == {"304"}  # the ETag path, not a full body
    assert set(by_phase["full"]["statuses"]) == {"200"}
    # the build phase builds its answers (a poll that finds the build of its player's
    # version in flight shares it: 4 connections, 3 players)
    build = by_phase["build"]
    assert set(build["statuses"]) == {"200"}
    assert build["requests"] / 2 < build["builds"] <= build["requests"], build
    assert by_phase["full"]["builds"] is None  # counted in the build phase only
    assert all(s.startswith(("2", "4")) for s in by_phase["commands"]["statuses"])
    assert "201" in by_phase["commands"]["statuses"] or "200" in by_phase["commands"]["statuses"]
    assert set(by_phase["refused"]["statuses"]) == {"409"}  # nothing to pay with
    assert figures["ratios"]["poll_304_ratio"] > 0 and figures["ratios"]["full_ratio"] > 0
    assert (tmp_path / "web_sqlite.png").stat().st_size > 1000
    assert len(tokens.read_text().split()) == 3
    assert "304/bare" in proc.stdout
    assert not list(Path("var/bench").glob(f"wgbench_smoke_{tag}*"))  # the bench DB is gone


def test_web_bench_on_several_processes_writes_its_own_file(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "web", "--workers", "2", "--players", "2",
         "--connections", "4", "--sweep", "", "--duration", "1", "--no-full-cycle",
         "--db", "sqlite", "--db-name", f"wgbench_smoke_{tag}", "--prefix", f"wgbench_smoke_{tag}",
         "--redis-url", TEST_REDIS_URL, "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((tmp_path / "web_sqlite_workers.json").read_text())
    assert figures["workers"] == 2
    assert {r["phase"] for r in figures["results"]} >= {"bare", "poll_304", "full"}
    assert all(r["rps"] > 0 for r in figures["results"])
    assert not (tmp_path / "web_sqlite.json").exists()  # the one-process figures stay apart


def test_web_bench_against_an_unreachable_url_fails_clearly(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "web", "--url", f"http://127.0.0.1:{port}",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert f"--url: cannot reach http://127.0.0.1:{port}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_web_bench_refuses_a_prefix_it_does_not_own(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "web", "--prefix", "wg", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "starts with 'wgbench'" in proc.stderr


async def test_python_load_generator_counts_answers_and_latencies() -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(status=304 if request.headers.get("If-None-Match") else 200)

    app = web.Application()
    app.router.add_get("/x", hello)
    async with TestServer(app) as server:
        spec = {
            "url": str(server.make_url("/")),
            "requests": [
                {"method": "GET", "path": "/x", "headers": {}, "body": None},
                {"method": "GET", "path": "/x", "headers": {"If-None-Match": '"1"'}, "body": None},
            ],
            "connections": 3,
            "duration_s": 0.5,
        }
        figures = await python_load(spec)
    assert figures["requests"] > 10
    assert set(figures["statuses"]) == {"200", "304"}
    assert sum(figures["statuses"].values()) == figures["requests"]
    assert 0 < figures["latency_us"]["p50"] <= figures["latency_us"]["max"]


def test_wrk_script_quotes_what_it_embeds() -> None:
    script = wrk_script([Req("POST", "/api/build", {"X": "a]]b"}, '{"k": "]=]"}')])
    assert "[=[a]]b]=]" in script  # a long bracket the text cannot close early
    assert '[==[{"k": "]=]"}]==]' in script
    assert script.count("reqs = {") == 1 and "function done" in script


def test_each_wrk_script_keys_its_commands_apart() -> None:
    """wrk's math.random is unseeded: a run token from Lua would repeat the last run's keys."""
    reqs = [Req("POST", "/api/build", {}, "{}", fresh_key=True)]
    scripts = [wrk_script(reqs) for _ in range(3)]
    runs = {line for script in scripts for line in script.splitlines() if line.startswith("run = ")}
    assert len(runs) == 3
    assert "run = [=[abc]=]" in wrk_script(reqs, "abc")


def test_web_bench_measures_the_command_ceiling_on_postgresql(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "web", "--players", "4", "--connections", "4",
         "--sweep", "", "--duration", "1", "--no-full-cycle", "--db", "postgresql",
         "--db-name", f"wgbench_smoke_{tag}", "--prefix", f"wgbench_smoke_{tag}",
         "--redis-url", TEST_REDIS_URL, "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((tmp_path / "web_postgresql.json").read_text())
    by_phase = {r["phase"]: r for r in figures["results"]}
    assert set(by_phase["bare_commands"]["statuses"]) == {"200"}
    assert set(by_phase["bare_refused"]["statuses"]) == {"409"}
    assert set(by_phase["refused"]["statuses"]) == {"409"}
    assert figures["ratios"]["commands_ratio"] > 0 and figures["ratios"]["refused_ratio"] > 0
    assert {"commands_ratio", "commands_p99", "refused_ratio", "refused_p99"} <= set(
        figures["targets_met"]
    )
    refused, build = by_phase["refused"], by_phase["build"]
    assert figures["targets_met"]["refused_cpu"] == (
        refused["server_cpu_us_per_request"] <= build["server_cpu_us_per_request"]
    )
    assert "commands/ceiling" in proc.stdout and "a snapshot build" in proc.stdout


async def test_the_order_sweep_ends_queued_builds_with_their_events(
    settings: Settings, engine: AsyncEngine
) -> None:
    """Without a task server, a build's event left behind comes due and the village refuses
    every later command as ``events_pending``: the bench's build phase would measure
    refusals. The sweep ends orders and events together, as finished builds do."""
    clock = ManualClock(1_750_000_000_000)
    await generate_world(
        engine, stocks=STOCKS, players=1, template=village_template(1.0), shards=1,
        map_radius=3, seed=1, clock=clock,
    )  # fmt: skip
    game = GameDriver(load_game("refgame"), engine, clock)
    await game.command(commands.build, 1, 1, "woodcutter")

    async def counts() -> tuple[int, int]:
        async with engine.connect() as conn:
            orders = await conn.scalar(select(func.count()).select_from(BuildOrder))
            events = await conn.scalar(
                select(func.count()).where(ScheduledEvent.kind == BUILD_DONE)
            )
            return int(orders or 0), int(events or 0)

    assert await counts() == (1, 1)
    stop = asyncio.Event()
    stop.set()  # one pass
    await sweep_orders(settings, stop)
    assert await counts() == (0, 0)


def test_a_command_phase_answered_otherwise_than_meant_misses_its_ratio() -> None:
    """A build phase answered 409 measured refusals, which read faster: never a "met"."""

    def result(phase: str, rps: float, statuses: dict[str, int]) -> LoadResult:
        lat = {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0, "mean": 1.5}
        n = sum(statuses.values())
        return LoadResult(phase, 100, 1.0, n, rps, lat, statuses, {})

    def figures(commands: dict[str, int]) -> WebFigures:
        results = [
            result("bare_commands", 1000, {"200": 1000}),
            result("commands", 900, commands),
            result("bare_refused", 1000, {"409": 1000}),
            result("refused", 900, {"409": 900}),
        ]
        return WebFigures(results, 100, 4, 1, "wrk", "bench server")

    accepted = figures({"200": 900})
    assert accepted.summary()["targets_met"]["commands_ratio"]
    partly_refused = figures({"200": 400, "409": 500})
    met = partly_refused.summary()["targets_met"]
    assert not met["commands_ratio"] and met["refused_ratio"]
