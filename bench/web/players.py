"""Players for the load: registered, logged in, and the requests each phase sends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from bench.web.model import PASSWORD, Player, Req
from common.errors import FatalError, UnreachableError


async def check_reachable(url: str) -> None:
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
            http.get(url.rstrip("/") + "/api/time") as response,
        ):
            if response.status != 200:
                raise UnreachableError(
                    f"--url: {url}/api/time answered {response.status}; is it a game web server?"
                )
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        reason = str(exc) or type(exc).__name__
        raise UnreachableError(f"--url: cannot reach {url}: {reason}") from None


async def register_players(url: str, count: int, progress: Any = None) -> list[Player]:
    """Register ``count`` players (8 at a time); stop early, with a warning, on 429."""
    tag = secrets.token_hex(3)
    players: list[Player] = []
    limited: list[str] = []
    sem = asyncio.Semaphore(8)

    async def one(http: aiohttp.ClientSession, i: int) -> None:
        if limited:
            return
        async with sem:
            body = {"name": f"bench{tag}{i}", "password": PASSWORD}
            async with http.post("/api/register", json=body) as response:
                data = await response.json(content_type=None)
                if response.status == 429:
                    limited.append(str(data.get("error", {}).get("message", "rate limited")))
                    return
                if response.status != 201:
                    raise FatalError(f"POST /api/register answered {response.status}: {data}")
                players.append(Player(data["token"], int(data["village_id"])))
                if progress is not None:
                    progress.update()

    async with aiohttp.ClientSession(url) as http:
        await asyncio.gather(*(one(http, i) for i in range(count)))
    if limited and not players:
        raise FatalError(
            f"the server refused registrations ({limited[0]}); pass --token-file with tokens "
            "of existing players"
        )
    if limited:
        from bench.report import console

        console.print(
            f"[yellow]registration was rate limited after {len(players)} players; "
            f"using those ({limited[0]})[/yellow]"
        )
    return players


async def refresh_players(url: str, players: list[Player]) -> list[Player]:
    """Each player's current ETag and first village id, from GET /api/snapshot."""
    sem = asyncio.Semaphore(16)

    async def one(http: aiohttp.ClientSession, player: Player) -> Player:
        async with (
            sem,
            http.get(
                "/api/snapshot", headers={"Authorization": f"Bearer {player.token}"}
            ) as response,
        ):
            if response.status == 401:
                raise FatalError("a token of --token-file is unknown or expired on that server")
            if response.status != 200:
                raise FatalError(f"GET /api/snapshot answered {response.status}")
            data = await response.json(content_type=None)
            villages = data.get("villages") or []
            village_id = int(villages[0]["id"]) if villages else player.village_id
            etag = response.headers.get("ETag")
            return Player(player.token, village_id, etag, int(data["player_id"]))

    async with aiohttp.ClientSession(url) as http:
        return list(await asyncio.gather(*(one(http, p) for p in players)))


def read_tokens(path: Path) -> list[Player]:
    tokens = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    if not tokens:
        raise FatalError(f"--token-file {path}: no tokens in it (one per line)")
    bad = [t for t in tokens if not re.fullmatch(r"[A-Za-z0-9_-]{20,200}", t)]
    if bad:
        raise FatalError(f"--token-file {path}: {len(bad)} lines are not session tokens")
    return [Player(token, 0) for token in tokens]


def phase_requests(phase: str, players: Sequence[Player]) -> list[Req]:
    if phase == "bare":
        return [Req("GET", "/hello", {})]
    auth = [{"Authorization": f"Bearer {p.token}"} for p in players]
    if phase == "poll_304":
        return [
            Req("GET", "/api/snapshot", {**a, "If-None-Match": p.etag or '"0"'})
            for a, p in zip(auth, players, strict=True)
        ]
    if phase in ("full", "build"):
        return [Req("GET", "/api/snapshot", a) for a in auth]
    # commands: even players can pay for anything, odd ones for nothing (``stock_players``)
    group = players[0::2] if phase in ("commands", "bare_commands") else players[1::2]
    json_headers = {"Content-Type": "application/json"}
    return [
        Req(
            "POST",
            "/api/build",
            {"Authorization": f"Bearer {p.token}", **json_headers},
            json.dumps({"village_id": p.village_id, "kind": "woodcutter"}),
            fresh_key=True,
        )
        for p in group
    ]


async def stock_players(settings: Any, players: Sequence[Player]) -> None:
    """Even players get plenty of every resource, odd ones nothing and no production."""
    from sqlalchemy import text

    from db.engine import create_engine
    from refgame.resources import RESOURCE_TYPES

    plenty = 10**15
    rich = [p.village_id for p in players[0::2]]
    poor = [p.village_id for p in players[1::2]]
    caps = {r.cap or r.name for r in RESOURCE_TYPES}
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            for ids, amount in ((rich, plenty), (poor, 0)):
                sets = [f"{r.name} = {amount}, {r.name}_rate = 0" for r in RESOURCE_TYPES]
                sets += [f"{cap}_cap = {plenty}" for cap in caps]
                for village_id in ids:
                    await conn.execute(
                        text(f"UPDATE village_stock SET {', '.join(sets)} WHERE village_id = :v"),
                        {"v": village_id},
                    )
    finally:
        await engine.dispose()


async def sweep_orders(settings: Any, stop: asyncio.Event) -> None:
    """Every 100 ms until ``stop`` (at least once), end the queued builds as finished ones
    leave the queue: their orders and their events go. The players who can pay then
    never meet the queue limit, nor, with no task server to run the events, a village
    with an overdue event (refused as ``events_pending``)."""
    from sqlalchemy import delete

    from db.engine import create_engine
    from db.models import ScheduledEvent
    from refgame.handlers import BUILD_DONE
    from refgame.models import BuildOrder

    engine = create_engine(settings)
    try:
        while True:
            async with engine.begin() as conn:
                await conn.execute(delete(BuildOrder))
                await conn.execute(delete(ScheduledEvent).where(ScheduledEvent.kind == BUILD_DONE))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)
            if stop.is_set():
                return
    finally:
        await engine.dispose()
