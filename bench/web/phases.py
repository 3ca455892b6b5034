"""The phases of a run, a load run each; during the full phase every snapshot changes once,
and before each build phase every one (so no cached body is of the current version)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.web.cpu import CpuWatch
from bench.web.load import LoadGenerator
from bench.web.model import CEILING, PHASES, TARGETS, LoadResult, Player
from bench.web.players import phase_requests, refresh_players

# a build phase meets a full build queue now and then (more often with fewer players)
STRAY_ANSWERS = 0.01


@dataclass
class Changes:
    """Snapshot changes: each player's version bumped once during a full-snapshot run (when
    ``during_full``), and all at once before a build phase."""

    redis: Any  # redis.asyncio.Redis of the bench server
    prefix: str
    during_full: bool = True

    async def all_now(self, player_ids: Sequence[int]) -> None:
        from common.snapshot_versions import bump_versions

        await bump_versions(self.redis, self.prefix, list(player_ids), int(time.time() * 1000))

    async def spread(self, player_ids: Sequence[int], seconds: float) -> None:
        """Bump each player's version once, at uniformly random moments over ``seconds``."""
        from common.snapshot_versions import bump_versions

        started = time.monotonic()
        for at, player_id in sorted((random.uniform(0, seconds), p) for p in player_ids):
            await asyncio.sleep(max(0.0, started + at - time.monotonic()))
            now_ms = int(time.time() * 1000)
            await bump_versions(self.redis, self.prefix, [player_id], now_ms)


@dataclass
class WebFigures:
    results: list[LoadResult]
    connections: int
    players: int
    workers: int
    client: str
    target: str

    def at(self, phase: str, connections: int | None = None) -> LoadResult | None:
        want = connections or self.connections
        for r in self.results:
            if r.phase == phase and r.connections == want:
                return r
        return None

    def answered_as_meant(self, phase: str) -> bool:
        """Did the command phase measure what it names: builds accepted, refusals refused
        (all but ``STRAY_ANSWERS``)? A build phase answered 409 measures refusals, which
        read faster."""
        r = self.at(phase)
        if r is None:
            return False
        meant = r.ok_share if phase == "commands" else r.statuses.get("409", 0) / r.requests
        return meant >= 1 - STRAY_ANSWERS

    def summary(self) -> dict[str, Any]:
        ratios: dict[str, float | None] = {}
        for phase, ceiling in CEILING.items():
            ours, bare = self.at(phase), self.at(ceiling)
            ratios[f"{phase}_ratio"] = (
                ours.rps / bare.rps if ours and bare and bare.rps > 0 else None
            )
        p99 = {p: r.latency_ms["p99"] for p in PHASES if (r := self.at(p))}
        met = {
            "poll_304_ratio": (ratios["poll_304_ratio"] or 0) >= TARGETS["poll_304_ratio"],
            "full_ratio": (ratios["full_ratio"] or 0) >= TARGETS["full_ratio"],
            "poll_304_p99": p99.get("poll_304", 1e9) < TARGETS["p99_ms"],
            "full_p99": p99.get("full", 1e9) < TARGETS["p99_ms"],
        }
        if self.at("bare_commands") is not None:  # the command ceiling ran (PostgreSQL)
            for phase in ("commands", "refused"):
                met[f"{phase}_ratio"] = (ratios[f"{phase}_ratio"] or 0) >= TARGETS[
                    "commands_ratio"
                ] and self.answered_as_meant(phase)
                met[f"{phase}_p99"] = p99.get(phase, 1e9) < TARGETS["commands_p99_ms"]
            refused, build = self.at("refused"), self.at("build")
            if refused is not None and build is not None:
                # a refusal costs the web tier no more than a snapshot build
                met["refused_cpu"] = refused.cpu_us_per_request(
                    "server"
                ) <= build.cpu_us_per_request("server")
        return {
            "connections": self.connections,
            "players": self.players,
            "workers": self.workers,
            "client": self.client,
            "target": self.target,
            "ratios": ratios,
            "targets": TARGETS,
            "targets_met": met,
            "results": [
                {
                    **asdict(r),
                    "ok_share": r.ok_share,
                    "server_cpu_us_per_request": r.cpu_us_per_request("server"),
                }
                for r in self.results
            ],
        }


async def run_phases(
    load: LoadGenerator,
    bare_url: str,
    game_url: str,
    players: list[Player],
    levels: Sequence[int],
    main_connections: int,
    duration_s: float,
    sweep_duration_s: float,
    watches: dict[str, CpuWatch],
    changes: Changes | None = None,
    commands_url: str | None = None,
    sweeper: Callable[[asyncio.Event], Coroutine[Any, Any, None]] | None = None,
    build_url: str | None = None,
    count_builds: Callable[[], Coroutine[Any, Any, int]] | None = None,
) -> list[LoadResult]:
    """Every phase at every level; the read phases of one level run back to back.

    The bare ceiling and the two snapshot phases of a level follow each other
    within seconds, so a neighbour's load on a shared machine hits them alike.
    Commands come last: they change snapshot versions (and so the ETags).
    During each measured full-snapshot run, ``changes`` (if given, ``during_full``) bumps
    every player's snapshot version once at a random moment, as the events of a live
    game do: the run serves cached bodies and also rebuilds every body once.
    The build phases (with ``build_url``: a server with its body caches off, and
    ``changes``) follow the read phases: every version is bumped before each, so no
    cached body is current and each answer is built; ``count_builds`` (if given) reads
    the server's count of builds.
    """

    def seconds_of(connections: int, phase: str) -> float:
        return duration_s if connections == main_connections else sweep_duration_s

    from tqdm import tqdm

    order = [(c, p) for c in levels for p in ("bare", "poll_304", "full")]
    if build_url is not None and changes is not None:
        order += [(c, "build") for c in levels]
    # each command phase right after its ceiling, so a neighbour's load hits both alike
    writes = ("bare_commands", "commands", "bare_refused", "refused")
    order += [(c, p) for c in levels for p in writes if commands_url or not p.startswith("bare")]
    total_s = sum(seconds_of(c, p) + 1 for c, p in order)
    urls = {
        "bare": bare_url,
        "build": build_url,
        "bare_commands": commands_url,
        "bare_refused": commands_url,
    }
    results: list[LoadResult] = []
    warmed: set[str] = set()
    with tqdm(total=len(order), desc=f"web load (~{total_s:.0f} s)", unit="run") as progress:
        for connections, phase in order:
            if phase == "poll_304":
                players[:] = await refresh_players(game_url, players)
            requests = phase_requests(phase, players)
            url = urls.get(phase) or game_url
            if phase == "build":
                assert changes is not None
                await changes.all_now([p.player_id for p in players])
            if phase not in warmed:  # a short unmeasured run: caches and connections
                warm_stop = asyncio.Event()
                sweeping: asyncio.Task[None] | None = None
                if phase in ("commands", "bare_commands") and sweeper is not None:
                    sweeping = asyncio.create_task(sweeper(warm_stop))
                try:
                    await load.run(phase, url, requests, connections, 1.0)
                finally:
                    warm_stop.set()
                    if sweeping is not None:
                        await sweeping
                warmed.add(phase)
                if phase == "build":  # its bodies were built: none may be current now
                    assert changes is not None
                    await changes.all_now([p.player_id for p in players])
            seconds = seconds_of(connections, phase)
            progress.set_postfix_str(f"{phase} c={connections}")
            watch = watches.get(phase, watches["game"])
            changing = None
            if phase == "full" and changes is not None and changes.during_full:
                changing = asyncio.create_task(
                    changes.spread([p.player_id for p in players], seconds)
                )
            stop_sweep = asyncio.Event()
            if phase in ("commands", "bare_commands") and sweeper is not None:
                changing = asyncio.create_task(sweeper(stop_sweep))
            built = await count_builds() if phase == "build" and count_builds else None
            try:
                result = await load.run(phase, url, requests, connections, seconds, watch)
                if built is not None and count_builds is not None:
                    result.builds = await count_builds() - built
                results.append(result)
            finally:
                stop_sweep.set()
                if changing is not None:
                    changing.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await changing
            progress.update()
    return results
