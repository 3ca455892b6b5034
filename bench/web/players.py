"""Players for the load: registered, logged in, and the requests each phase sends."""

from __future__ import annotations

import asyncio
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
    if phase == "full":
        return [Req("GET", "/api/snapshot", a) for a in auth]
    json_headers = {"Content-Type": "application/json"}
    mix: list[Req] = []
    for a, p in zip(auth, players, strict=True):
        build = {"village_id": p.village_id, "kind": "woodcutter"}
        train = {"village_id": p.village_id, "unit": "legionnaire", "count": 1}
        mix.append(Req("POST", "/api/build", {**a, **json_headers}, json.dumps(build)))
        mix.append(Req("POST", "/api/train", {**a, **json_headers}, json.dumps(train)))
    return mix
