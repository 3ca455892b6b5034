"""``webfront --workers N``: N processes share one port; the parent supervises them."""

from __future__ import annotations

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
from tests.conftest import TEST_REDIS_URL
from tests.sockets import backlog_cap, listen_backlogs
from webfront.main import LISTEN_BACKLOG

BIN = Path(sys.executable).parent


def _start(sqlite_url: str, port: int, workers: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "REDIS_URL": TEST_REDIS_URL, "DATABASE_URL": sqlite_url}
    return subprocess.Popen(
        [str(BIN / "webfront"), "--port", str(port), "--workers", str(workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _listeners(parent: subprocess.Popen[bytes], port: int) -> list[psutil.Process]:
    out = []
    for child in psutil.Process(parent.pid).children(recursive=True):
        try:
            conns = child.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns):
            out.append(child)
    return out


def _wait_for(parent: subprocess.Popen[bytes], port: int, workers: int) -> list[psutil.Process]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert parent.poll() is None, parent.stderr.read().decode() if parent.stderr else ""
        listeners = _listeners(parent, port)
        if len(listeners) == workers:
            return listeners
        time.sleep(0.2)
    raise AssertionError(f"{workers} workers did not start listening on {port}")


@pytest.mark.slow
def test_workers_share_the_port_and_stop_together(sqlite_url: str) -> None:
    port = free_port()
    parent = _start(sqlite_url, port, 2)
    try:
        workers = _wait_for(parent, port, 2)
        assert len({w.pid for w in workers}) == 2
        # each listens with the backlog a burst of connects needs, not aiohttp's 128
        assert listen_backlogs(port) == [min(LISTEN_BACKLOG, backlog_cap())] * 2
        for _ in range(20):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/time", timeout=10) as resp:
                assert resp.status == 200
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 0
        assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@pytest.mark.slow
def test_a_dead_worker_stops_the_server_with_an_error(sqlite_url: str) -> None:
    port = free_port()
    parent = _start(sqlite_url, port, 2)
    try:
        first, second = _wait_for(parent, port, 2)
        first.kill()
        assert parent.wait(timeout=30) != 0
        second.wait(timeout=30)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
