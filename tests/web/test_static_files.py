"""The browser client a world serves: the game's own ``static/`` folder, else the generic page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, make_mocked_request
from redis.asyncio import Redis

from common.clock import ManualClock
from common.errors import ConfigError
from common.settings import Settings
from tests.web.conftest import FAST_CONFIG
from webfront.app import create_app
from webfront.errors import ApiError
from webfront.routing import static_files
from webfront.static_files import GENERIC_DIR, client_dir, game_static_dir

REPO = Path(__file__).resolve().parents[2]


def test_the_game_s_static_folder_is_its_client() -> None:
    assert game_static_dir("refgame") == REPO / "refgame" / "static"
    assert client_dir("refgame") == REPO / "refgame" / "static"


def test_a_game_without_one_gets_the_generic_page() -> None:
    assert game_static_dir("tests.web.minigame") is None
    assert client_dir("tests.web.minigame") == GENERIC_DIR


def test_a_static_folder_without_a_page_or_a_missing_game_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pagelessgame" / "static").mkdir(parents=True)
    (tmp_path / "pagelessgame" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"has no index\.html"):
        client_dir("pagelessgame")
    with pytest.raises(ConfigError, match="cannot import"):
        game_static_dir("no_such_game_here")


async def test_the_generic_page_is_served_for_a_game_without_a_client(client: TestClient) -> None:
    page = await client.get("/")
    assert page.status == 200 and "/static/generic.js" in await page.text()
    sdk = await client.get("/sdk/webgame.js")
    assert sdk.status == 200 and "javascript" in sdk.headers["Content-Type"]
    assert (await client.get("/static/app.js")).status == 404  # refgame's is not mixed in


async def test_the_reference_game_s_client_is_served_with_the_sdk(
    aiohttp_client: Any, settings: Settings, clock: ManualClock, redis: Redis
) -> None:
    app = create_app(settings.model_copy(update={"game": "refgame"}), clock, config=FAST_CONFIG)
    client: TestClient = await aiohttp_client(app)
    page = await client.get("/")
    assert page.status == 200 and "/static/app.js" in await page.text()
    app_js = await client.get("/static/app.js")
    assert app_js.status == 200 and "from '/sdk/webgame.js'" in await app_js.text()
    assert (await client.get("/sdk/webgame.js")).status == 200
    assert (await client.get("/static/generic.js")).status == 404


async def test_a_client_s_subfolders_are_served_and_nothing_outside(
    aiohttp_client: Any, settings: Settings, clock: ManualClock, redis: Redis
) -> None:
    app = create_app(settings.model_copy(update={"game": "refgame"}), clock, config=FAST_CONFIG)
    client: TestClient = await aiohttp_client(app)
    icon = await client.get("/static/icons/wood.svg")
    assert icon.status == 200 and icon.headers["Content-Type"] == "image/svg+xml"
    assert "<svg" in await icon.text()
    for name in ("icons/nothing.svg", "icons/..%2f..%2fworld.py", "..%2fworld.py",
                 "icons/", "icons", "/icons/wood.svg"):  # fmt: skip
        assert (await client.get(f"/static/{name}")).status == 404, name


async def test_hidden_files_are_not_served(tmp_path: Path) -> None:
    (tmp_path / "sub" / ".git").mkdir(parents=True)
    for name in ("index.html", ".env", "sub/a.css", "sub/.secret", "sub/.git/config"):
        (tmp_path / name).write_text(name)
    serve = static_files(tmp_path)

    async def get(name: str) -> Any:
        return await serve(make_mocked_request("GET", f"/s/{name}", match_info={"filename": name}))

    for name in ("index.html", "sub/a.css"):
        assert (await get(name))._path == tmp_path / name
    for name in (".env", "sub/.secret", "sub/.git/config", "sub", "../x"):
        with pytest.raises(ApiError) as refused:
            await get(name)
        assert refused.value.status == 404, name
