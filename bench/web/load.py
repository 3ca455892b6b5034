"""Load generators: ``wrk`` with a generated Lua script, or the Python one in a process."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import aiohttp

from bench.web.cpu import CpuWatch
from bench.web.model import RESULT_MARK, LoadResult, Req
from common.errors import FatalError


def _lua_str(text: str) -> str:
    level = 1
    while f"]{'=' * level}]" in text:
        level += 1
    eq = "=" * level
    return f"[{eq}[{text}]{eq}]"


_LUA_BODY = """
local threads = {}
function setup(thread)
  thread:set("offset", #threads * 7919)
  table.insert(threads, thread)
end
local formatted = {}
local counter = 0
function init(args)
  statuses = {}
  for i, r in ipairs(reqs) do
    if not r[5] then formatted[i] = wrk.format(r[1], r[2], r[3], r[4]) end
  end
  counter = offset or 0
end
function request()
  counter = counter + 1
  local i = (counter % #reqs) + 1
  if formatted[i] then return formatted[i] end
  local r, headers = reqs[i], {}
  for k, v in pairs(r[3]) do headers[k] = v end
  headers["Idempotency-Key"] = "b" .. run .. "-" .. (offset or 0) .. "-" .. counter
  return wrk.format(r[1], r[2], headers, r[4])
end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
function done(summary, latency, requests)
  local total = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("statuses")) do total[k] = (total[k] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(total) do parts[#parts + 1] = string.format('"%d": %d', k, v) end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"duration_us": %d, "requests": %d, "errors": {"connect": %d, "read": %d, ' ..
    '"write": %d, "timeout": %d}, "latency_us": {"p50": %d, "p90": %d, "p99": %d, ' ..
    '"max": %d, "mean": %f}, "statuses": {%s}}\\n',
    summary.duration, summary.requests, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, table.concat(parts, ", ")))
end
"""


def wrk_script(requests: Sequence[Req], run: str | None = None) -> str:
    """The Lua script for ``requests``; fresh idempotency keys carry ``run`` (random by
    default: wrk's own ``math.random`` is unseeded, so every run would repeat the keys of
    the one before and be answered as a replay)."""
    lines = [f"run = {_lua_str(run or secrets.token_hex(8))}", "reqs = {"]
    for r in requests:
        headers = ", ".join(f"[ {_lua_str(k)} ] = {_lua_str(v)}" for k, v in r.headers.items())
        body = _lua_str(r.body) if r.body is not None else "nil"
        fresh = "true" if r.fresh_key else "false"
        lines.append(
            f"  {{{_lua_str(r.method)}, {_lua_str(r.path)}, {{{headers}}}, {body}, {fresh}}},"
        )
    lines.append("}")
    return "\n".join(lines) + _LUA_BODY


def _parse_result(phase: str, connections: int, stdout: str, stderr: str) -> LoadResult:
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARK):
            raw = json.loads(line[len(RESULT_MARK) :])
            break
    else:
        raise FatalError(f"the load generator printed no result: {(stderr or stdout).strip()}")
    duration = raw["duration_us"] / 1e6
    lat = raw["latency_us"]
    return LoadResult(
        phase=phase,
        connections=connections,
        duration_s=duration,
        requests=int(raw["requests"]),
        rps=raw["requests"] / max(duration, 1e-9),
        latency_ms={k: float(lat[k]) / 1000 for k in ("p50", "p90", "p99", "max", "mean")},
        statuses={str(k): int(v) for k, v in raw["statuses"].items()},
        errors={k: int(v) for k, v in raw["errors"].items()},
    )


@dataclass
class LoadGenerator:
    client: str  # "wrk" or "python"
    threads: int = 1

    @staticmethod
    def pick(client: str, threads: int) -> LoadGenerator:
        if client == "auto":
            client = "wrk" if shutil.which("wrk") else "python"
        if client == "wrk" and not shutil.which("wrk"):
            raise FatalError("--client wrk: wrk is not installed (apt-get install wrk)")
        return LoadGenerator(client, threads)

    def version(self) -> str:
        if self.client == "python":
            return f"aiohttp {aiohttp.__version__} client"
        out = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
        found = re.search(r"(\d+\.\d+[.\d]*)", out)
        return f"wrk {found.group(1)}" if found else "wrk"

    async def run(
        self,
        phase: str,
        base_url: str,
        requests: Sequence[Req],
        connections: int,
        duration_s: float,
        watch: CpuWatch | None = None,
    ) -> LoadResult:
        with tempfile.TemporaryDirectory(prefix="wgbench-load-") as tmp:
            if self.client == "wrk":
                script = Path(tmp) / "load.lua"
                script.write_text(wrk_script(requests))
                threads = max(1, min(self.threads, connections))
                args = [
                    "wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(duration_s))}s",
                    "--timeout", "10s", "-s", str(script), base_url,
                ]  # fmt: skip
            else:
                spec = Path(tmp) / "load.json"
                spec.write_text(
                    json.dumps(
                        {
                            "url": base_url,
                            "requests": [asdict(r) for r in requests],
                            "connections": connections,
                            "duration_s": duration_s,
                        }
                    )
                )
                args = [sys.executable, "-m", "bench.web", "load", str(spec)]
            before = watch.sample() if watch else None
            proc = await asyncio.create_subprocess_exec(
                *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            out, err = await proc.communicate()
            result = _parse_result(phase, connections, out.decode(), err.decode())
            if watch and before is not None:
                result.cpu_s = watch.since(before)
            return result
