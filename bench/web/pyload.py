"""The Python load generator (``python -m bench.web load spec.json``), for hosts without wrk."""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from typing import Any

import aiohttp

from bench.web.model import Req


async def python_load(spec: dict[str, Any]) -> dict[str, Any]:
    from bench.report import percentiles

    requests = [Req(**r) for r in spec["requests"]]
    connections = int(spec["connections"])
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    errors = {"connect": 0, "read": 0, "write": 0, "timeout": 0}
    counter = random.randrange(len(requests))
    run = secrets.token_hex(6)  # keys unique across runs against one server
    connector = aiohttp.TCPConnector(limit=connections, force_close=False)
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(spec["url"], connector=connector, timeout=timeout) as http:
        started = time.perf_counter()
        deadline = started + float(spec["duration_s"])

        async def loop() -> None:
            nonlocal counter
            while time.perf_counter() < deadline:
                counter += 1
                r = requests[counter % len(requests)]
                headers = r.headers
                if r.fresh_key:
                    headers = {**headers, "Idempotency-Key": f"b{run}-{counter}"}
                t0 = time.perf_counter()
                try:
                    async with http.request(
                        r.method, r.path, headers=headers, data=r.body
                    ) as response:
                        await response.read()
                    latencies.append(time.perf_counter() - t0)
                    statuses[response.status] = statuses.get(response.status, 0) + 1
                except TimeoutError:
                    errors["timeout"] += 1
                except aiohttp.ClientConnectorError:
                    errors["connect"] += 1
                    await asyncio.sleep(0.01)
                except aiohttp.ClientError:
                    errors["read"] += 1

        await asyncio.gather(*(loop() for _ in range(connections)))
        elapsed = time.perf_counter() - started
    lat = percentiles(latencies)
    mean = sum(latencies) / max(1, len(latencies))
    return {
        "duration_us": int(elapsed * 1e6),
        "requests": len(latencies),
        "errors": errors,
        "latency_us": {**{k: v * 1e6 for k, v in lat.items()}, "mean": mean * 1e6},
        "statuses": {str(k): v for k, v in statuses.items()},
    }
