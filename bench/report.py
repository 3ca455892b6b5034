"""What every benchmark prints and saves: a table, a JSON file with machine info, PNG plots."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console(stderr=False)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max of ``values`` (nearest-rank); zeros for an empty list."""
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]

    return {"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "max": ordered[-1]}


def cpu_model() -> str | None:
    """The CPU's model name (Linux): hosts with the same core count differ several-fold in
    speed, so a published figure names the CPU it ran on."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def machine_info(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for package in ("aiohttp", "redis", "hiredis", "sqlalchemy", "asyncpg", "aiosqlite", "msgpack"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "machine": platform.machine(),
        "system": platform.platform(),
        "python": sys.version.split()[0],
        "packages": versions,
        **(extra or {}),
    }


def print_table(title: str, rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    table = Table(title=title)
    for header in headers:
        table.add_column(header, justify="right" if header != headers[0] else "left")
    for row in rows:
        table.add_row(*(_fmt(v) for v in row))
    console.print(table)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def save_json(out_dir: Path, name: str, figures: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    figures = {"benchmark": name, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **figures}
    path.write_text(json.dumps(figures, indent=2, sort_keys=True, default=str))
    return path


def save_plot(out_dir: Path, name: str, draw: Any) -> Path:
    """Call ``draw(ax)`` on a fresh matplotlib axis and save it as ``name``.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    draw(ax)
    fig.tight_layout()
    path = out_dir / f"{name}.png"
    fig.savefig(path)
    plt.close(fig)
    return path
