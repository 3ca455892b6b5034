"""``wgctl operator create`` and ``list``: the accounts the console logs in with."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select

from common.settings import load_settings
from db.engine import create_engine
from db.models import Operator
from tests.conftest import TEST_REDIS_URL
from webfront.passwords import HashParams, verify_password

BIN = Path(sys.executable).parent


def wgctl(args: list[str], db_url: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REDIS_URL": TEST_REDIS_URL, "DATABASE_URL": db_url}
    return subprocess.run(
        [str(BIN / "wgctl"), *args], env=env, input=stdin, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


async def _stored_hash(db_url: str, name: str) -> str:
    engine = create_engine(load_settings(database_url=db_url, redis_url=TEST_REDIS_URL))
    try:
        async with engine.connect() as conn:
            found = await conn.execute(select(Operator.password_hash).where(Operator.name == name))
            return str(found.scalar_one())
    finally:
        await engine.dispose()


def test_create_and_list_operators(sqlite_url: str) -> None:
    made = wgctl(["operator", "create", "ops-ben", "--password-stdin"], sqlite_url, "s3cret pass\n")
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("operator ops-ben created (id ")
    stored = asyncio.run(_stored_hash(sqlite_url, "ops-ben"))
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$")  # the players' hash and cost
    assert verify_password("s3cret pass", stored, HashParams())
    listed = wgctl(["operator", "list"], sqlite_url)
    assert listed.returncode == 0 and "ops-ben" in listed.stdout

    again = wgctl(["operator", "create", "ops-ben", "--password-stdin"], sqlite_url, "other pass\n")
    assert again.returncode != 0
    exists = "error: an operator named 'ops-ben' exists already"
    assert again.stderr.strip().splitlines() == [exists]
    for args, stdin in (
        (["operator", "create", "no spaces!", "--password-stdin"], "s3cret pass\n"),
        (["operator", "create", "ops-cat", "--password-stdin"], "short\n"),
    ):
        bad = wgctl(args, sqlite_url, stdin)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
