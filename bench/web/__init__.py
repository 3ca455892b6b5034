"""Snapshot polling and commands over HTTP, beside a bare aiohttp endpoint (the ceiling).

Everything runs in separate processes so the load generator does not share an
event loop with a server: the web server (``python -m bench.web serve``, the
real ``webfront.app.create_app`` with bench limits; ``serve-uncached``: the same with
its snapshot body caches off, which the build phase measures a snapshot build on), the
ceiling (``python -m bench.web hello``, a bare aiohttp handler) and the load
generator (``wrk`` with a generated Lua script, or ``python -m bench.web
load``, an aiohttp client, when wrk is not installed).

``--workers N`` starts N processes of each server sharing the port with
``SO_REUSEPORT``, as ``webfront --workers N`` does.
"""

from bench.web.load import LoadGenerator, wrk_script
from bench.web.model import PHASES, TARGETS, LoadResult, Player, Req
from bench.web.pyload import python_load
from bench.web.run import web_bench

__all__ = [
    "PHASES",
    "TARGETS",
    "LoadGenerator",
    "LoadResult",
    "Player",
    "Req",
    "python_load",
    "web_bench",
    "wrk_script",
]
