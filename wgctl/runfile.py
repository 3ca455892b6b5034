"""The run file of a local world: how ``wgctl`` finds the world ``wgctl run`` started.

``wgctl run`` may start an embedded Valkey on a random port; the other commands
(``status``, ``queue ...``, ``migrate``, ``worldgen``) would not know it. While a
local world runs, ``var/run.json`` (beside the default SQLite world, relative to
the working directory) says where its Redis and database are, with the pid of
``wgctl run``. A command uses it when ``REDIS_URL`` is not set in the
environment and that pid is alive; then the run file's values replace every
setting it holds that the environment does not set. A clean stop removes it; a
file whose process is gone is ignored (with a warning).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from common.settings import Settings, load_settings

RUN_FILE = Path("var") / "run.json"
# the world's settings a run file carries (a world is these, whatever the other settings)
WORLD_FIELDS = ("redis_url", "redis_prefix", "database_url", "queue_partitions", "tick_shards")


@dataclass(frozen=True)
class LocalRun:
    pid: int
    redis_url: str
    redis_prefix: str
    database_url: str
    queue_partitions: int
    tick_shards: int

    def settings(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in WORLD_FIELDS}


def write(settings: Settings, pid: int, path: Path = RUN_FILE) -> LocalRun:
    """Write the run file of the world ``settings`` describe (atomically, owner-only: the
    database URL may hold a password)."""
    run = LocalRun(pid=pid, **{name: getattr(settings, name) for name in WORLD_FIELDS})  # type: ignore[arg-type]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{pid}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(asdict(run), out, indent=2)
        out.write("\n")
    tmp.replace(path)
    return run


def remove(pid: int, path: Path = RUN_FILE) -> None:
    """Remove the run file if it is still the one of ``pid``."""
    run = read(path)
    if run is not None and run.pid == pid:
        path.unlink(missing_ok=True)


def read(path: Path = RUN_FILE) -> LocalRun | None:
    """The run file's content, or None when there is none or it is not one of ours."""
    try:
        data = json.loads(path.read_text())
        return LocalRun(**{key: data[key] for key in ("pid", *WORLD_FIELDS)})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        click.echo(f"wgctl: ignoring {path}: not a run file ({type(exc).__name__})", err=True)
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def live_run(path: Path = RUN_FILE) -> LocalRun | None:
    """The local world running from this directory, if any."""
    run = read(path)
    if run is None:
        return None
    if not alive(run.pid):
        click.echo(f"wgctl: ignoring {path}: its run (pid {run.pid}) is gone", err=True)
        return None
    return run


def world_settings(path: Path = RUN_FILE) -> Settings:
    """Settings from the environment, pointed at the local run's world when one runs here
    and ``REDIS_URL`` is not set explicitly. Raises ConfigError like ``load_settings``."""
    settings = load_settings()
    if "redis_url" in settings.model_fields_set:
        return settings
    run = live_run(path)
    if run is None:
        return settings
    chosen = {k: v for k, v in run.settings().items() if k not in settings.model_fields_set}
    click.echo(f"wgctl: the local world of pid {run.pid} ({path}): {run.redis_url}", err=True)
    return load_settings(**chosen)
