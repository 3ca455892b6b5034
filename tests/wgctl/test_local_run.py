"""`wgctl run` (what `make run` runs) brings up the whole stack and stops it on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from common.embedded_redis import free_port

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def _health(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
            return json.loads(resp.read())
    except OSError:
        return None


def test_run_starts_embedded_redis_and_both_servers_then_stops(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path}/world.db",
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",  # nothing there: embedded Valkey
        "WEB_PORT": str(port),
        "GAMESERVER_METRICS_PORT": "0",
        "MAP_RADIUS": "10",
    }
    proc = subprocess.Popen(
        [str(BIN / "wgctl"), "run", "--demo-players", "5"],
        cwd=tmp_path,  # its run file (var/run.json) too: not the one of a `make run` here
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        health = None
        while time.monotonic() < deadline and proc.poll() is None:
            health = _health(port)
            if health and health.get("status") == "ok":
                break
            time.sleep(0.3)
        assert health == {"status": "ok", "redis": "ok", "db": "ok"}, health
        children = psutil.Process(proc.pid).children(recursive=True)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        assert "valkey-server" in names and "gameserver" in names and "webfront" in names
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as resp:
            assert resp.status == 200
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        proc.wait(30)
        output = proc.stdout.read().decode() if proc.stdout else ""
        assert f"http://127.0.0.1:{port}/" in output
        assert "embedded Valkey" in output
        assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
