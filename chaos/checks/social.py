"""The alliance invariants: one alliance per player, members of alliances that exist, and
exactly one founder in every alliance (an alliance without members is dissolved)."""

from __future__ import annotations

from collections import Counter

from chaos.checks.base import Check
from chaos.checks.database import Final

ROLES = frozenset({"founder", "leader", "member"})


def check_alliances(final: Final) -> Check:
    c = Check(
        "alliances_consistent",
        "no player is a member twice; every member's alliance exists; every alliance has "
        "members (the last one out dissolves it) and exactly one founder; roles are known",
    )
    per_player = Counter(player for player, _, _ in final.members)
    founders: Counter[int] = Counter()
    members: Counter[int] = Counter()
    for player, alliance, role in final.members:
        c.checked += 1
        members[alliance] += 1
        if per_player[player] > 1:
            c.fail(f"player {player} is a member {per_player[player]} times")
        if alliance not in final.alliances:
            c.fail(f"player {player} is a member of alliance {alliance}, which does not exist")
        if role not in ROLES:
            c.fail(f"player {player} has the unknown role {role!r}")
        if role == "founder":
            founders[alliance] += 1
    for alliance in final.alliances:
        c.checked += 1
        if not members[alliance]:
            c.fail(f"alliance {alliance} has no members and was not dissolved")
        elif founders[alliance] != 1:
            c.fail(f"alliance {alliance} has {founders[alliance]} founders")
    c.notes.append(
        f"{len(final.alliances)} alliances, {len(final.members)} members, "
        f"{final.messages} messages at the end"
    )
    return c
