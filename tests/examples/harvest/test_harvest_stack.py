"""The README's example game through the real processes: ``wgctl migrate``, then
``webfront`` and ``gameserver`` with ``GAME=examples.harvest``: register, sow, and at the
harvest's due time the farm's production in the snapshot has risen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.browser.stack import REPO, run_stack
from tests.conftest import TEST_REDIS_URL
from tests.waiting import wait_for_blocking

GAME = "examples.harvest"
PASSWORD = "a harvest of eleven kinds of grain"


def _call(url: str, method: str, body: Any = None, token: str = "") -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _grain(url: str, token: str) -> dict[str, int]:
    status, snapshot = _call(f"{url}/api/snapshot", "GET", token=token)
    assert status == 200, snapshot
    [village] = snapshot["villages"]
    return dict(village["stocks"]["grain"])


def _migrate(database_url: str, redis_prefix: str) -> None:
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": TEST_REDIS_URL,
           "REDIS_PREFIX": redis_prefix, "GAME": GAME, "PYTHONPATH": str(REPO)}  # fmt: skip
    wgctl = Path(sys.executable).parent / "wgctl"
    done = subprocess.run(
        [str(wgctl), "migrate"], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_sow_then_the_harvest_raises_production(tmp_path: Path, redis_prefix: str) -> None:
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'harvest.db'}"
    _migrate(database_url, redis_prefix)
    # at world speed 60 the harvest is due a second after sowing
    with run_stack(
        database_url, redis_prefix, tmp_path, game=GAME, env={"WORLD_SPEED": "60"}
    ) as stack:
        status, account = _call(
            f"{stack.url}/api/register", "POST", {"name": "farmer_ann", "password": PASSWORD}
        )
        assert status == 201, account
        token, farm = account["token"], account["village_id"]
        before = _grain(stack.url, token)
        assert before["rate_per_hour"] == 60 and before["cap"] == 1_000

        status, sown = _call(f"{stack.url}/api/sow", "POST", {"village_id": farm}, token)
        assert status == 200, sown
        assert _grain(stack.url, token)["units"] < before["units"]  # the seed is spent now

        # a farm that is not yours, and a third sowing without the grain for it, change nothing
        status, error = _call(f"{stack.url}/api/sow", "POST", {"village_id": farm + 1}, token)
        assert (status, error["error"]["code"]) == (404, "village_not_found")
        assert _call(f"{stack.url}/api/sow", "POST", {"village_id": farm}, token)[0] == 200
        status, error = _call(f"{stack.url}/api/sow", "POST", {"village_id": farm}, token)
        assert (status, error["error"]["code"]) == (409, "not_enough_grain")

        # both harvests run at their due time, in the task server: 60 + 2 x 20 an hour
        wait_for_blocking(
            lambda: _grain(stack.url, token)["rate_per_hour"] == 100,
            "both harvests to raise the grain rate to 100 an hour",
            timeout_s=30,
        )
