"""Checks outside the database: the queue's dead letters and the services' logs."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from chaos.checks.base import Check
from chaos.faults import Garbage
from chaos.players import Ledger
from common.clock import SYSTEM_CLOCK
from common.queue import EventQueue
from common.queue.constants import PartitionKeys
from common.queue.events import DeadEvent


async def check_dead_letters(
    redis_url: str, prefix: str, partitions: int, garbage: list[Garbage]
) -> Check:
    c = Check(
        "malformed_entries_dead_lettered",
        "every malformed, oversized or unknown entry written into the queue is in its "
        "partition's dead-letter set with a reason (a durable one without a DB row may "
        "also be dropped: it has no effect either way), none is left waiting, none ran, "
        "and no real event is dead",
    )
    redis = Redis.from_url(redis_url)
    try:
        queue = EventQueue(redis, prefix=prefix, partitions=partitions, clock=SYSTEM_CLOCK)
        try:
            dead = await queue.dead(limit=10_000)
        except Exception as exc:  # listing must survive what the workers buried
            c.fail(f"EventQueue.dead() fails on the dead letters: {type(exc).__name__}: {exc}")
            dead = await _raw_dead(redis, prefix, partitions)
        by_partition: dict[int, list[DeadEvent]] = defaultdict(list)
        for d in dead:
            by_partition[d.partition].append(d)
            if not d.error:
                c.fail(f"a dead entry of partition {d.partition} has no reason")
        garbage_ids = {g.event_id for g in garbage if g.event_id is not None}
        for g in garbage:
            c.checked += 1
            if await redis.zscore(PartitionKeys(prefix, g.partition).due, g.blob) is not None:
                c.fail(f"garbage '{g.name}' is still waiting in partition {g.partition}")
            pool = by_partition[g.partition]
            match = next(
                (d for d in pool if d.member == g.member or (g.event_id and d.id == g.event_id)),
                None,
            )
            if match is None and g.event_id is None:  # no id to know it by: any unknown one
                match = next((d for d in pool if d.id not in garbage_ids), None)
            if g.expect == "dead" and match is None:
                c.fail(f"garbage '{g.name}' is not in the dead letters of {g.partition}")
            if match is not None:
                pool.remove(match)
        for p, left in by_partition.items():
            for d in left:
                c.fail(f"a real event is dead in partition {p}: {d.id} {d.error[:80]}")
        c.notes.extend(sorted({d.error[:70] for d in dead})[:12])
    finally:
        await redis.aclose()
    return c


async def _raw_dead(redis: Redis, prefix: str, partitions: int) -> list[DeadEvent]:
    """The dead-letter sets read without the queue's decoding (ids unknown)."""
    from common.queue.constants import MEMBER_LEN

    out = []
    for p in range(partitions):
        rows: list[Any] = await redis.zrange(PartitionKeys(prefix, p).dead, 0, -1, withscores=True)
        for entry, died in rows:
            out.append(DeadEvent(p, 0, bytes(entry)[:MEMBER_LEN], "?", 0, int(died), None))
    return out


def check_logs(log_dir: Path, ledger: Ledger, extra: tuple[Path, ...] = ()) -> Check:
    c = Check(
        "no_secrets_in_logs",
        "no process log (web, task servers, PostgreSQL) holds a player's password, "
        "session token or password hash",
    )
    secrets_ = {p.password: f"password of {p.name}" for p in ledger.players}
    secrets_.update({p.token: f"token of {p.name}" for p in ledger.players if p.token})
    hashed = re.compile(rb"\$argon2id\$v=|scrypt\$\d+\$")  # either scheme's stored form
    for path in sorted({*log_dir.rglob("*.log"), *(p for p in extra if p.exists())}):
        data = path.read_bytes()
        c.checked += 1
        if hashed.search(data):
            c.fail(f"{path.name} holds a password hash")
        text = data.decode(errors="replace")
        for secret, what in secrets_.items():
            if secret in text:
                c.fail(f"{path.name} holds the {what}")
    return c
