"""The console scripts fail with one clear line and a non-zero exit on bad setups."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from common.embedded_redis import free_port
from tests.conftest import TEST_REDIS_URL

BIN = Path(sys.executable).parent


def run(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "REDIS_URL": TEST_REDIS_URL, **env}
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines, "expected an error message on stderr"
    assert "Traceback" not in proc.stderr
    return lines[-1]


@pytest.mark.parametrize("command", [["wgctl", "status"], ["webfront", "--check"]])
def test_bad_config_is_one_line_and_exit_2(command: list[str], sqlite_url: str) -> None:
    proc = run(command, {"DATABASE_URL": sqlite_url, "WORLD_SPEED": "-1"})
    assert proc.returncode == 2
    assert one_error_line(proc).startswith("error: WORLD_SPEED:")


@pytest.mark.parametrize("command", [["wgctl", "status"], ["webfront", "--check"]])
def test_unreachable_redis_names_redis_url(command: list[str], sqlite_url: str) -> None:
    proc = run(
        command, {"DATABASE_URL": sqlite_url, "REDIS_URL": f"redis://127.0.0.1:{free_port()}"}
    )
    assert proc.returncode == 3
    assert one_error_line(proc).startswith("error: REDIS_URL: cannot reach")


def test_unreachable_database_names_database_url() -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    proc = run(["wgctl", "migrate"], {"DATABASE_URL": url})
    assert proc.returncode == 3
    assert one_error_line(proc).startswith("error: DATABASE_URL: cannot connect")


def test_missing_migration_is_reported(tmp_path: Path) -> None:
    proc = run(["webfront", "--check"], {"DATABASE_URL": f"sqlite:///{tmp_path}/new.db"})
    assert proc.returncode == 4
    assert "wgctl migrate" in one_error_line(proc)


@pytest.mark.parametrize(
    "command",
    [
        ["wgctl", "worldgen", "--players", "3"],
        ["wgctl", "operator", "list"],
        ["wgctl", "queue", "dead"],
        ["wgctl", "queue", "requeue", "--all"],
        ["wgctl", "queue", "drop", "--all", "--yes"],
    ],
)
def test_commands_on_the_world_before_migrate_say_so(command: list[str], tmp_path: Path) -> None:
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path}/new.db",
        "REDIS_PREFIX": f"wgtest_{tmp_path.name}",
    }
    proc = run(command, env)
    assert proc.returncode == 4
    assert "has no schema" in one_error_line(proc) and "wgctl migrate" in one_error_line(proc)


def test_migrate_then_check_passes(tmp_path: Path) -> None:
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/new.db"}
    assert run(["wgctl", "migrate"], env).returncode == 0
    proc = run(["webfront", "--check"], env)
    assert proc.returncode == 0, proc.stderr
    status = run(["wgctl", "status"], env)
    fields = dict(line.strip().split(": ", 1) for line in status.stdout.splitlines())
    assert fields["db_revision"] == fields["db_head"] != "None"


def test_port_in_use_is_one_line(sqlite_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run(["webfront", "--port", str(port)], {"DATABASE_URL": sqlite_url})
    assert proc.returncode == 2
    assert one_error_line(proc) == f"error: WEB_PORT: 127.0.0.1:{port} is already in use"


def test_worldgen_rejects_bad_sizes(sqlite_url: str) -> None:
    proc = run(["wgctl", "worldgen", "--players", "0"], {"DATABASE_URL": sqlite_url})
    assert proc.returncode == 2
    assert "--players" in proc.stderr
