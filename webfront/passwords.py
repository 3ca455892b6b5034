"""Password hashing with Argon2id (``argon2-cffi``, the reference C implementation).

Default parameters: OWASP's first recommended Argon2id setting (Password Storage Cheat
Sheet), m=19 MiB, t=2, p=1: far less CPU per hash than the scrypt hash it replaced
(SECURITY.md says what that trades). Each hash has its own 16-byte random salt and a
32-byte key, stored in the standard PHC form ``$argon2id$v=19$m=19456,t=2,p=1$salt$key``,
which names its parameters, so they can be raised later: a login with other parameters
rehashes. Argon2id verification compares in
constant time.

Hashes of the scheme stored before, ``scrypt$N$r$p$salt$key`` (``hashlib.scrypt``;
N=2**15, r=8, p=3 by default), still match their passwords, and are replaced by an
Argon2id hash at the player's next login.

A stored hash that cannot be used (corrupt, another Argon2 variant, parameters the
library refuses, or parameters that cost over ``MAX_COST_FACTOR`` times both the
configured and the default ones) matches no password; ``unusable_reason`` says why
without quoting it. Hashing runs in a small thread pool (both libraries release the
GIL), so the event loop keeps serving while a login is checked.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from argon2 import Type, extract_parameters
from argon2.exceptions import InvalidHashError, VerificationError
from argon2.low_level import hash_secret, verify_secret

_SALT_BYTES = 16
_KEY_BYTES = 32
NO_PASSWORD = "!"  # what bots store: no password matches it
MAX_COST_FACTOR = 4  # a stored hash may cost this many times the configured or default ones
_DUMMY_SALT = b"\0" * _SALT_BYTES  # an unknown account's hash: its cost is what counts


class _Unusable(ValueError):
    pass


@dataclass(frozen=True)
class HashParams:
    """Argon2id's cost: memory in KiB, passes over it, lanes (threads) per hash."""

    memory_kib: int = 19 * 1024
    time_cost: int = 2
    parallelism: int = 1


@dataclass(frozen=True)
class _Scrypt:
    """The parameters of a hash of the earlier scheme (its defaults: what it stored)."""

    n: int = 2**15
    r: int = 8
    p: int = 3

    @property
    def maxmem(self) -> int:
        return 2 * 128 * self.r * self.n * self.p + 1024 * 1024  # OpenSSL's need, with room


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _argon2(password: str, salt: bytes, params: HashParams) -> bytes:
    return hash_secret(
        password.encode(),
        salt,
        time_cost=params.time_cost,
        memory_cost=params.memory_kib,
        parallelism=params.parallelism,
        hash_len=_KEY_BYTES,
        type=Type.ID,
    )


def hash_password(password: str, params: HashParams) -> str:
    return _argon2(password, secrets.token_bytes(_SALT_BYTES), params).decode()


def _too_dear(cost: tuple[int, ...], *usual: tuple[int, ...]) -> bool:
    """Whether any part of a stored hash's cost (memory, work, ...) is over
    ``MAX_COST_FACTOR`` times that part of every usual cost (the configured and the default
    ones): a corrupt or planted row must not make a login take gigabytes or minutes (but
    lowered parameters leave hashes of the defaults usable)."""
    return any(part > MAX_COST_FACTOR * max(u[i] for u in usual) for i, part in enumerate(cost))


def _argon2_params(stored: str, current: HashParams) -> HashParams:
    """The parameters of a stored Argon2id hash; raises _Unusable naming what is wrong
    (never a part of the hash)."""
    try:
        found = extract_parameters(stored)
    except (InvalidHashError, ValueError):
        raise _Unusable("not a hash of the form $argon2id$v=19$m=..,t=..,p=..$salt$key") from None
    if found.type is not Type.ID or found.version != 19:
        raise _Unusable("not an Argon2id hash of version 19")
    if found.hash_len != _KEY_BYTES:
        raise _Unusable(f"its key is not {_KEY_BYTES} bytes")
    params = HashParams(found.memory_cost, found.time_cost, found.parallelism)
    if params.time_cost < 1 or params.parallelism < 1 or params.memory_kib < 8 * params.parallelism:
        raise _Unusable("Argon2 refuses its parameters")

    def cost(p: HashParams) -> tuple[int, int, int]:  # memory, work, threads
        return p.memory_kib, p.memory_kib * p.time_cost, p.parallelism

    if _too_dear(cost(params), cost(current), cost(HashParams())):
        raise _Unusable(f"its parameters cost over {MAX_COST_FACTOR} times the usual ones")
    return params


def _scrypt_parts(stored: str) -> tuple[_Scrypt, bytes, bytes]:
    """(parameters, salt, key) of a stored hash of the earlier scheme; raises _Unusable."""
    parts = stored.split("$")
    if len(parts) != 6:
        raise _Unusable("not of the form scrypt$N$r$p$salt$key")
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
    except ValueError:
        raise _Unusable("its parameters are not numbers") from None
    if n < 2 or n & (n - 1) or r < 1 or p < 1 or (16 * r < 64 and n >= 1 << (16 * r)):
        raise _Unusable("scrypt refuses its parameters")
    base = _Scrypt()
    if _too_dear((r * n, r * n * p), (base.r * base.n, base.r * base.n * base.p)):
        raise _Unusable(f"its parameters cost over {MAX_COST_FACTOR} times the usual ones")
    try:
        salt, key = _unb64(parts[4]), _unb64(parts[5])
    except ValueError:
        raise _Unusable("its salt or key is not base64") from None
    if len(key) != _KEY_BYTES:
        raise _Unusable(f"its key is not {_KEY_BYTES} bytes")
    return _Scrypt(n, r, p), salt, key


def _check(stored: str, params: HashParams) -> None:
    """Raises _Unusable when ``stored`` can match no password."""
    if stored.startswith("scrypt$"):
        _scrypt_parts(stored)
    else:
        _argon2_params(stored, params)


def unusable_reason(stored: str, params: HashParams) -> str | None:
    """Why a stored hash matches no password, or None when it can be checked (or is the
    no-password marker of bots)."""
    if stored == NO_PASSWORD:
        return None
    try:
        _check(stored, params)
    except _Unusable as exc:
        return str(exc)
    return None


def verify_password(password: str, stored: str | None, params: HashParams) -> bool:
    """True when ``password`` matches ``stored``.

    With no stored hash (unknown account) or an unusable one, a hash of the configured
    cost is still computed, so the answer takes as long as for a real account.
    """
    try:
        if not stored or stored == NO_PASSWORD:
            raise _Unusable("no password")
        _check(stored, params)
    except _Unusable:
        _argon2(password, _DUMMY_SALT, params)
        return False
    if stored.startswith("scrypt$"):
        used, salt, key = _scrypt_parts(stored)
        try:
            derived = hashlib.scrypt(
                password.encode(), salt=salt, n=used.n, r=used.r, p=used.p,
                maxmem=used.maxmem, dklen=_KEY_BYTES,
            )  # fmt: skip
        except (ValueError, MemoryError):  # whatever OpenSSL still refuses
            return False
        return hmac.compare_digest(derived, key)
    try:
        return verify_secret(stored.encode(), password.encode(), Type.ID)
    except VerificationError:  # a wrong password, or a hash the library cannot decode
        return False


def needs_rehash(stored: str, params: HashParams) -> bool:
    """Whether a hash that matched should be replaced by one of ``params``: every hash of
    the earlier scheme, and Argon2id hashes of other parameters."""
    if stored.startswith("scrypt$"):
        return unusable_reason(stored, params) is None
    try:
        return _argon2_params(stored, params) != params
    except _Unusable:
        return False
