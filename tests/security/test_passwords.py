"""Account takeover, offline: how passwords are stored (SECURITY.md, "Password hashing")."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from argon2 import extract_parameters
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from db.models import Player
from tests.web.conftest import PASSWORD, MakeClient
from webfront import passwords
from webfront.config import WebConfig
from webfront.passwords import HashParams, hash_password, needs_rehash, unusable_reason
from webfront.passwords import verify_password as verify

CHEAP = HashParams(memory_kib=256, time_cost=1)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def earlier_scheme_hash(password: str, n: int = 2**10, r: int = 8, p: int = 1) -> str:
    """A hash as this project stored them before Argon2id: ``scrypt$N$r$p$salt$key``."""
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(key)}"


Cost = tuple[str, int, int, int]  # what a hash call costs: scheme and its parameters


@contextmanager
def _hash_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Cost]]:
    """The cost of each hash computed inside the block, by either scheme (the calls still
    run): counted by what the libraries are asked to do, not by a clock."""
    calls: list[Cost] = []
    real_hash, real_verify, real_scrypt = (
        passwords.hash_secret, passwords.verify_secret, hashlib.scrypt
    )  # fmt: skip

    def hashed(secret: bytes, salt: bytes, **kw: Any) -> bytes:
        calls.append(("argon2id", kw["memory_cost"], kw["time_cost"], kw["parallelism"]))
        return real_hash(secret, salt, **kw)

    def verified(stored: bytes, secret: bytes, kind: Any) -> Any:
        found = extract_parameters(stored.decode())
        calls.append(("argon2id", found.memory_cost, found.time_cost, found.parallelism))
        return real_verify(stored, secret, kind)

    def scrypted(password: bytes, *, salt: bytes, n: int, r: int, p: int, **kw: Any) -> bytes:
        calls.append(("scrypt", n, r, p))
        return real_scrypt(password, salt=salt, n=n, r=r, p=p, **kw)

    with monkeypatch.context() as patch:
        patch.setattr(passwords, "hash_secret", hashed)
        patch.setattr(passwords, "verify_secret", verified)
        patch.setattr(hashlib, "scrypt", scrypted)
        yield calls


def _cost(params: HashParams) -> Cost:
    return ("argon2id", params.memory_kib, params.time_cost, params.parallelism)


def test_production_parameters_are_the_documented_ones() -> None:
    params = WebConfig().password_hash
    # OWASP's first Argon2id setting: 19 MiB, two passes, one lane
    assert (params.memory_kib, params.time_cost, params.parallelism) == (19 * 1024, 2, 1)
    assert WebConfig().hash_threads <= 4  # hashes at once per process: a bounded CPU cost


def test_each_hash_names_its_parameters_and_has_its_own_salt() -> None:
    params = HashParams(memory_kib=1024, time_cost=2, parallelism=1)
    first, second = hash_password(PASSWORD, params), hash_password(PASSWORD, params)
    assert first != second  # salted
    for stored in (first, second):
        empty, scheme, version, costs, salt, key = stored.split("$")
        assert (empty, scheme, version, costs) == ("", "argon2id", "v=19", "m=1024,t=2,p=1")
        assert len(_unb64(salt)) == 16 and len(_unb64(key)) == 32
        assert PASSWORD not in stored
        assert verify(PASSWORD, stored, params)
        assert not verify(PASSWORD + "x", stored, params)
        assert not needs_rehash(stored, params)
        assert needs_rehash(stored, HashParams())


def test_an_account_without_a_password_hash_matches_nothing() -> None:
    for stored in ("!", "", "plain text", "scrypt$not-a-hash", "$argon2id$not-a-hash"):
        assert not verify(stored, stored, CHEAP)
        assert not verify(PASSWORD, stored, CHEAP)
    assert unusable_reason("!", CHEAP) is None  # bots: no password, by design


def _corrupt_and_planted(salt: str, key: str) -> list[str]:
    argon2 = "$argon2id$v=19$m=256,t=1,p=1"
    scrypt_salt, scrypt_key = _b64(bytes(16)), _b64(bytes(32))
    return [
        f"$argon2i$v=19$m=256,t=1,p=1${salt}${key}",  # another variant
        f"$argon2id$v=16$m=256,t=1,p=1${salt}${key}",  # another version
        f"$argon2id$v=19$m={2**30},t=1,p=1${salt}${key}",  # a planted cost: 1 TiB
        f"$argon2id$v=19$m=256,t=100000,p=1${salt}${key}",  # ... or a hundred thousand passes
        f"$argon2id$v=19$m=65536,t=1,p=64${salt}${key}",  # ... or 64 threads
        f"$argon2id$v=19$m=256,t=0,p=1${salt}${key}",
        f"$argon2id$v=19$m=4,t=1,p=1${salt}${key}",  # under Argon2's least memory
        f"$argon2id$v=19$m=x,t=1,p=1${salt}${key}",
        f"{argon2}${salt}$!!not-base64",
        f"{argon2}${salt}${key[:10]}",  # a key cut short
        f"{argon2}${salt}",
        f"scrypt$1000$8$1${scrypt_salt}${scrypt_key}",  # the earlier scheme's, damaged
        f"scrypt$1024$0$1${scrypt_salt}${scrypt_key}",
        f"scrypt$65536$1$1${scrypt_salt}${scrypt_key}",  # N must stay below 2**(16 r)
        f"scrypt${2**24}$8$1${scrypt_salt}${scrypt_key}",  # 16 GiB
        f"scrypt$1024$8${2**30}${scrypt_salt}${scrypt_key}",
        f"scrypt$1024$8$1${scrypt_salt}${scrypt_key[:-4]}",
    ]


def test_a_corrupt_or_planted_hash_matches_nothing_and_costs_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parameters a library refuses used to raise (a 500 at login); absurd ones would cost
    gigabytes: both match no password, at the configured cost."""
    *_, salt, key = hash_password(PASSWORD, CHEAP).split("$")
    for stored in _corrupt_and_planted(salt, key):
        with _hash_calls(monkeypatch) as calls:
            assert not verify(PASSWORD, stored, CHEAP), stored
        assert calls == [_cost(CHEAP)], (stored, calls)  # the configured cost, never the stored
        reason = unusable_reason(stored, CHEAP)
        assert reason and salt not in reason and key[:8] not in reason, stored
    # hashes made with the default parameters stay usable under cheaper configured ones
    default = hash_password(PASSWORD, HashParams())
    assert unusable_reason(default, CHEAP) is None and verify(PASSWORD, default, CHEAP)


def test_an_unknown_account_costs_as_much_as_a_known_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """No timing oracle for which names exist: a hash of the same cost is computed either way
    (counted by what the library is asked to do, not by a clock, which a busy machine skews)."""
    stored = hash_password(PASSWORD, CHEAP)
    with _hash_calls(monkeypatch) as known:
        assert not verify("a wrong password", stored, CHEAP)
    for unknown_hash in (None, "", "!", "plain text"):
        with _hash_calls(monkeypatch) as unknown:
            assert not verify("a wrong password", unknown_hash, CHEAP)
        assert unknown == known == [_cost(CHEAP)], (unknown_hash, unknown, known)


def test_a_hash_of_the_earlier_scheme_still_matches_and_is_to_be_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = earlier_scheme_hash(PASSWORD, n=2**10, r=8, p=2)
    with _hash_calls(monkeypatch) as calls:
        assert verify(PASSWORD, old, CHEAP)
    assert calls == [("scrypt", 2**10, 8, 2)]  # checked with its own parameters
    assert not verify(PASSWORD + "x", old, CHEAP)
    assert unusable_reason(old, CHEAP) is None and needs_rehash(old, CHEAP)
    # the earlier scheme's default cost stays usable, whatever Argon2id's configured cost
    default = f"scrypt${2**15}$8$3${_b64(bytes(16))}${_b64(bytes(32))}"
    assert unusable_reason(default, CHEAP) is None


async def _stored(engine: AsyncEngine) -> str:
    async with engine.connect() as conn:
        return str((await conn.execute(select(Player.password_hash))).scalar_one())


async def test_old_parameters_are_upgraded_at_the_next_login(
    make_client: MakeClient, engine: AsyncEngine
) -> None:
    strong = HashParams(memory_kib=1024, time_cost=2)
    old: TestClient = await make_client(password_hash=CHEAP)
    resp = await old.post("/api/register", json={"name": "Olga", "password": PASSWORD})
    assert resp.status == 201
    new: TestClient = await make_client(password_hash=strong)
    resp = await new.post("/api/login", json={"name": "Olga", "password": PASSWORD})
    assert resp.status == 200
    stored = await _stored(engine)
    assert stored.startswith("$argon2id$v=19$m=1024,t=2,p=1$")
    assert not needs_rehash(stored, strong) and verify(PASSWORD, stored, strong)


async def test_a_hash_of_the_earlier_scheme_becomes_argon2id_at_the_next_login(
    make_client: MakeClient, engine: AsyncEngine
) -> None:
    client: TestClient = await make_client()
    resp = await client.post("/api/register", json={"name": "Oskar", "password": PASSWORD})
    assert resp.status == 201
    async with engine.begin() as conn:  # as a world of before the change stored it
        await conn.execute(update(Player).values(password_hash=earlier_scheme_hash(PASSWORD)))
    wrong = await client.post("/api/login", json={"name": "Oskar", "password": PASSWORD + "x"})
    assert wrong.status == 401 and (await _stored(engine)).startswith("scrypt$")
    resp = await client.post("/api/login", json={"name": "Oskar", "password": PASSWORD})
    assert resp.status == 200
    stored = await _stored(engine)
    assert stored.startswith("$argon2id$v=19$m=256,t=1,p=1$")  # the configured (cheap) cost
    again = await client.post("/api/login", json={"name": "Oskar", "password": PASSWORD})
    assert again.status == 200 and await _stored(engine) == stored  # replaced once
