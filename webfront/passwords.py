"""Password hashing with scrypt (``hashlib.scrypt``, from OpenSSL).

Default parameters: N=2**15, r=8, p=3: 32 MiB of memory and about 0.25 s of
one core per hash on a 2020s server, one of OWASP's recommended scrypt
settings (equivalent to N=2**17, r=8, p=1 at a quarter of the memory). Each
hash has its own 16-byte random salt. The stored form names its parameters,
``scrypt$N$r$p$salt$hash`` (base64), so they can be raised later: a login with
old parameters rehashes. Comparison is constant-time (``hmac.compare_digest``).
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


def _parse(stored: str) -> tuple[ScryptParams, bytes, bytes] | None:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != "scrypt":
        return None  # e.g. a bot's "!": no password matches it
    try:
        params = ScryptParams(int(parts[1]), int(parts[2]), int(parts[3]))
        return params, _unb64(parts[4]), _unb64(parts[5])
    except ValueError:
        return None


def verify_password(password: str, stored: str | None, params: ScryptParams) -> bool:
    """True when ``password`` matches ``stored``.

    With no stored hash (unknown account) or an unusable one, a hash is still
    computed, so the answer takes as long as for a real account.
    """
    parsed = _parse(stored) if stored else None
    if parsed is None:
        _derive(password, b"\0" * _SALT_BYTES, params)
        return False
    used, salt, key = parsed
    return hmac.compare_digest(_derive(password, salt, used), key)


def needs_rehash(stored: str, params: ScryptParams) -> bool:
    parsed = _parse(stored)
    return parsed is not None and parsed[0] != params
