"""Account takeover, offline: how passwords are stored (SECURITY.md, "Password hashing")."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from db.models import Player
from tests.web.conftest import FAST_CONFIG, PASSWORD, MakeClient
from webfront.config import WebConfig
from webfront.passwords import (
    ScryptParams,
    hash_password,
    needs_rehash,
    unusable_reason,
    verify_password,
)


def _b64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


Cost = tuple[int, int, int, int, int]  # what a scrypt call costs: n, r, p, maxmem, dklen


def _cost(params: ScryptParams) -> Cost:
    return (params.n, params.r, params.p, params.maxmem, 32)


@contextmanager
def _scrypt_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Cost]]:
    """The cost of each scrypt call made inside the block (the calls still run)."""
    calls: list[Cost] = []
    real = hashlib.scrypt

    def counted(
        password: bytes, *, salt: bytes, n: int, r: int, p: int, maxmem: int, dklen: int
    ) -> bytes:
        calls.append((n, r, p, maxmem, dklen))
        return real(password, salt=salt, n=n, r=r, p=p, maxmem=maxmem, dklen=dklen)

    with monkeypatch.context() as patch:
        patch.setattr(hashlib, "scrypt", counted)
        yield calls


def test_production_parameters_are_the_documented_ones() -> None:
    params = WebConfig().scrypt
    assert (params.n, params.r, params.p) == (2**15, 8, 3)  # 32 MiB, ~0.25 s a hash
    assert params.maxmem >= 128 * params.r * params.n * params.p
    assert WebConfig().hash_threads <= 4  # hashes at once per process: a bounded CPU cost


def test_each_hash_names_its_parameters_and_has_its_own_salt() -> None:
    params = ScryptParams(n=2**12, r=8, p=1)
    first, second = hash_password(PASSWORD, params), hash_password(PASSWORD, params)
    assert first != second  # salted
    for stored in (first, second):
        scheme, n, r, p, salt, key = stored.split("$")
        assert (scheme, int(n), int(r), int(p)) == ("scrypt", 2**12, 8, 1)
        assert len(_b64(salt)) == 16 and len(_b64(key)) == 32
        assert PASSWORD not in stored
        assert verify_password(PASSWORD, stored, params)
        assert not verify_password(PASSWORD + "x", stored, params)


def test_an_account_without_a_password_hash_matches_nothing() -> None:
    params = ScryptParams(n=2**10, r=8, p=1)
    for stored in ("!", "", "plain text", "scrypt$not-a-hash"):
        assert not verify_password(stored, stored, params)
        assert not verify_password(PASSWORD, stored, params)
    assert unusable_reason("!", params) is None  # bots: no password, by design


def test_a_corrupt_or_planted_hash_matches_nothing_and_costs_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parameters scrypt refuses used to raise (a 500 at login); absurd ones would cost
    gigabytes: both match no password, at the configured cost."""
    params = ScryptParams(n=2**10, r=8, p=1)
    _, n, r, p, salt, key = hash_password(PASSWORD, params).split("$")
    for stored in (
        f"scrypt$1000${r}${p}${salt}${key}",
        f"scrypt${n}$0${p}${salt}${key}",
        f"scrypt$65536$1${p}${salt}${key}",  # N must stay below 2**(16 r)
        f"scrypt${2**24}${r}${p}${salt}${key}",  # 16 GiB
        f"scrypt${n}${r}${2**30}${salt}${key}",
        f"scrypt${n}${r}${p}${salt}${key[:-4]}",
    ):
        with _scrypt_calls(monkeypatch) as calls:
            assert not verify_password(PASSWORD, stored, params)
        assert calls == [_cost(params)], calls  # the configured cost, never the stored one
        reason = unusable_reason(stored, params)
        assert reason and salt not in reason and key[:8] not in reason
    # hashes made with the default parameters stay usable under cheaper configured ones
    default = hash_password(PASSWORD, ScryptParams())
    assert unusable_reason(default, params) is None and verify_password(PASSWORD, default, params)


def test_an_unknown_account_costs_as_much_as_a_known_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """No timing oracle for which names exist: a hash of the same cost is computed either way
    (counted by what scrypt is asked to do, not by a clock, which a busy machine skews)."""
    params = ScryptParams(n=2**10, r=8, p=1)
    stored = hash_password(PASSWORD, params)
    with _scrypt_calls(monkeypatch) as known:
        assert not verify_password("a wrong password", stored, params)
    for unknown_hash in (None, "", "!", "plain text"):
        with _scrypt_calls(monkeypatch) as unknown:
            assert not verify_password("a wrong password", unknown_hash, params)
        assert unknown == known == [_cost(params)], (unknown_hash, unknown, known)


async def test_old_parameters_are_upgraded_at_the_next_login(
    make_client: MakeClient, engine: AsyncEngine
) -> None:
    weak = replace(FAST_CONFIG, scrypt=ScryptParams(n=2**10, r=8, p=1))
    strong = ScryptParams(n=2**12, r=8, p=2)
    old: TestClient = await make_client(scrypt=weak.scrypt)
    resp = await old.post("/api/register", json={"name": "Olga", "password": PASSWORD})
    assert resp.status == 201
    new: TestClient = await make_client(scrypt=strong)
    resp = await new.post("/api/login", json={"name": "Olga", "password": PASSWORD})
    assert resp.status == 200
    async with engine.connect() as conn:
        stored = (await conn.execute(select(Player.password_hash))).scalar_one()
    assert stored.startswith(f"scrypt${strong.n}${strong.r}${strong.p}$")
    assert not needs_rehash(stored, strong) and verify_password(PASSWORD, stored, strong)
