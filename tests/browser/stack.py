"""A world for browser tests: the real servers as subprocesses, and Debian's Chromium.

``run_stack`` starts ``webfront`` (and ``gameserver`` when asked) on a SQLite
file and the test Redis under the test's prefix, waits for ``/healthz`` and
stops them (and removes the prefix's keys) afterwards.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, Route
from redis import Redis
from sqlalchemy.engine import make_url

from tests.conftest import TEST_REDIS_URL

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPO = Path(__file__).resolve().parents[2]
# What the pages must live with: no inline script or style, nothing from elsewhere.
CSP = "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'"


@dataclass(frozen=True)
class Stack:
    url: str
    db_path: Path
    redis_prefix: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _wait_healthy(url: str, web: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if web.poll() is not None:
            pytest.fail(f"webfront exited with {web.returncode}:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"webfront did not become healthy within 30 s:\n{_tail(log)}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextmanager
def run_stack(
    sqlite_url: str,
    redis_prefix: str,
    log_dir: Path,
    *,
    game: str,
    processes: Sequence[str] = ("webfront", "gameserver"),
    env: dict[str, str] | None = None,
) -> Iterator[Stack]:
    """``processes`` (webfront first) on a fresh SQLite world and the test Redis."""
    port = _free_port()
    bin_dir = Path(sys.executable).parent
    for script in processes:
        if not (bin_dir / script).exists():
            pytest.fail(f"{bin_dir / script} is missing: install the project (pip install -e .)")
    full_env = {
        **os.environ,
        "DATABASE_URL": sqlite_url,
        "REDIS_URL": TEST_REDIS_URL,
        "REDIS_PREFIX": redis_prefix,
        "WEB_HOST": "127.0.0.1",
        "WEB_PORT": str(port),
        "GAMESERVER_METRICS_PORT": "0",
        "GAME": game,
        # the repository first, so its packages win over a stale editable install
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        **(env or {}),
    }
    logs = {name: log_dir / f"{name}.log" for name in processes}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, log in logs.items():
            with log.open("wb") as out:
                procs.append(
                    subprocess.Popen(
                        [str(bin_dir / name)], env=full_env, cwd=REPO, stdout=out, stderr=out
                    )
                )
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, procs[0], logs["webfront"])
        yield Stack(url, Path(make_url(sqlite_url).database or ""), redis_prefix)
        for proc, (name, log) in zip(procs, logs.items(), strict=True):
            if proc.poll() is not None:
                pytest.fail(f"{name} exited early with {proc.returncode}:\n{_tail(log)}")
    finally:
        for proc in procs:
            _stop(proc)
        for name, log in logs.items():  # pytest shows this output when the test failed
            print(f"---- {name} log (last lines) ----\n{_tail(log, 60)}")
        client = Redis.from_url(TEST_REDIS_URL)
        for key in client.scan_iter(match=f"{redis_prefix}:*", count=1000):
            client.delete(key)
        client.close()


def launch_chromium(pw: Playwright) -> Browser:
    if not CHROMIUM.exists():
        pytest.fail(
            f"Debian's Chromium is missing at {CHROMIUM}: apt-get install chromium "
            "(scripts/ensure-services.sh does); the test never downloads a browser"
        )
    return pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)


def enforce_csp(page: Page, url: str, errors: list[str]) -> None:
    """Serve the page at ``url`` under ``CSP``; the browser's refusals go to ``errors``."""

    def with_csp(route: Route) -> None:
        answer = route.fetch()
        route.fulfill(response=answer, headers={**answer.headers, "content-security-policy": CSP})

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error" and "Content Security Policy" in message.text:
            errors.append(message.text)

    page.route(url, with_csp)
    page.on("console", on_console)
