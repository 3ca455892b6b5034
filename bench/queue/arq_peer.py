"""A peer: arq, in its own virtualenv (it pins redis-py < 6, which this project outgrew)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from bench.prefix import check_bench_prefix
from bench.queue.constants import ARQ_MAX_JOBS, ARQ_POLL_DELAY_S, ARQ_SETUP
from common.errors import FatalError

_ARQ_DRIVER = r"""
import asyncio, datetime, json, logging, sys, time
from arq import create_pool
from arq.connections import RedisSettings
from arq.worker import Worker, func

logging.disable(logging.INFO)
url, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
queue = prefix + ":arq"
lateness, span = [], [float("inf"), 0.0]

async def noop(ctx, due_ms):
    now = time.perf_counter()
    span[0] = min(span[0], now)
    lateness.append(time.time() * 1000 - due_ms)
    span[1] = time.perf_counter()

async def main():
    pool = await create_pool(RedisSettings.from_dsn(url), default_queue_name=queue)
    due_ms = int((time.time() + n / 2000 + 1.0) * 1000)  # after the last enqueue, we hope
    when = datetime.datetime.fromtimestamp(due_ms / 1000, tz=datetime.timezone.utc)
    started = time.perf_counter()
    for i in range(n):
        await pool.enqueue_job("noop", due_ms, _job_id=f"{prefix}:{i}", _defer_until=when)
    enqueue_s = time.perf_counter() - started
    worker = Worker([func(noop, name="noop", keep_result=0)], redis_pool=pool, queue_name=queue,
                    burst=True, handle_signals=False, keep_result=0, log_results=False,
                    max_jobs=int(sys.argv[4]), poll_delay=float(sys.argv[5]))
    await worker.main()
    await worker.close()
    late = sorted(lateness)
    pick = lambda q: late[min(len(late) - 1, max(0, int(q * len(late) + 0.5) - 1))]
    print("ARQJSON " + json.dumps({
        "events": n, "ran": len(late), "enqueue_s": enqueue_s, "run_s": span[1] - span[0],
        "lateness_ms": {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": late[-1]},
    }), flush=True)

asyncio.run(main())
"""


async def arq_peer(python: Path, redis_url: str, prefix: str, events: int) -> dict[str, Any]:
    """Enqueue ``events`` deferred no-op jobs with arq, run them with an arq worker (burst)."""
    import json
    import subprocess
    import tempfile

    if not python.exists():
        raise FatalError(f"--vs arq: no interpreter at {python}; set one up with: {ARQ_SETUP}")
    check = await asyncio.create_subprocess_exec(
        str(python), "-c", "import arq", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    if await check.wait() != 0:
        raise FatalError(f"--vs arq: {python} cannot import arq; install it: {ARQ_SETUP}")
    with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="wgbench-arq-") as script:
        script.write(_ARQ_DRIVER)
        script.flush()
        proc = await asyncio.create_subprocess_exec(
            str(python), script.name, redis_url, f"{prefix}:arq", str(events),
            str(ARQ_MAX_JOBS), str(ARQ_POLL_DELAY_S), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
    for line in out.decode().splitlines():
        if line.startswith("ARQJSON "):
            figures: dict[str, Any] = json.loads(line[len("ARQJSON ") :])
            break
    else:
        raise FatalError(f"--vs arq: the arq run failed: {err.decode().strip()[-500:]}")
    version = await asyncio.create_subprocess_exec(
        str(python), "-c", "import arq; print(arq.VERSION)", stdout=subprocess.PIPE
    )
    figures["version"] = (await version.communicate())[0].decode().strip()
    figures["settings"] = {"max_jobs": ARQ_MAX_JOBS, "poll_delay_s": ARQ_POLL_DELAY_S}
    figures["enqueue_per_s"] = events / max(figures["enqueue_s"], 1e-9)
    figures["run_per_s"] = figures["ran"] / max(figures["run_s"], 1e-9)
    return figures


async def clear_arq_keys(redis: Redis, prefix: str) -> None:
    """arq names its job keys ``arq:<kind>:<job id>``; ours carry the bench prefix."""
    check_bench_prefix(prefix)
    async for key in redis.scan_iter(match=f"arq:*:{prefix}:arq:*", count=5000):
        await redis.unlink(key)
