"""A world for browser tests: the real servers as subprocesses, and Debian's Chromium.

``run_stack`` starts ``webfront`` (and ``gameserver`` when asked) on a SQLite
file and the test Redis under the test's prefix, waits for ``/healthz`` and
stops them (and removes the prefix's keys) afterwards. The reference game's
browser tests get it as the ``stack`` fixture (``conftest.py``); the helpers
below are what they share: players made through the API or in the page, and the
few things a test prepares in the database.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, Route, expect
from redis import Redis
from sqlalchemy.engine import make_url

from common.snapshot_versions import push_channel, version_key
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
ARTIFACTS = REPO / "artifacts" / "browser"
WAIT_MS = 60_000  # the bound of every wait for the page
PASSWORD = "browser test password"


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


def new_page(browser: Browser, errors: list[str], url: str) -> Page:
    """A page in a browser context of its own (a session of its own) under the CSP; script
    errors and the CSP's refusals go to ``errors``."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # the page runs under its Content-Security-Policy: anything it refuses is an error
    page.on(
        "console",
        lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
    )
    enforce_csp(page, f"{url}/", errors)  # the client runs without inline script or style
    return page


def register(url: str, name: str) -> dict[str, int]:
    """A player registered through the API: its ``token``, ``player_id`` and ``village_id``."""
    request = urllib.request.Request(
        f"{url}/api/register",
        data=json.dumps({"name": name, "password": PASSWORD}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        body: dict[str, int] = json.loads(answer.read())
    return body


def register_in_page(page: Page, url: str, name: str) -> None:
    """``name`` registers in the page; done once the village shows."""
    page.goto(url)
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Register").click()
    expect(page.locator("#village-title")).to_contain_text(f"{name}'s village")


def log_in(page: Page, url: str, name: str) -> None:
    """``name`` (registered before) logs in in the page; done once the page names them."""
    page.goto(url)
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#player-name")).to_have_text(name)


def player_id(stack: Stack, name: str) -> int:
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        row = db.execute("SELECT id FROM players WHERE name = ?", (name,)).fetchone()
    assert row is not None, f"no player {name!r} in the database"
    return int(row[0])


def spot(stack: Stack, player: int) -> tuple[int, int]:
    """Where ``player``'s (first) village is."""
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        x, y = db.execute("SELECT x, y FROM villages WHERE player_id = ?", (player,)).fetchone()
    return int(x), int(y)


def place_next_to(
    stack: Stack, village_id: int, near_player: int, offset: int, map_radius: int
) -> tuple[int, int]:
    """Move ``village_id`` to a free spot ``offset`` fields from ``near_player``'s village
    along both axes (a diagonal: far, yet inside the client's map window)."""
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        ax, ay = db.execute(
            "SELECT x, y FROM villages WHERE player_id = ?", (near_player,)
        ).fetchone()
        taken = set(db.execute("SELECT x, y FROM villages").fetchall())
        for dx, dy in ((offset, offset), (-offset, offset), (offset, -offset), (-offset, -offset)):
            x, y = ax + dx, ay + dy
            if abs(x) <= map_radius and abs(y) <= map_radius and (x, y) not in taken:
                db.execute("UPDATE villages SET x = ?, y = ? WHERE id = ?", (x, y, village_id))
                return x, y
    raise AssertionError(f"no free spot {offset}|{offset} fields from ({ax}|{ay})")


def ensure_troops(stack: Stack, player_id: int, unit: str, count: int) -> None:
    """Give the player's village ``count`` of ``unit`` at home unless it has them already."""
    with sqlite3.connect(stack.db_path, timeout=10) as db:
        (village_id,) = db.execute(
            "SELECT id FROM villages WHERE player_id = ?", (player_id,)
        ).fetchone()
        row = db.execute(
            "SELECT count FROM troops WHERE village_id = ? AND home_village_id = ? AND unit = ?",
            (village_id, village_id, unit),
        ).fetchone()
        if row and row[0] >= count:
            return
        db.execute(
            "INSERT INTO troops (village_id, home_village_id, unit, count) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (village_id, home_village_id, unit) DO UPDATE SET count = excluded.count",
            (village_id, village_id, unit, count),
        )
    client = Redis.from_url(TEST_REDIS_URL)  # the page must see the change: bump the version
    version = client.incr(version_key(stack.redis_prefix, player_id))
    client.publish(push_channel(stack.redis_prefix), f"v {player_id}:{version}")  # and push it
    client.close()
