"""Password hashing with scrypt (``hashlib.scrypt``, from OpenSSL).

Default parameters: N=2**15, r=8, p=3: 32 MiB of memory and about 0.25 s of
one core per hash on a 2020s server, one of OWASP's recommended scrypt
settings (equivalent to N=2**17, r=8, p=1 at a quarter of the memory). Each
hash has its own 16-byte random salt. The stored form names its parameters,
``scrypt$N$r$p$salt$hash`` (base64), so they can be raised later: a login with
old parameters rehashes. Comparison is constant-time (``hmac.compare_digest``).
A stored hash that cannot be used (corrupt, or parameters scrypt refuses or
that cost over ``MAX_COST_FACTOR`` times both the configured and the default
ones) matches no password; ``unusable_reason`` says why without quoting it.
Hashing runs in a small thread pool (OpenSSL releases the GIL), so the event
loop keeps serving while a login is checked.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

_SALT_BYTES = 16
_KEY_BYTES = 32
NO_PASSWORD = "!"  # what bots store: no password matches it
MAX_COST_FACTOR = 4  # a stored hash may cost this many times the configured or default ones


class _Unusable(ValueError):
    pass


@dataclass(frozen=True)
class ScryptParams:
    n: int = 2**15
    r: int = 8
    p: int = 3

    @property
    def maxmem(self) -> int:
        return 2 * 128 * self.r * self.n * self.p + 1024 * 1024  # OpenSSL's need, with room


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def _derive(password: str, salt: bytes, params: ScryptParams) -> bytes:
    return hashlib.scrypt(
        password.encode(),
        salt=salt,
        n=params.n,
        r=params.r,
        p=params.p,
        maxmem=params.maxmem,
        dklen=_KEY_BYTES,
    )


def hash_password(password: str, params: ScryptParams) -> str:
    salt = secrets.token_bytes(_SALT_BYTES)
    key = _derive(password, salt, params)
    return f"scrypt${params.n}${params.r}${params.p}${_b64(salt)}${_b64(key)}"


def _parse(stored: str, current: ScryptParams) -> tuple[ScryptParams, bytes, bytes]:
    """(parameters, salt, key) of a stored hash; raises _Unusable naming what is wrong (never
    a part of the hash)."""
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        raise _Unusable("not of the form scrypt$N$r$p$salt$key")
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
    except ValueError:
        raise _Unusable("its parameters are not numbers") from None
    if n < 2 or n & (n - 1) or r < 1 or p < 1 or (16 * r < 64 and n >= 1 << (16 * r)):
        raise _Unusable("scrypt refuses its parameters")
    # a corrupt or planted row must not make a login take gigabytes or minutes (but lowered
    # parameters leave hashes made with the defaults usable)
    base = ScryptParams()
    memory = max(current.r * current.n, base.r * base.n)
    work = max(current.r * current.n * current.p, base.r * base.n * base.p)
    if r * n > MAX_COST_FACTOR * memory or r * n * p > MAX_COST_FACTOR * work:
        raise _Unusable(f"its parameters cost over {MAX_COST_FACTOR} times the usual ones")
    try:
        salt, key = _unb64(parts[4]), _unb64(parts[5])
    except ValueError:
        raise _Unusable("its salt or key is not base64") from None
    if len(key) != _KEY_BYTES:
        raise _Unusable(f"its key is not {_KEY_BYTES} bytes")
    return ScryptParams(n, r, p), salt, key


def unusable_reason(stored: str, params: ScryptParams) -> str | None:
    """Why a stored hash matches no password, or None when it can be checked (or is the
    no-password marker of bots)."""
    if stored == NO_PASSWORD:
        return None
    try:
        _parse(stored, params)
    except _Unusable as exc:
        return str(exc)
    return None


def verify_password(password: str, stored: str | None, params: ScryptParams) -> bool:
    """True when ``password`` matches ``stored``.

    With no stored hash (unknown account) or an unusable one, a hash is still
    computed, so the answer takes as long as for a real account.
    """
    try:
        if not stored or stored == NO_PASSWORD:
            raise _Unusable("no password")
        used, salt, key = _parse(stored, params)
    except _Unusable:
        _derive(password, b"\0" * _SALT_BYTES, params)
        return False
    try:
        derived = _derive(password, salt, used)
    except (ValueError, MemoryError):  # whatever OpenSSL still refuses
        return False
    return hmac.compare_digest(derived, key)


def needs_rehash(stored: str, params: ScryptParams) -> bool:
    try:
        return _parse(stored, params)[0] != params
    except _Unusable:
        return False
