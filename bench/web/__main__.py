"""``python -m bench.web hello|serve|serve-uncached|commands|load``: the processes the bench
starts."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from bench.web.model import RESULT_MARK
from bench.web.pyload import python_load
from bench.web.servers import serve_game, serve_hello
from common.entrypoint import run_async, serve_on
from common.settings import load_settings


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.web")
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("hello", "serve", "serve-uncached", "commands"):
        p = sub.add_parser(name)
        p.add_argument("--port", type=int, required=True)
    p = sub.add_parser("load")
    p.add_argument("spec", type=Path)
    args = parser.parse_args(argv)
    # the ceilings run on the event loop ours runs on (``EVENT_LOOP``): like against like
    if args.what == "hello":
        serve_on(load_settings().event_loop, serve_hello(args.port))
    elif args.what == "commands":
        from bench.web.bare_commands import serve_bare_commands

        serve_on(load_settings().event_loop, serve_bare_commands(args.port))
    elif args.what in ("serve", "serve-uncached"):
        cached = args.what == "serve"
        sys.exit(run_async(lambda: serve_game(args.port, cached), server=True))
    else:
        figures = asyncio.run(python_load(json.loads(args.spec.read_text())))
        print(RESULT_MARK + json.dumps(figures), flush=True)


if __name__ == "__main__":
    _main()
