"""``python -m chaos``: a chaos run (default) or a long fuzzing run.

    python -m chaos --minutes 10              # the full run: 120 players, 3000 bots
    python -m chaos --bounded                 # the CI-sized run (under 3 minutes)
    python -m chaos fuzz --examples 300       # schemathesis, authenticated and not

Exit code 0 only when the run found no violation.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from chaos.runner import RunConfig, format_summary, run


def _run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="the chaos run (default)")
    _run_options(p)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--minutes", type=float, default=10.0, help="whole run, setup to summary")
    p.add_argument("--load-seconds", type=float, default=None, help="load phase (overrides)")
    p.add_argument("--bounded", action="store_true", help="the small CI-sized run")
    p.add_argument("--raiders", type=int, default=None)
    p.add_argument("--fortresses", type=int, default=None)
    p.add_argument("--bots", type=int, default=None)
    p.add_argument("--world-speed", type=float, default=None)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--workdir", type=Path, default=None, help="default: a new /tmp/chaos-*")
    p.add_argument("--keep", action="store_true", help="keep the database files afterwards")
    p.add_argument(
        "--known-bug-garbage",
        action="store_true",
        help="also inject the queue entries that used to break the queue (SECURITY.md)",
    )


def _config(args: argparse.Namespace) -> RunConfig:
    config = RunConfig.bounded() if args.bounded else RunConfig(minutes=args.minutes)
    if args.load_seconds is not None:
        config.load_s = args.load_seconds
    for name in ("raiders", "fortresses", "bots", "world_speed"):
        value = getattr(args, name)
        if value is not None:
            setattr(config, name, value)
    config.seed = args.seed
    config.workdir = args.workdir
    config.keep = args.keep
    config.known_bug_garbage = args.known_bug_garbage
    return config


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    _run_parser(sub)
    fuzz = sub.add_parser("fuzz", help="schemathesis against a private web server")
    fuzz.add_argument("--examples", type=int, default=300, help="cases per operation and client")
    fuzz.add_argument("--seed", type=int, default=None)
    fuzz.add_argument("--workdir", type=Path, default=None)
    if not argv or argv[0] not in ("run", "fuzz", "-h", "--help"):
        argv.insert(0, "run")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command == "fuzz":
        from chaos.fuzz import FuzzConfig, format_fuzz, fuzz_run

        result = asyncio.run(
            fuzz_run(FuzzConfig(examples=args.examples, seed=args.seed, workdir=args.workdir))
        )
        print(format_fuzz(result))
        return 0 if result.ok else 1
    summary = asyncio.run(run(_config(args)))
    print(format_summary(summary))
    return 0 if summary.violations == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
