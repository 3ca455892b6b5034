"""``python -m chaos fuzz``: a long schemathesis run against a private web server.

The server is the real web app (``webfront.app.create_app``) on a real TCP port,
on a private PostgreSQL and Redis, with login/registration/command limits raised
so the fuzzer reaches the handlers instead of 429s (the limits have their own
tests). Three clients fuzz every operation of ``/api/openapi.json``, positive
and negative cases each:

- *anonymous*: no credentials;
- *bearer*: player A's ``Authorization: Bearer`` token;
- *cookie*: player A's session cookie (the browser's way).

Every answer must pass schemathesis' checks (no 5xx; status, content type,
headers and body as documented; invalid input refused) and every 4xx must
carry the one error shape. Then the database must show that the anonymous
phase changed no existing village and that A's phases never changed player
B's village (isolation), and that nothing went negative.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import requests
from aiohttp import web
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from chaos.cluster import PrivatePostgres, PrivateRedis, free_port, service_env, venv_script
from common.settings import load_settings
from refgame.models import Building, BuildOrder, Troop
from refgame.resources import STOCKS
from webfront.app import create_app
from webfront.config import Limit, WebConfig
from webfront.passwords import HashParams

PASSWORD = "fuzzing password 1"
_SKIP_AUTHED = {"/api/logout"}  # it would end the session the fuzzer uses
_SKIP = {"/static/{filename}", "/sdk/{filename}", "/"}
RELAXED = WebConfig(
    password_hash=HashParams(memory_kib=256, time_cost=1),
    login_per_account=Limit(10**6, 60_000),
    login_per_address=Limit(10**6, 60_000),
    register_per_address=Limit(10**6, 60_000),
    commands_per_player=Limit(10**6, 60_000),
)


@dataclass
class FuzzConfig:
    examples: int = 300  # per operation, client and generation mode
    seed: int | None = None
    workdir: Path | None = None
    bots: int = 50


@dataclass
class FuzzResult:
    cases: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    isolation: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # (client, mode, operation) with no case
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and not self.isolation


class _ServerThread:
    """The web app served from a thread of its own (schemathesis' client is blocking)."""

    def __init__(self, app: web.Application, port: int) -> None:
        self.app = app
        self.port = port
        self.loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> _ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(60)
        return self

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


def _error_shape(response: requests.Response) -> str | None:
    if response.status_code < 400:
        return None
    try:
        error = response.json().get("error", {})
    except ValueError:
        return "not JSON"
    if isinstance(error.get("code"), str) and isinstance(error.get("message"), str):
        return None
    return "not the error shape"


def _checks() -> list[Any]:
    from schemathesis.checks import (
        content_type_conformance,
        negative_data_rejection,
        not_a_server_error,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    return [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
        negative_data_rejection,
    ]


def _run_case(
    case: Any,
    label: str,
    base_url: str,
    session: requests.Session,
    headers: dict[str, str],
    checks: list[Any],
    result: FuzzResult,
) -> None:
    response = case.call(base_url=base_url, session=session, headers=headers, timeout=30)
    session.cookies.clear()  # a fuzzed register or login must not log the next case in
    result.cases += 1
    result.statuses[f"{label.split()[0]} {response.status_code}"] += 1
    problems: list[str] = []
    try:
        case.validate_response(response, checks=checks, headers=headers)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # schemathesis' FailureGroup (a BaseExceptionGroup)
        found = getattr(exc, "exceptions", None) or [exc]
        problems.extend(" ".join(str(e).split())[:240] for e in found)
    shape = _error_shape(response)
    if shape:
        problems.append(shape)
    for problem in problems:
        result.failures.append(
            f"{label}: {case.method} {case.formatted_path} -> {response.status_code}: {problem}"
        )


def fuzz_operations(
    document: dict[str, Any],
    base_url: str,
    clients: dict[str, tuple[dict[str, str], set[str]]],
    examples: int,
    result: FuzzResult,
    run_seed: int | None = None,
) -> None:
    """Fuzz every operation with each client: (headers, paths to skip)."""
    import schemathesis
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_dict(document)
    checks = _checks()
    for client, (headers, skip) in clients.items():
        session = requests.Session()
        for op_result in schema.get_all_operations():
            operation = op_result.ok()  # type: ignore[union-attr]  # an Err raises here
            if operation.path in skip or operation.path in _SKIP:
                continue
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                label = f"{client} {mode.value} {operation.method.upper()} {operation.path}"
                test = _hypothesis_test(operation.as_strategy(generation_mode=mode), examples,
                                        run_seed, label, base_url, session, headers, checks,
                                        result)  # fmt: skip
                try:
                    test()
                except Unsatisfiable:  # nothing to make invalid (e.g. no parameters at all)
                    result.skipped.append(label)
        session.close()


def _hypothesis_test(
    strategy: Any,
    examples: int,
    run_seed: int | None,
    *args: Any,
) -> Any:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def one(case: Any) -> None:
        _run_case(case, *args)

    return seed(run_seed)(one) if run_seed is not None else one


async def _state(engine: AsyncEngine, villages: list[int]) -> dict[str, Any]:
    """Everything a command could change about ``villages``."""
    async with engine.connect() as conn:
        out: dict[str, Any] = {}
        for name, table, column in (
            ("stock", STOCKS.table, STOCKS.c.village_id),
            ("buildings", Building.__table__, Building.village_id),
            ("orders", BuildOrder.__table__, BuildOrder.village_id),
            ("troops", Troop.__table__, Troop.village_id),
        ):
            rows = await conn.execute(select(table).where(column.in_(villages)))
            out[name] = sorted(tuple(r) for r in rows)
    return out


async def _negative(engine: AsyncEngine) -> list[str]:
    s = STOCKS.c
    async with engine.connect() as conn:
        bad = await conn.execute(
            select(s.village_id).where(
                or_(
                    s.wood < 0, s.clay < 0, s.iron < 0, s.crop < 0,
                    s.wood > s.warehouse_cap, s.clay > s.warehouse_cap,
                    s.iron > s.warehouse_cap, s.crop > s.granary_cap,
                )
            )
        )  # fmt: skip
        out = [f"village {v}: a stock below 0 or above its cap" for v in bad.scalars()]
        troops = await conn.execute(select(Troop.village_id).where(Troop.count < 0))
        out.extend(f"village {v}: a negative troop count" for v in troops.scalars())
    return out


@contextlib.contextmanager
def _servers(root: Path) -> Iterator[tuple[PrivatePostgres, PrivateRedis]]:
    pg, redis = PrivatePostgres(root / "pg"), PrivateRedis(root / "redis")
    try:
        pg.init()
        pg.start()
        pg.create_database("fuzz")
        redis.start()
        yield pg, redis
    finally:
        redis.destroy()
        pg.destroy()
        pg.remove()


def _without_security(document: dict[str, Any]) -> dict[str, Any]:
    """The document without its security schemes: the authenticated clients send their own
    credentials, and schemathesis would otherwise add made-up ones next to them."""
    doc = copy.deepcopy(document)
    doc.get("components", {}).pop("securitySchemes", None)
    doc.pop("security", None)
    for item in doc.get("paths", {}).values():
        for operation in item.values():
            if isinstance(operation, dict):
                operation.pop("security", None)
    return doc


def _get_json(url: str) -> dict[str, Any]:
    data: dict[str, Any] = requests.get(url, timeout=30).json()
    return data


def _register(base_url: str, name: str) -> tuple[str, int, int]:
    resp = requests.post(
        f"{base_url}/api/register", json={"name": name, "password": PASSWORD}, timeout=30
    )
    resp.raise_for_status()
    data = resp.json()
    return str(data["token"]), int(data["player_id"]), int(data["village_id"])


async def fuzz_run(config: FuzzConfig) -> FuzzResult:
    import subprocess

    started = time.monotonic()
    root = config.workdir or Path(tempfile.mkdtemp(prefix="chaos-fuzz-"))
    root.mkdir(parents=True, exist_ok=True)
    result = FuzzResult()
    with _servers(root) as (pg, redis):
        url = pg.url("fuzz")
        env = service_env({"DATABASE_URL": url, "REDIS_URL": redis.url, "REDIS_PREFIX": "fuzz"})
        for args in (["migrate"], ["worldgen", "--players", str(config.bots), "--seed", "1"]):
            await asyncio.to_thread(
                subprocess.run, [venv_script("wgctl"), *args], env=env, check=True,
                capture_output=True, timeout=300,
            )  # fmt: skip
        settings_ = load_settings(
            database_url=url, redis_url=redis.url, redis_prefix="fuzz", map_radius=20
        )
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        engine = create_async_engine(url.replace("postgresql://", "postgresql+asyncpg://"))
        try:
            with _ServerThread(create_app(settings_, config=replace(RELAXED)), port):
                token_a, _, _ = await asyncio.to_thread(_register, base_url, "fuzz-a")
                _, _, village_b = await asyncio.to_thread(_register, base_url, "fuzz-b")
                document = await asyncio.to_thread(_get_json, f"{base_url}/api/openapi.json")
                everyone = list(range(1, village_b + 1))
                before = await _state(engine, everyone)
                await asyncio.to_thread(
                    fuzz_operations, document, base_url, {"anonymous": ({}, set())},
                    config.examples, result, config.seed,
                )  # fmt: skip
                if await _state(engine, everyone) != before:
                    result.isolation.append("anonymous requests changed a village")
                before_b = await _state(engine, [village_b])
                clients = {
                    "bearer": ({"Authorization": f"Bearer {token_a}"}, _SKIP_AUTHED),
                    "cookie": ({"Cookie": f"wg_session={token_a}"}, _SKIP_AUTHED),
                }
                await asyncio.to_thread(
                    fuzz_operations, _without_security(document), base_url, clients,
                    config.examples, result, config.seed,
                )  # fmt: skip
                if await _state(engine, [village_b]) != before_b:
                    result.isolation.append("player A's requests changed player B's village")
                result.isolation.extend(await _negative(engine))
        finally:
            await engine.dispose()
    result.seconds = time.monotonic() - started
    if config.workdir is None:
        shutil.rmtree(root, ignore_errors=True)
    return result


def format_fuzz(result: FuzzResult) -> str:
    lines = [f"fuzzing: {result.cases} cases in {result.seconds:.0f} s"]
    if result.skipped:
        lines.append(f"no cases to generate for: {', '.join(result.skipped)}")
    lines.append("statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(result.statuses.items())))
    unique = sorted(set(result.failures))
    lines.append(f"failures: {len(result.failures)} ({len(unique)} distinct)")
    lines.extend(f"  - {f}" for f in unique[:40])
    lines.extend(f"  ISOLATION: {i}" for i in result.isolation)
    lines.append("OK" if result.ok else "FAILED")
    return "\n".join(lines)
