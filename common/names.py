"""Look-alike player names: the key two names share when a reader cannot tell them apart.

A name's key is its Unicode confusable skeleton (UTS #39, computed by ICU's
``SpoofChecker``) after case folding: ``Alice``, ``ALICE``, ``аlice`` (Cyrillic
``а``), ``b0b``/``bob`` and ``rnary``/``mary`` each share one key. The players
table keeps the key in a unique column, so a look-alike of a taken name is
refused as taken, and a login finds the account by key. Names are NFKC-normalized before this
(``webfront.validation``), so compatibility forms collide as well.
"""

from __future__ import annotations

import threading
import unicodedata

import icu

NAME_KEY_MAX = 192  # column length: a character's skeleton is at most 6, a name at most 24 long

_local = threading.local()  # a SpoofChecker is not documented as thread-safe: one per thread


def _checker() -> icu.SpoofChecker:
    checker = getattr(_local, "checker", None)
    if checker is None:
        checker = _local.checker = icu.SpoofChecker()
    return checker


def name_key(name: str) -> str:
    """The confusable skeleton of ``name`` after case folding, in NFC."""
    checker = _checker()
    once = checker.getSkeleton(0, unicodedata.normalize("NFKC", name).casefold())
    # The skeleton is case-sensitive and may map to capitals ("0" -> "O"): fold and map
    # again, so "b0b" meets "bob" as "B0B" meets "BOB".
    skeleton = checker.getSkeleton(0, once.casefold())
    # the skeleton is NFD; NFC keeps keys short and readable in the table
    return unicodedata.normalize("NFC", skeleton)
