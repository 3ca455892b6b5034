"""``python -m bench world`` at a tiny size: the whole stack started, real requests measured,
the verdicts following from the figures, and the result published into the README table."""

from __future__ import annotations

import asyncio
import json
import math
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import asyncpg
import psutil
import pytest
from click.testing import CliRunner

from bench.cli import cli
from bench.readme import load_published, render, update_readme
from bench.world import floor
from bench.world.floor import (
    TARGET_COMMAND_GATHER_MS,
    Costs,
    Traffic,
    floor_figures,
    paced,
    password_hash_cost,
    target_figures,
)
from bench.world.load import Stream, Tally
from bench.world.model import (
    SLO,
    PlayerModel,
    hist_quantile,
    share_within,
    target_sentence,
    verdicts,
)
from bench.world.run import Plan, next_players
from tests.bench.test_readme_bench import README_TEXT, table_rows
from tests.conftest import TEST_PG_ADMIN_URL
from webfront.config import WebConfig
from webfront.passwords import HashParams

TIERS = ("web", "task_server", "postgres", "redis", "load_generator")


def test_histogram_quantiles_follow_prometheus() -> None:
    buckets = [(0.1, 50.0), (1.0, 99.0), (2.5, 100.0), (float("inf"), 100.0)]
    assert hist_quantile(buckets, 0.5) == 0.1
    assert hist_quantile(buckets, 0.99) == pytest.approx(1.0)
    assert hist_quantile(buckets, 0.995) == pytest.approx(1.75)
    assert share_within(buckets, 1.0) == 0.99
    assert hist_quantile([(1.0, 0.0), (float("inf"), 0.0)], 0.99) == 0.0
    assert share_within([(1.0, 0.0), (float("inf"), 0.0)], 1.0) is None
    with pytest.raises(ValueError, match="not a bucket bound"):
        share_within(buckets, 0.5)


def _plan(**changes: Any) -> Plan:
    base = {"start": 100, "max_players": 10_000, "bisect": 2, "warmup_s": 1, "window_s": 1,
            "web_workers": 1, "task_servers": 1, "load_processes": 1, "connections": 1,
            "bots_per_player": 1, "world_speed": 1, "seed": 1}  # fmt: skip
    return Plan(**{**base, **changes})


def test_a_stream_tells_each_pushed_version_once_it_is_whole() -> None:
    tally = Tally(0.0, 1.0)
    versions: list[int] = []
    stream = Stream(b"", tally, versions.append)
    stream.data_received(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: ver")
    assert versions == [] and tally.streams_open == 1
    stream.data_received(b'sion\ndata: {"version":7}\n\nevent: alert\ndata: {"kind":"x"}\n')
    assert versions == [7] and tally.stream_events == 1
    # a write's chunk size line (chunked transfer encoding) before its event
    stream.data_received(
        b'\nevent: resync\ndata: {}\n\n\r\n23\r\nevent: version\ndata: {"version":9}\n\n'
    )
    assert versions == [7, 9] and tally.stream_events == 4


def test_a_stream_the_server_ends_is_an_error_named_by_how_it_ended() -> None:
    tally = Tally(0.0, math.inf)
    for exc in (None, ConnectionResetError()):  # closed, or reset (a client dropped)
        stream = Stream(b"", tally)
        stream.data_received(b"HTTP/1.1 200 OK\r\n\r\n")
        stream.connection_lost(exc)
    ours = Stream(b"", tally)
    ours.closing = True  # the generator closes its streams after the window
    ours.connection_lost(None)
    assert tally.errors == {"stream_closed": 1, "stream_reset": 1}
    assert tally.streams_open == 0


def test_the_search_doubles_then_bisects_and_stops() -> None:
    plan = _plan()
    steps = [{"players": 100, "ok": True}]
    assert next_players(steps, plan) == 200
    steps += [{"players": 200, "ok": True}, {"players": 400, "ok": False}]
    assert next_players(steps, plan) == 300
    steps += [{"players": 300, "ok": True}]
    assert next_players(steps, plan) == 350
    steps += [{"players": 350, "ok": False}]
    assert next_players(steps, plan) is None  # two bisection steps taken
    assert next_players([{"players": 10_000, "ok": True}], plan) is None  # --max-players
    assert next_players([{"players": 100, "ok": False}], plan) == 50  # below the start


def test_players_offline_send_nothing_and_the_online_send_the_worlds_logins() -> None:
    everyone = PlayerModel()
    fifth = PlayerModel(online_share=0.2)
    assert (everyone.online(1_000), fifth.online(1_000), fifth.online(2)) == (1_000, 200, 1)
    # a world player's requests: a fifth of an online player's, and their own daily logins
    logins = everyone.logins_per_player_day / 86_400
    assert math.isclose(
        fifth.requests_per_player_s() - logins, (everyone.requests_per_player_s() - logins) / 5
    )
    # 200 online players log in as often as the world's 1,000 players do
    assert math.isclose(200 * fifth.logins_per_online_player_s(), 1_000 * logins)


def test_the_floor_prices_a_steps_traffic_per_player() -> None:
    step = {  # as a step counts: fetches among the polls, orders etc. among the commands
        "players": 1000,
        "requests": {"poll": 960, "fetch": 60, "command": 120, "order": 100, "march": 16,
                     "recall": 4, "login": 3},
        "outcomes": {"poll": {"full": 240, "not_modified": 720}, "fetch": {"full": 60}},
        "event_lateness": {"count": 90},
    }  # fmt: skip
    traffic = Traffic.of(step, 30.0)
    # every request a page sent, once; the answers that were whole snapshots
    assert traffic == Traffic(1000, requests_per_s=36.1, builds_per_s=8.0, commands_per_s=4.0,
                              events_per_s=3.0, logins_per_s=0.1)  # fmt: skip
    costs = Costs(http_server=100, build_postgres=400, build_client=200, command_postgres=250,
                  command_client=150, event_postgres=500, event_client=300,
                  password_hash=300_000)  # fmt: skip
    ours = {"web": 0.01, "task_server": 0.002, "postgres": 0.01, "redis": 0.001,
            "load_generator": 5.0}  # fmt: skip
    floor = floor_figures(traffic, costs, ours, cores=2)
    # web: 36.1 x 100 + 8 x 200 + 4 x 150 + 0.1 x 300,000 (the logins' hashes) µs a second
    # for 1,000 players; task: 3 x 300; PostgreSQL: 8 x 400 + 4 x 250 + 3 x 500
    assert floor["millicores_per_player"] == {
        "web": 0.0358, "task_server": 0.0009, "postgres": 0.0057, "redis": 0.0,
    }  # fmt: skip
    assert floor["players_on_these_cores"] == 47_169  # 2,000 millicores / 0.0424
    assert floor["ours_to_floor"] == 0.54  # the servers' 0.023, the load generator apart

    # the target's players send the same per player; its database work alone
    target = traffic.scaled(100_000)
    assert target == Traffic(100_000, 3610.0, 800.0, 400.0, 300.0, 10.0)
    need = target_figures(target, replace(costs, command_gather_ms=10), cores=4)
    # PostgreSQL: 800 x 400 + 400 x 250 + 300 x 500 µs a second; their client:
    # 800 x 200 + 400 x 150 + 300 x 300; HTTP 3,610 x 100; hashes 10 x 300,000
    assert need["postgres_cores"] == 0.57 and need["database_cores"] == 0.88
    assert need["http_cores"] == 0.36 and need["password_hash_cores"] == 3.0
    assert need["cores_at_least"] == 4.24 and need["fits_these_cores"] is False
    assert target_figures(target.scaled(10_000), costs, cores=1)["fits_these_cores"] is True
    said = target_sentence(need)
    assert "100,000 players' traffic on bare parts" in said and "needs 4.24 cores" in said
    assert "commands gathered in 10 ms" in said
    # a result published before the target's HTTP was measured still reads as it did
    old = {"players": 100_000, "cores_at_least": 0.88, "postgres_cores": 0.57}
    assert target_sentence(old).endswith("need 0.88 cores (PostgreSQL 0.57) before any HTTP")


def test_the_floor_prices_a_login_at_one_production_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cheapest of a few hashes with the production parameters, by the hashing thread's
    own CPU clock (a clock of the test's here: no timing in a test)."""
    hashed: list[HashParams] = []
    readings = iter([0, 500_000, 500_000, 800_000, 800_000, 1_250_000])  # ns
    monkeypatch.setattr(floor, "hash_password", lambda _pw, params: hashed.append(params))
    monkeypatch.setattr(floor.time, "thread_time_ns", lambda: next(readings))
    assert password_hash_cost() == 300.0  # µs: the second of 500, 300 and 450
    assert hashed == [WebConfig().password_hash] * floor.HASHES


async def test_the_floors_load_starts_each_operation_once() -> None:
    ran: list[int] = []

    async def op() -> None:
        ran.append(len(ran))

    assert await paced(1000.0, 0.01, op) == 10
    assert ran == list(range(10))


def _check_step(step: dict[str, Any]) -> None:
    assert step["players"] in (20, 40)
    assert step["requests"]["poll"] > 0 and step["requests"]["command"] > 0
    # the stream's pushes brought snapshot fetches, held to the poll's level with the polls
    assert 0 < step["requests"]["fetch"] <= step["requests"]["poll"]
    assert step["requests"]["command"] == sum(
        step["requests"].get(k, 0) for k in ("order", "march", "recall")
    )
    assert step["requests_per_s"] > 0
    assert step["tick_shard"]["count"] > 0 and step["event_lateness"]["count"] > 0
    assert step["streams"]["players"] > 0
    # two web workers: a scrape reaches one of them, so no figure (one: tests/web/test_push.py)
    assert step["streams"]["dropped_by_server"] is None
    assert 0 < step["machine_cpu"]["busy_share"] <= 1 and step["machine_cpu"]["ours_cores"] > 0
    for tier in TIERS:
        assert step["cpu"][tier]["processes"] >= 1
    for tier in ("web", "task_server", "load_generator"):
        assert step["cpu"][tier]["cpu_seconds"] > 0
        assert step["cpu"][tier]["millicores_per_player"] > 0
    assert step["cpu"]["web"]["processes"] == 2 and step["cpu"]["task_server"]["processes"] == 2
    # the verdicts follow from the figures alone
    held = step["slo_held"]
    assert held == verdicts(step)
    assert held["poll_p99_ms"] == (step["latency_ms"]["poll"]["p99"] < SLO["poll_p99_ms"])
    assert held["command_p99_ms"] == (step["latency_ms"]["command"]["p99"] < SLO["command_p99_ms"])
    for name, key in (("event_lateness_p99_s", "event_lateness"), ("tick_shard_p99_s",
                                                                    "tick_shard")):  # fmt: skip
        buckets = [(le, n) for le, n in step[key]["buckets"]]
        within = share_within(buckets, 1.0)
        assert within == step[key]["share_within_1s"]
        assert held[name] == (within is None or within >= 0.99)
    assert held["errors"] == (step["errors"]["total"] == 0)
    assert step["ok"] == all(held.values())
    assert (step["first_failed"] is None) == step["ok"]


@pytest.mark.timeout(300)  # two steps of the whole stack on a shared machine
def test_world_bench_measures_the_stack_and_publishes(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "world", "--start", "20", "--max-players", "40",
         "--bisect", "0", "--warmup", "3", "--window", "4", "--web-workers", "2",
         "--task-servers", "2", "--poll-interval", "1", "--command-interval", "2",
         "--march-interval", "3", "--world-speed", "1000", "--logins-per-day", "1000",
         "--online-share", "0.5", "--db", "postgresql",
         "--db-name", f"wgbench_world_{uuid.uuid4().hex[:8]}",
         "--pg-admin-url", TEST_PG_ADMIN_URL, "--out", str(out)],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    figures = json.loads((out / "world_online.json").read_text())  # a share online
    assert figures["benchmark"] == "world_online"
    assert figures["setup"]["web_processes"] == 2 and figures["setup"]["task_servers"] == 2
    steps = figures["steps"]
    assert 1 <= len(steps) <= 2 and steps[0]["players"] == 20
    for step in steps:
        _check_step(step)
        # half the world's players online, played by the generators; the rest idle
        assert step["online"] == step["players"] // 2
        assert step["streams"]["players"] == int(step["online"] * 0.25)
    held = [s["players"] for s in steps if s["ok"]]
    assert figures["max_players"] == max(held, default=0)
    assert figures["max_players_online"] == figures["max_players"] // 2
    missed = [s for s in steps if not s["ok"]]
    if missed:
        assert figures["first_limit"]["slo"] == missed[0]["first_failed"]
        assert figures["first_limit"]["at_players"] == missed[0]["players"]
    else:
        assert figures["first_limit"]["slo"] is None and len(steps) == 2
    assert figures["cpu_millicores_per_player"]["web"] > 0
    assert figures["target"] == {"players": 100_000, "met": False}
    # the basis step's traffic, measured again on bare parts
    floor = figures["floor"]
    assert floor["traffic"]["players"] == figures["cpu_basis_players"]
    [basis] = [s for s in steps if s["players"] == figures["cpu_basis_players"]]
    assert abs(floor["traffic"]["requests_per_s"] - basis["requests_per_s"]) < 0.1
    # logins at the model's mean rate (a short window holds a handful, if any)
    assert floor["traffic"]["logins_per_s"] == round(basis["players"] * 1000 / 86_400, 2)
    assert all(v > 0 for v in floor["cpu_us_per_operation"].values())
    assert floor["players_on_these_cores"] > 0 and floor["ours_to_floor"] > 0
    target = floor["at_target"]
    assert target["players"] == 100_000 and target["cores_at_least"] > target["postgres_cores"] > 0
    assert target["http_cores"] > 0 and target["measured_at_per_s"]["http"] == "saturation"
    # the commands priced as the stack gathers them and in the target's window: the cheaper
    assert target["measured_at_per_s"]["commands_gathered_ms"] in (0, TARGET_COMMAND_GATHER_MS)
    # the basis step's logins (a few, or none in a short window), scaled, a hash each
    hashes = target["traffic"]["logins_per_s"] * target["cpu_us_per_operation"]["password_hash"]
    assert target["password_hash_cores"] == round(hashes / 1e6, 2)
    assert all(v > 0 for v in target["cpu_us_per_operation"].values())
    assert (out / "world_online.png").stat().st_size > 1000
    assert "largest N holding every service level" in proc.stdout

    # the publish path takes it, and the README table shows it
    published = tmp_path / "published"
    publish = CliRunner().invoke(
        cli, ["publish", "--published", str(published), str(out / "world_online.json")]
    )
    assert publish.exit_code == 0, publish.output
    rows = table_rows(render(load_published(published), published))
    (what, row), = rows.items()  # fmt: skip
    assert what.startswith("world: the whole stack, 2 web processes + 2 task servers")
    machine = figures["machine"]  # capacity is the host's as much as the code's
    if machine["cpu_model"]:
        assert f"{machine['cpu_count']} cores of {machine['cpu_model']})" in what
    assert "50% of them online at once" in what
    most, online = figures["max_players"], figures["max_players_online"]
    held_text = f"{most:,} players ({online:,} online)" if most else "0 players"
    assert row[0].startswith(f"{held_text} within every service level")
    assert "load generator" in row[0] and "(projected)" in row[0]
    assert f"the servers use {floor['ours_to_floor']:g} x the floor" in row[0]
    assert target_sentence(target) in row[0] and "HTTP" in target_sentence(target)
    assert row[3].startswith("≥ 100,000 players") and row[4] == "**missed** (players)"
    readme = tmp_path / "README.md"
    readme.write_text(README_TEXT)
    assert update_readme(readme, published) is True
    assert "world: the whole stack" in readme.read_text()


@pytest.mark.timeout(300)
def test_a_sigterm_stops_the_run_and_everything_it_started(tmp_path: Path) -> None:
    db_name = f"wgbench_world_{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "world", "--start", "20", "--max-players", "20",
         "--warmup", "3", "--window", "600", "--db", "postgresql", "--db-name", db_name,
         "--pg-admin-url", TEST_PG_ADMIN_URL, "--out", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    bench = psutil.Process(proc.pid)
    try:
        # the step's window has begun once its load generator runs: by then the stack,
        # the embedded Valkey and the bench database all exist
        deadline = time.monotonic() + 200
        while not any("load" in c.cmdline() for c in _alive(bench.children(recursive=True))):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the load generator never started"
            time.sleep(0.1)
        started = bench.children(recursive=True)
        assert len(started) >= 4  # web, task server, Valkey, load generator
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == (
        "error: stopped by SIGTERM: the processes it started and its database are gone"
    ), err
    assert _alive(started) == []
    assert not asyncio.run(_database_exists(db_name))
    assert not (tmp_path / "world.json").exists()


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for p in procs:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


async def _database_exists(name: str) -> bool:
    conn = await asyncpg.connect(TEST_PG_ADMIN_URL.replace("+asyncpg", ""))
    try:
        return bool(await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name))
    finally:
        await conn.close()
