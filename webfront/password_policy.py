"""Which new passwords are refused: common ones, guessable ones and the player's own name.

zxcvbn (a maintained port of Dropbox's estimator, with its own lists of common
passwords, names and words, no network) estimates how many guesses a password
takes, with the player's name as a word an attacker knows. A score under
``MIN_SCORE`` is refused at registration; logins never judge a password, so
accounts made before the check keep working.
"""

from __future__ import annotations

from zxcvbn import zxcvbn

from common.names import name_key

MIN_SCORE = 2  # zxcvbn: 2 = "somewhat guessable", safe against online guessing that is throttled
_JUDGED_CHARS = 72  # zxcvbn's own bound: its cost grows fast with the length


def weakness(password: str, name: str) -> str | None:
    """Why ``password`` is too weak for the player ``name``, or None when it will do."""
    if name_key(password) == name_key(name):
        return "the password must not be the player's name"
    result = zxcvbn(password[:_JUDGED_CHARS], user_inputs=[name])
    if result["score"] >= MIN_SCORE:
        return None
    warning = result["feedback"].get("warning") or "it is too easy to guess"
    return f"the password is too weak: {warning.rstrip('.')}; use a few uncommon words"
