"""A scripted population of players that plays through the HTTP API, and its ledger.

Each player is a coroutine with its own HTTP client bound to its own loopback
address (127.0.x.y), so per-address limits see distinct players, as they
would in production. Every command carries an ``Idempotency-Key`` and is
retried with the same key until it gets a definitive answer (2xx or a 4xx), so
a fault never leaves the ledger unsure of what happened; the ledger keeps
every command, its key and its answer for the checks.

Roles keep battle losses attributable to one home village (the battle report
lists defender losses as a total, not per home):

- *raiders* attack and raid bot villages and other raiders, reinforce
  fortresses, build, train and recall some marches;
- *fortresses* build, train, reinforce other fortresses and recall some
  marches; nobody attacks a fortress, and reinforcements go only to fortresses.

Now and then any player acts socially instead: founds an alliance, invites, accepts
(sometimes every invitation at once, so joins race) or declines, leaves, kicks or
promotes, and writes to a player or to the alliance.
Everybody sometimes sends resources with merchants to a village nearby (a few of
those ask for more than the village holds, and are refused).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from refgame.resources import RESOURCES
from refgame.trade import MERCHANT_CAPACITY, trade_duration_ms
from refgame.travel import march_duration_ms

log = logging.getLogger("chaos.players")

COMMAND_DEADLINE_S = 120.0  # a command is retried (same key) this long before it is unresolved
REQUEST_TIMEOUT_S = 45.0
BUILD_KINDS = (
    ("woodcutter", 3), ("clay_pit", 3), ("iron_mine", 3), ("cropland", 3),
    ("warehouse", 2), ("granary", 2), ("main_building", 2), ("wall", 1),
    ("barracks", 1), ("rally_point", 1),
)  # fmt: skip
TRAINABLE = ("legionnaire", "praetorian")  # barracks level 1 units
SOCIAL_SHARE = 0.15  # of a player's actions: alliances and messages
TAG_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Command:
    """One command as the client saw it: what it sent, with which key, and the final answer."""

    seq: int
    player_id: int
    village_id: int
    path: str  # build, train, march, recall, send_resources
    body: dict[str, Any]
    key: str
    sent_ms: int
    status: int | None = None
    answer: dict[str, Any] | None = None
    code: str | None = None
    attempts: int = 0
    uncertain: bool = False  # an attempt ended without an answer (timeout, 5xx, cut connection)
    replayed: bool = False
    answered_ms: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def resolved(self) -> bool:
        return self.status is not None and self.status < 500


@dataclass
class PlayerInfo:
    name: str
    password: str
    role: str  # raider or fortress
    address: str  # the loopback address this player connects from
    base_url: str
    player_id: int = 0
    village_id: int = 0
    token: str = ""
    x: int = 0
    y: int = 0


@dataclass
class Ledger:
    """Everything the population did and saw."""

    players: list[PlayerInfo] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    http: Counter[str] = field(default_factory=Counter)  # "GET /api/snapshot 304" -> n
    transport_errors: Counter[str] = field(default_factory=Counter)
    replay_checks: list[tuple[Command, str]] = field(default_factory=list)  # (cmd, problem)

    def record(self, method: str, path: str, status: int) -> None:
        self.http[f"{method} {path} {status}"] += 1

    def by_id(self) -> dict[int, PlayerInfo]:
        return {p.player_id: p for p in self.players}


class PlayerClient:
    """HTTP for one player, from one loopback address."""

    def __init__(self, info: PlayerInfo, ledger: Ledger) -> None:
        self.info = info
        self.ledger = ledger
        self._session: aiohttp.ClientSession | None = None
        self._etag: str | None = None
        self._snapshot: dict[str, Any] | None = None
        self._seq = 0

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(local_addr=(self.info.address, 0), limit=4)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None
        return self._session

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.info.token}"}

    async def register(self, deadline_s: float = 120.0) -> None:
        body = {"name": self.info.name, "password": self.info.password}
        stop = time.monotonic() + deadline_s
        while True:
            try:
                async with self.session.post(
                    f"{self.info.base_url}/api/register", json=body
                ) as resp:
                    self.ledger.record("POST", "/api/register", resp.status)
                    data = await resp.json()
                    if resp.status == 201:
                        self.info.player_id = int(data["player_id"])
                        self.info.village_id = int(data["village_id"])
                        self.info.token = str(data["token"])
                        return
                    if resp.status == 409 and data["error"]["code"] == "name_taken":
                        raise RuntimeError(f"{self.info.name}: name taken in a fresh world")
                    if resp.status < 500 and resp.status != 429:
                        raise RuntimeError(f"register {self.info.name}: {resp.status} {data}")
            except (aiohttp.ClientError, TimeoutError) as exc:
                self.ledger.transport_errors[type(exc).__name__] += 1
            if time.monotonic() > stop:
                raise RuntimeError(f"register {self.info.name}: no answer in {deadline_s} s")
            await asyncio.sleep(0.5)

    async def get_json(self, path: str, *, conditional: bool = False) -> dict[str, Any] | None:
        """GET with the session; None on any failure (the player just skips a beat)."""
        headers = self._auth()
        if conditional and self._etag:
            headers["If-None-Match"] = self._etag
        route = path.split("?")[0]
        try:
            async with self.session.get(f"{self.info.base_url}{path}", headers=headers) as resp:
                self.ledger.record("GET", route, resp.status)
                if conditional and resp.status == 304:
                    return self._snapshot
                if resp.status != 200:
                    await resp.read()
                    return None
                data: dict[str, Any] = await resp.json()
                if conditional:
                    self._etag = resp.headers.get("ETag")
                    self._snapshot = data
                return data
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            self.ledger.transport_errors[type(exc).__name__] += 1
            return None

    async def snapshot(self) -> dict[str, Any] | None:
        return await self.get_json("/api/snapshot", conditional=True)

    def new_command(self, path: str, body: dict[str, Any]) -> Command:
        self._seq += 1
        key = f"c{self.info.player_id}-{self._seq}-{secrets.token_hex(3)}"
        cmd = Command(
            len(self.ledger.commands),
            self.info.player_id,
            self.info.village_id,
            path,
            body,
            key,
            now_ms(),
        )
        self.ledger.commands.append(cmd)
        return cmd

    async def send(self, cmd: Command, deadline_s: float = COMMAND_DEADLINE_S) -> Command:
        """Send ``cmd`` until a definitive answer, always with its own Idempotency-Key."""
        headers = {**self._auth(), "Idempotency-Key": cmd.key}
        stop = time.monotonic() + deadline_s
        delay = 0.25
        while True:
            cmd.attempts += 1
            wait = delay
            try:
                async with self.session.post(
                    f"{self.info.base_url}/api/{cmd.path}", json=cmd.body, headers=headers
                ) as resp:
                    self.ledger.record("POST", f"/api/{cmd.path}", resp.status)
                    data = await resp.json(content_type=None)
                    if resp.status == 429:  # refused before anything ran: wait and send again
                        wait = float(resp.headers.get("Retry-After", "1"))
                    elif resp.status >= 500:
                        cmd.uncertain = True
                    else:
                        cmd.status = resp.status
                        cmd.answer = data
                        cmd.answered_ms = now_ms()
                        cmd.replayed = resp.headers.get("Idempotent-Replayed") == "true"
                        if not cmd.ok:
                            cmd.code = str(data.get("error", {}).get("code"))
                        return cmd
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                self.ledger.transport_errors[type(exc).__name__] += 1
                cmd.uncertain = True
            if time.monotonic() + wait > stop:
                return cmd  # unresolved: the resolution pass sends it again
            await asyncio.sleep(wait)
            delay = min(delay * 2, 4.0)


@dataclass
class Target:
    village_id: int
    x: int
    y: int
    player_id: int | None
    kind: str  # bot, raider or fortress


@dataclass
class PopulationConfig:
    raiders: int = 80
    fortresses: int = 40
    think_s: tuple[float, float] = (1.0, 4.0)  # pause between two actions of one player
    max_leg_ms: int = 50_000  # no march is sent that takes longer one way
    recall_share: float = 0.15  # marches that get a recall, half of them too late
    world_speed: float = 100.0
    seed: int = 1


class Player:
    def __init__(self, client: PlayerClient, population: Population, rng: random.Random) -> None:
        self.client = client
        self.info = client.info
        self.population = population
        self.rng = rng
        self.targets: list[Target] = []
        self.recalls: set[asyncio.Task[None]] = set()

    async def load_targets(self) -> None:
        """What the map shows around this village (up to 15 fields each way)."""
        data = None
        for _ in range(20):
            data = await self.client.get_json(f"/api/map?x={self.info.x}&y={self.info.y}&radius=15")
            if data is not None:
                break
            await asyncio.sleep(0.5)
        if data is None:
            return
        roles = self.population.roles
        for v in data["villages"]:
            if v["id"] == self.info.village_id:
                continue
            role = roles.get(v["player_id"], "bot")
            self.targets.append(Target(v["id"], v["x"], v["y"], v["player_id"], role))

    async def live(self, stop: asyncio.Event) -> None:
        lo, hi = self.population.config.think_s
        await asyncio.sleep(self.rng.uniform(0, hi))
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.rng.uniform(lo, hi)):
                    await stop.wait()
            if stop.is_set():
                break
            snap = await self.client.snapshot()
            if snap is None or not snap.get("villages"):
                continue
            try:
                if self.rng.random() < SOCIAL_SHARE:
                    await self.social(snap)
                    continue
                await self.act(snap["villages"][0])
            except Exception:  # a bug in the script must not end the run unseen
                log.exception("%s: action failed", self.info.name)
                self.population.script_errors += 1
        for task in list(self.recalls):
            task.cancel()
        await asyncio.gather(*self.recalls, return_exceptions=True)

    async def act(self, village: dict[str, Any]) -> None:
        r = self.rng.random()
        troops = {u: n for u, n in village["troops"].items() if n > 0}
        if self.info.role == "raider":
            if troops and r < 0.58:
                await self.send_march(troops)
            elif r < 0.82:
                await self.build(village)
            elif r < 0.92:
                await self.train()
            else:
                await self.send_resources(village)
        else:
            if r < 0.45:
                await self.build(village)
            elif r < 0.62:
                await self.train()
            elif r < 0.8:
                await self.send_resources(village)
            elif troops:
                await self.send_march(troops, kinds=("reinforce",))

    async def command(self, path: str, body: dict[str, Any]) -> Command:
        return await self.client.send(self.client.new_command(path, body))

    async def social(self, snap: dict[str, Any]) -> None:
        alliance = snap.get("alliance")
        r = self.rng.random()
        others = [p.info for p in self.population.players if p is not self]
        if alliance is None:
            if snap.get("alliance_invitations"):
                view = await self.client.get_json("/api/alliance")
                invitations = [i["alliance_id"] for i in (view or {}).get("invitations", [])]
                if len(invitations) > 1 and r < 0.5:  # joins race: at most one may win
                    await asyncio.gather(*(
                        self.command("alliance/accept", {"alliance_id": a}) for a in invitations
                    ))  # fmt: skip
                    return
                if invitations:
                    verb = "accept" if r < 0.85 else "decline"
                    alliance_id = self.rng.choice(invitations)
                    await self.command(f"alliance/{verb}", {"alliance_id": alliance_id})
                    return
            if r < 0.6:
                tag = "".join(self.rng.choices(TAG_LETTERS, k=self.rng.randint(2, 3)))
                await self.command("alliance/create", {"name": f"Clan {tag}", "tag": tag})
            elif others:
                await self.write(to=self.rng.choice(others).name)
            return
        members = [m for m in alliance["members"] if m != self.info.player_id]
        if r < 0.35 and alliance["role"] in ("founder", "leader"):
            outside = [o for o in others if o.player_id not in alliance["members"]]
            if outside:
                await self.command("alliance/invite", {"name": self.rng.choice(outside).name})
        elif r < 0.6:
            await self.write(to_alliance=True)
        elif r < 0.72 and others:
            await self.write(to=self.rng.choice(others).name)
        elif r < 0.82 and alliance["role"] == "founder" and members:
            role = self.rng.choice(("leader", "member"))
            body = {"player_id": self.rng.choice(members), "role": role}
            await self.command("alliance/promote", body)
        elif r < 0.88 and alliance["role"] == "founder" and members:
            await self.command("alliance/kick", {"player_id": self.rng.choice(members)})
        else:
            await self.command("alliance/leave", {})

    async def write(self, *, to: str | None = None, to_alliance: bool = False) -> None:
        body: dict[str, Any] = {"subject": f"news {self.rng.randint(1, 999)}",
                                "body": "hold the line\n" * self.rng.randint(1, 20)}  # fmt: skip
        if to_alliance:
            body["to_alliance"] = True
        else:
            body["to"] = to
        await self.command("messages/send", body)

    async def build(self, village: dict[str, Any]) -> None:
        if len(village["build_queue"]) >= 2 and self.rng.random() < 0.8:
            return  # mostly avoid knocking on a full queue
        kinds, weights = zip(*BUILD_KINDS, strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        cmd = self.client.new_command("build", {"village_id": self.info.village_id, "kind": kind})
        await self.client.send(cmd)

    async def train(self) -> None:
        body = {
            "village_id": self.info.village_id,
            "unit": self.rng.choice(TRAINABLE),
            "count": self.rng.randint(1, 3),
        }
        await self.client.send(self.client.new_command("train", body))

    def _pick_troops(self, troops: dict[str, int]) -> dict[str, int]:
        kinds = self.rng.sample(sorted(troops), k=self.rng.randint(1, len(troops)))
        share = self.rng.uniform(0.1, 0.45)
        picked = {u: max(1, int(troops[u] * share)) for u in kinds}
        return {u: min(n, troops[u]) for u, n in picked.items()}

    def _choose(self, kinds: tuple[str, ...], party: dict[str, int]) -> tuple[str, Target | None]:
        """A kind and a target that ``party`` reaches within the longest allowed leg."""
        config = self.population.config
        here = (self.info.x, self.info.y)

        def near(t: Target) -> bool:
            leg = march_duration_ms(here, (t.x, t.y), party, config.world_speed)
            return leg <= config.max_leg_ms

        r = self.rng.random()
        if "reinforce" in kinds and (len(kinds) == 1 or r < 0.15):
            kind, wanted = "reinforce", "fortress"
        else:
            kind, wanted = (
                ("raid" if self.rng.random() < 0.5 else "attack"),
                ("raider" if r < 0.3 else "bot"),
            )
        pool = [t for t in self.targets if t.kind == wanted and near(t)]
        return kind, self.rng.choice(pool) if pool else None

    async def send_march(
        self, troops: dict[str, int], kinds: tuple[str, ...] = ("attack", "raid", "reinforce")
    ) -> None:
        party = self._pick_troops(troops)
        kind, target = self._choose(kinds, party)
        if target is None:
            return
        body = {
            "village_id": self.info.village_id,
            "kind": kind,
            "x": target.x,
            "y": target.y,
            "troops": party,
        }
        cmd = await self.client.send(self.client.new_command("march", body))
        if cmd.ok and cmd.answer and self.rng.random() < self.population.config.recall_share:
            depart, arrive = int(cmd.answer["depart_ms"]), int(cmd.answer["arrive_ms"])
            # a recall somewhere in the first 70 % of the way: past half it is refused
            at = depart + int(self.rng.uniform(0.05, 0.7) * (arrive - depart))
            task = asyncio.create_task(self.recall_at(int(cmd.answer["march_id"]), at))
            self.recalls.add(task)
            task.add_done_callback(self.recalls.discard)

    async def send_resources(self, village: dict[str, Any]) -> None:
        """Some of the stock to a village the merchants reach within the longest leg."""
        free = int(village.get("merchants_free") or 0)
        if free < 1:
            return
        config = self.population.config
        here = (self.info.x, self.info.y)
        pool = [
            t for t in self.targets
            if trade_duration_ms(here, (t.x, t.y), config.world_speed) <= config.max_leg_ms
        ]  # fmt: skip
        if not pool:
            return
        target = self.rng.choice(pool)
        room = free * MERCHANT_CAPACITY
        greedy = self.rng.random() < 0.1  # more than the village holds: refused
        amounts = dict.fromkeys(RESOURCES, 0)
        for res in self.rng.sample(RESOURCES, k=self.rng.randint(1, 2)):
            have = int(village["stocks"][res]["units"])
            n = have + 1 if greedy else self.rng.randint(0, max(0, have // 3))
            amounts[res] = max(0, min(n, room - sum(amounts.values())))
        if not any(amounts.values()):
            return
        body = {"village_id": self.info.village_id, "x": target.x, "y": target.y,
                "resources": amounts}  # fmt: skip
        await self.client.send(self.client.new_command("send_resources", body))

    async def recall_at(self, march_id: int, at_ms: int) -> None:
        await asyncio.sleep(max(0.0, (at_ms - now_ms()) / 1000))
        await self.client.send(self.client.new_command("recall", {"march_id": march_id}))


class Population:
    """Registers the players, then runs them until ``stop``."""

    def __init__(self, config: PopulationConfig, base_urls: list[str]) -> None:
        self.config = config
        self.base_urls = base_urls
        self.ledger = Ledger()
        self.players: list[Player] = []
        self.roles: dict[int, str] = {}
        self.script_errors = 0
        self.rng = random.Random(config.seed)

    def _infos(self) -> list[PlayerInfo]:
        infos = []
        total = self.config.raiders + self.config.fortresses
        tag = secrets.token_hex(2)
        for i in range(total):
            role = "raider" if i < self.config.raiders else "fortress"
            infos.append(
                PlayerInfo(
                    name=f"{role[0]}{i:03d}-{tag}",
                    password=secrets.token_urlsafe(18),
                    role=role,
                    address=f"127.0.{1 + i // 250}.{1 + i % 250}",
                    base_url=self.base_urls[i % len(self.base_urls)],
                )
            )
        return infos

    async def register_all(self, concurrency: int = 8) -> None:
        infos = self._infos()
        gate = asyncio.Semaphore(concurrency)

        async def one(info: PlayerInfo) -> Player:
            client = PlayerClient(info, self.ledger)
            await client.open()
            async with gate:
                await client.register()
            return Player(client, self, random.Random(self.rng.getrandbits(64)))

        self.players = list(await asyncio.gather(*(one(i) for i in infos)))
        self.ledger.players = [p.info for p in self.players]
        self.roles = {p.info.player_id: p.info.role for p in self.players}

    async def locate(self) -> None:
        """Each player's village coordinates (snapshot), then what the map shows around it."""

        async def where(player: Player) -> None:
            for _ in range(40):
                snap = await player.client.snapshot()
                if snap and snap.get("villages"):
                    v = snap["villages"][0]
                    player.info.x, player.info.y = int(v["x"]), int(v["y"])
                    return
                await asyncio.sleep(0.5)
            raise RuntimeError(f"{player.info.name}: no snapshot")

        await asyncio.gather(*(where(p) for p in self.players))
        await asyncio.gather(*(p.load_targets() for p in self.players))

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(p.live(stop) for p in self.players))

    async def resolve(self) -> int:
        """Send every unresolved command again with its key; return how many stay unresolved."""
        by_player = {p.info.player_id: p for p in self.players}
        todo = [c for c in self.ledger.commands if not c.resolved]
        await asyncio.gather(*(by_player[c.player_id].client.send(c, deadline_s=60) for c in todo))
        return sum(1 for c in self.ledger.commands if not c.resolved)

    async def replay_sample(self, n: int) -> int:
        """Send ``n`` answered commands again with their keys: each must be a replay that
        returns the first answer (and changes nothing: the checks run afterwards)."""
        by_player = {p.info.player_id: p for p in self.players}
        done = [c for c in self.ledger.commands if c.ok]
        sample = self.rng.sample(done, k=min(n, len(done)))
        for original in sample:
            client = by_player[original.player_id].client
            again = Command(-1, original.player_id, original.village_id, original.path,
                            original.body, original.key, now_ms())  # fmt: skip
            await client.send(again, deadline_s=30)
            if not again.replayed or again.status != original.status:
                self.ledger.replay_checks.append((original, f"answered {again.status} again"))
            elif again.answer != original.answer:
                self.ledger.replay_checks.append((original, "a different answer on replay"))
            else:
                self.ledger.replay_checks.append((original, ""))
        return len(sample)

    async def close(self) -> None:
        await asyncio.gather(*(p.client.close() for p in self.players))
