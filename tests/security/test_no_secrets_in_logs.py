"""No secrets in logs or error messages (SECURITY.md, "No secrets in logs")."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import text

from common.entrypoint import setup_logging
from common.errors import ConfigError
from common.settings import Settings, load_settings
from db.engine import create_engine
from webfront.sessions import COOKIE

SECRET_PASSWORD = "Tr0ub4dor&3-never-log-me"


@pytest.fixture
def debug_logging(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The processes' own logging set-up at its most verbose level (LOG_LEVEL=DEBUG)."""
    quiet = logging.getLogger("aiosqlite").level
    setup_logging("DEBUG")
    caplog.set_level(logging.DEBUG)
    yield caplog
    logging.getLogger("aiosqlite").setLevel(quiet)


async def test_register_and_login_never_log_the_password_or_the_token(
    client: TestClient, debug_logging: pytest.LogCaptureFixture
) -> None:
    caplog = debug_logging
    resp = await client.post("/api/register", json={"name": "Quiet", "password": SECRET_PASSWORD})
    assert resp.status == 201
    token = (await resp.json())["token"]
    client.session.cookie_jar.clear()
    for password in (SECRET_PASSWORD, SECRET_PASSWORD + "?"):  # right, then wrong
        await client.post("/api/login", json={"name": "Quiet", "password": password})
    # refused passwords are not echoed back either (nor logged)
    too_long = SECRET_PASSWORD * 10
    resp = await client.post("/api/register", json={"name": "Loud", "password": too_long})
    assert resp.status == 422 and SECRET_PASSWORD not in await resp.text()
    await client.get("/api/snapshot", headers={"Cookie": f"{COOKIE}={token}"})
    await client.post(
        "/api/test/spend", json={"village_id": 1, "wood": 666},
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )  # fmt: skip  # a 500: its traceback is logged
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert SECRET_PASSWORD not in logged
    assert token not in logged
    assert "$argon2id$" not in logged and "scrypt$" not in logged


def test_settings_repr_hides_database_and_redis_passwords() -> None:
    settings = load_settings(
        database_url="postgresql://game:db-s3cret@db.internal:5432/world",
        redis_url="redis://:redis-s3cret@cache.internal:6379/0",
    )
    for shown in (repr(settings), str(settings), f"{settings}"):
        assert "db-s3cret" not in shown and "redis-s3cret" not in shown
        assert "db.internal" in shown  # still useful to an operator


@pytest.mark.parametrize(
    "changes",
    [
        {"database_url": "mysql://game:db-s3cret@db.internal/world"},
        {"database_url": "postgresql://game:db-s3cret@db.internal:notaport/world"},
        {"redis_url": "http://:redis-s3cret@cache.internal:6379/0"},
    ],
)
def test_a_bad_url_is_reported_without_its_password(changes: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(**changes)
    message = str(caught.value)
    assert "s3cret" not in message
    assert ("DATABASE_URL" in message) or ("REDIS_URL" in message)


async def test_database_errors_do_not_carry_statement_parameters(settings: Settings) -> None:
    """A failed statement's text is logged by the web tier (``backend unavailable: ...``)
    and by the task server: it must not hold the bound values (password hashes, tokens)."""
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            with pytest.raises(Exception) as caught:
                await conn.execute(
                    text("SELECT CAST(:secret AS INTEGER) / 0 FROM no_such_table"),
                    {"secret": "$argon2id$v=19$m=19456,t=2,p=1$c2VjcmV0"},
                )
    finally:
        await engine.dispose()
    assert "c2VjcmV0" not in str(caught.value)
