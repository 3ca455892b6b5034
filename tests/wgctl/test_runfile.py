"""`wgctl` finds the world `wgctl run` runs from the same directory, embedded Valkey on a
random port included (var/run.json), through the real CLI against a real local run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.embedded_redis import free_port
from common.settings import load_settings
from tests.waiting import wait_for_blocking
from wgctl import runfile

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
WORLD_VARIABLES = ("REDIS_URL", "REDIS_PREFIX", "DATABASE_URL", "QUEUE_PARTITIONS", "TICK_SHARDS")


def _env(**changes: str) -> dict[str, str]:
    """The environment of an operator's shell: no world settings unless given."""
    env = {k: v for k, v in os.environ.items() if k not in WORLD_VARIABLES}
    env.update(changes)
    return env


def wgctl(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "wgctl"), *args],
        cwd=cwd,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def local_run(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`wgctl run` in an empty directory, its Redis URL pointing nowhere (so it starts the
    embedded Valkey on a random port) and its world on the default SQLite file there."""
    proc = subprocess.Popen(
        [str(BIN / "wgctl"), "run", "--demo-players", "4"],
        cwd=tmp_path,
        env=_env(
            REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
            REDIS_PREFIX="localworld",
            QUEUE_PARTITIONS="3",
            WEB_PORT=str(free_port()),
            GAMESERVER_METRICS_PORT="0",
            MAP_RADIUS="10",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    run_file = tmp_path / "var" / "run.json"
    try:

        def written() -> bool:
            assert proc.poll() is None, "wgctl run exited"
            return run_file.exists()

        wait_for_blocking(written, "wgctl run to write its run file", timeout_s=60)
        yield proc, tmp_path
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_every_command_finds_the_local_world(
    local_run: tuple[subprocess.Popen[bytes], Path],
) -> None:
    proc, cwd = local_run
    run_file = cwd / "var" / "run.json"
    run = json.loads(run_file.read_text())
    assert run["pid"] == proc.pid
    assert run["redis_prefix"] == "localworld" and run["queue_partitions"] == 3
    assert run["redis_url"].startswith("redis://127.0.0.1:") and ":6379/" not in run["redis_url"]
    assert run_file.stat().st_mode & 0o077 == 0  # the database URL may hold a password

    status = wgctl(cwd, "status")
    assert status.returncode == 0, status.stderr
    assert f"redis_url='{run['redis_url']}'" in status.stdout
    assert "prefix='localworld'" in status.stdout
    assert "villages: 4" in status.stdout and "redis_version:" in status.stdout
    assert f"the local world of pid {proc.pid}" in status.stderr

    queue = wgctl(cwd, "queue", "status", "--json")
    assert queue.returncode == 0, queue.stderr
    partitions = [json.loads(line) for line in queue.stdout.splitlines() if line.strip()]
    assert len(partitions) == 3  # the run's QUEUE_PARTITIONS, not the default 16
    dead = wgctl(cwd, "queue", "dead")
    assert dead.returncode == 0, dead.stderr

    migrate = wgctl(cwd, "migrate")
    assert migrate.returncode == 0, migrate.stderr
    assert "database migrated" in migrate.stdout
    worldgen = wgctl(cwd, "worldgen", "--players", "2")
    assert worldgen.returncode == 0, worldgen.stderr
    assert "villages: 6" in wgctl(cwd, "status").stdout  # the same world grew

    # an explicit REDIS_URL wins: the operator means another world
    elsewhere = f"redis://127.0.0.1:{free_port()}/0"
    explicit = wgctl(cwd, "status", REDIS_URL=elsewhere)
    assert explicit.returncode == 3
    assert explicit.stderr.strip().splitlines()[-1].startswith("error: REDIS_URL: cannot reach")

    # a second local run from the same directory would clobber the first one's run file
    second = wgctl(cwd, "run", REDIS_URL=elsewhere)
    assert second.returncode == 2
    assert f"already runs from this directory (pid {proc.pid}" in second.stderr

    proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop removes the run file
    assert proc.wait(30) in (0, 130)  # 130: stopped by Ctrl-C
    assert not run_file.exists()


def test_a_run_file_whose_process_is_gone_is_ignored(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "run.json").write_text(
        json.dumps(
            {
                "pid": int(gone.stdout),
                "redis_url": f"redis://127.0.0.1:{free_port()}/0",
                "redis_prefix": "old",
                "database_url": f"sqlite+aiosqlite:///{tmp_path}/old.db",
                "queue_partitions": 2,
                "tick_shards": 2,
            }
        )
    )
    status = wgctl(tmp_path, "queue", "status", "--json", REDIS_PREFIX=f"wgtgone{int(gone.stdout)}")
    assert f"its run (pid {int(gone.stdout)}) is gone" in status.stderr
    assert "the local world" not in status.stderr
    # the environment's world (the default Redis, 16 partitions), not the dead run's
    assert status.returncode == 0, status.stderr
    assert len(status.stdout.strip().splitlines()) == 16


def test_the_environment_wins_over_the_run_file_setting_by_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in WORLD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    run = runfile.write(
        load_settings(
            redis_url="redis://127.0.0.1:41234/0",
            redis_prefix="local",
            database_url=f"sqlite:///{tmp_path}/world.db",
            queue_partitions=3,
        ),
        os.getpid(),  # alive
    )
    assert runfile.read() == run
    monkeypatch.setenv("REDIS_PREFIX", "mine")
    settings = runfile.world_settings()
    assert (settings.redis_url, settings.redis_prefix, settings.queue_partitions) == (
        "redis://127.0.0.1:41234/0",
        "mine",
        3,
    )
    assert settings.database_url == f"sqlite+aiosqlite:///{tmp_path}/world.db"
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")  # explicit: another world
    assert runfile.world_settings().queue_partitions == 16
    runfile.remove(os.getpid() + 1)  # another run's stop leaves ours alone
    assert runfile.read() == run
    runfile.remove(os.getpid())
    assert runfile.read() is None
