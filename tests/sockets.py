"""What the kernel says of a listening socket (``ss``, from iproute2)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def listen_backlogs(port: int) -> list[int]:
    """The accept backlogs of the sockets listening on ``port`` (``ss`` shows it as Send-Q)."""
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    return [int(line.split()[2]) for line in out.splitlines()]


def backlog_cap() -> int:
    """The largest backlog the kernel grants (``net.core.somaxconn``)."""
    return int(Path("/proc/sys/net/core/somaxconn").read_text())
