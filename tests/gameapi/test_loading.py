"""``load_game``: one loader, driven by GAME alone, that fails at start with one line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.errors import ConfigError
from common.ids import IdGenerator
from common.settings import load_settings
from gameapi import Tx, UnknownEventKind, load_game
from gameapi.loading import handler_registry

ROOT = Path(__file__).resolve().parents[2]


def _package(root: Path, name: str, world: str) -> str:
    """A game package ``name`` under ``root`` whose world.py holds ``world``."""
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "world.py").write_text(textwrap.dedent(world))
    return name


@pytest.fixture
def on_path(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))


def test_the_reference_game_loads_once() -> None:
    game = load_game("refgame")
    assert game is load_game("refgame")
    assert game.resource_names() == ("wood", "clay", "iron", "crop")
    social = {f"alliance/{verb}" for verb in
              ("create", "invite", "accept", "decline", "leave", "kick", "promote")}  # fmt: skip
    game_commands = {
        "build",
        "train",
        "march",
        "recall",
        "rules",
        "found",
        "send_resources",
        "messages/send",
        "messages/read",
    }
    assert {route.path for route in game.commands} == game_commands | social
    assert {route.path for route in game.queries} == {"alliance", "messages", "rankings"}


@pytest.mark.parametrize(
    ("world", "expected"),
    [
        (None, "cannot import {name}.world: no module named '{name}.world'"),
        ("x = 1\n", "{name}.world defines no GAME = gameapi.Game(...)"),
        ("raise RuntimeError('boom')\n", "importing {name}.world failed: RuntimeError: boom"),
        ("import no_such_dependency\n", "importing {name}.world failed: No module named"),
        (
            """
            from gameapi import Game
            GAME = Game(name="g", resources=(), new_place=lambda speed, bot: None)
            """,
            "{name}.world: GAME declares no resources",
        ),
        (
            """
            from gameapi import CommandRoute, Game, Resource, StrictBody
            async def h(tx, player_id, body): return {}
            GAME = Game(name="g", resources=(Resource("ore", cap="silo"),),
                        new_place=lambda speed, bot: None,
                        commands=[CommandRoute("Snapshot", StrictBody, h)])
            """,
            "commands path 'Snapshot' must be lower-case words joined by '/'",
        ),
    ],
)
def test_a_broken_game_is_named_with_what_is_missing(
    on_path: Path, world: str | None, expected: str, request: pytest.FixtureRequest
) -> None:
    name = f"broken_{request.node.callspec.id.replace('-', '_')}"[:40]
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    if world is None:
        (on_path / name).mkdir()
        (on_path / name / "__init__.py").write_text("")
    else:
        _package(on_path, name, world)
    with pytest.raises(ConfigError) as caught:
        load_game(name)
    assert expected.format(name=name) in str(caught.value)
    assert f"GAME={name}" in str(caught.value)


def test_a_missing_package_says_how_to_make_it_importable() -> None:
    with pytest.raises(ConfigError, match="put the game's parent directory on PYTHONPATH"):
        load_game("no_such_game_anywhere")
    with pytest.raises(ConfigError, match="is not a Python package name"):
        load_game("../etc")


def test_scheduling_a_kind_no_handler_runs_is_refused_at_once() -> None:
    registry = handler_registry(load_game("refgame"), load_settings())
    tx = Tx(None, 1_000, 1.0, IdGenerator(node=1), kinds=registry)
    assert tx.schedule("march", 7, 2_000, {"march_id": 1}) > 0
    with pytest.raises(UnknownEventKind, match="harvest_done"):
        tx.schedule("harvest_done", 7, 2_000)
    assert [e.kind for e in tx.events] == ["march"]


def test_every_process_and_command_refuses_a_broken_game_with_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "GAME": "no_such_game", "PYTHONPATH": str(ROOT)}
    env.pop("REDIS_URL", None)
    expected = "GAME=no_such_game: cannot import no_such_game.world"
    bin_dir = Path(sys.executable).parent
    for argv in (
        [sys.executable, "-m", "gameserver", "--check"],
        [str(bin_dir / "webfront"), "--check"],
        [str(bin_dir / "wgctl"), "worldgen", "--players", "1"],
        [str(bin_dir / "wgctl"), "run"],
    ):
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (argv, done.stderr)
