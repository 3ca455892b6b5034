"""The timed-event queue on Redis sorted sets (see ``constants`` for the key layout)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
from collections.abc import Iterable, Sequence
from typing import Any, cast

import msgpack
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from common.clock import Clock
from common.ids import IdGenerator
from common.queue import codec
from common.queue.codec import HEADER_MEMORY
from common.queue.constants import (
    BATCH_SIZE,
    BODY_MAX,
    CLAIM_LEASE_MS,
    DUE_MS_MAX,
    KIND_MAX_LEN,
    MAX_AHEAD_MS,
    MEMBER_LEN,
    PRIORITY_BIAS,
    PRIORITY_MAX,
    PRIORITY_MIN,
    PartitionKeys,
)
from common.queue.errors import MalformedEvent, ScheduleError
from common.queue.events import Claim, DeadEvent, Event, NewEvent, PartitionStats
from common.queue.line import Line, pack_command
from common.queue.line import supports as line_supported
from common.queue.policy import RetryPolicy
from common.queue.scripts import Script, load_script
from common.redis_conn import AnyRedis
from common.snapshot_versions import ScriptRunner

MAX_CLAIM = 4000  # Lua's unpack() limit bounds one claim
_IDLE_LINES = 4  # connections kept for concurrent schedule_many calls
_SEND_CHUNK = 2000  # events encoded per write of schedule_many
_ID_MAX = (1 << 63) - 1

_SCHEDULE = load_script("schedule.lua")
_CLAIM = load_script("claim.lua")
_ACK = load_script("ack.lua")
_RENEW = load_script("renew.lua")
_RETRY = load_script("retry.lua")
_RELEASE = load_script("release.lua")
_RECOVER = load_script("recover.lua")
_CANCEL = load_script("cancel.lua")
_RESCHEDULE = load_script("reschedule.lua")
_REQUEUE_DEAD = load_script("requeue_dead.lua")
_DROP_DEAD = load_script("drop_dead.lua")
_MISSING = load_script("missing.lua")
_STATS = load_script("stats.lua")
SCRIPTS: tuple[Script, ...] = (
    _SCHEDULE, _CLAIM, _ACK, _RENEW, _RETRY, _RELEASE, _RECOVER, _CANCEL, _RESCHEDULE,
    _REQUEUE_DEAD, _DROP_DEAD, _MISSING, _STATS,
)  # fmt: skip

_packb = msgpack.Packer().pack  # msgpack.packb builds a Packer per call: twice as slow
_pack_envelope = msgpack.Packer(use_bin_type=False).pack


def _envelope(items: Any) -> bytes:
    # Lua's cmsgpack predates msgpack's bin type: send bytes as raw strings.
    return _pack_envelope(items)


def _score(value: bytes | None) -> int | None:
    """A sorted-set score as whole ms; None for none or a non-finite one (no time at all)."""
    if value is None:
        return None
    score = float(value)
    return int(score) if math.isfinite(score) else None


def _pairs(flat: list[Any]) -> list[tuple[bytes, str]]:
    """[member, reason, ...] of a script reply as (member, reason) pairs."""
    pairs = zip(flat[::2], flat[1::2], strict=True)
    return [(bytes(m), r.decode(errors="replace")) for m, r in pairs]


class EventQueue:
    """Timed events in Redis, split into ``partitions`` by village.

    **Tie rule.** Within a partition events run by ``(due_ms, priority, id)``:
    the earlier due time first; among equal due times the lower priority
    first; among equal priorities the lower id. Ids come from
    ``common.ids.IdGenerator`` and grow with creation time, so among events
    due in the same ms with the same priority the one scheduled first runs
    first. A due time in the past runs at once (in that same order).

    All events of a village land in partition ``village_id % partitions``, and
    each partition is worked by one worker at a time, so a village's events
    never run concurrently. Every partition's keys share one hash tag: each
    operation is one Lua script on one Redis Cluster slot.

    ``schedule``/``schedule_many`` create *in-memory* events: Redis is their
    only record, so they are lost if Redis loses its data. Events that must
    survive that are written to the DB with ``durable.add_durable_events`` in
    the command's transaction and indexed here with ``index`` after the commit.
    Durable events are found by id at once; cancelling or rescheduling an
    in-memory event scans its partition.

    The client must not decode responses. On a single Redis server the queue
    opens a few connections of its own for its hot paths: call ``aclose()``
    when done with it (the client itself is the caller's to close).
    """

    def __init__(
        self,
        redis: AnyRedis,
        *,
        prefix: str,
        partitions: int,
        clock: Clock,
        ids: IdGenerator | None = None,
        max_ahead_ms: int = MAX_AHEAD_MS,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        encoder = redis.get_encoder()
        if encoder.decode_responses:
            raise ValueError("the event queue needs a Redis client with decode_responses=False")
        self.redis = redis
        self.prefix = prefix
        self.partitions = partitions
        self.clock = clock
        self.ids = ids or IdGenerator(clock)
        self.max_ahead_ms = max_ahead_ms
        self._keys = [PartitionKeys(prefix, p) for p in range(partitions)]
        self._plain = line_supported(redis)  # raw lines need one plain server
        self._lines: list[Line] = []  # idle connections of schedule_many
        self._token_base = b"%010x" % secrets.randbits(40)
        self._token_seq = 0

    # --- helpers -------------------------------------------------------------

    def keys(self, partition: int) -> PartitionKeys:
        return self._keys[partition]

    def partition_of(self, village_id: int) -> int:
        """The partition of every event of ``village_id``."""
        return village_id % self.partitions

    async def load_scripts(self) -> None:
        """Load every script (on every primary of a cluster); calls also load on demand."""
        for script in SCRIPTS:
            await script.load(self.redis)

    async def _pipelined(
        self,
        script: Script,
        calls: Sequence[tuple[Sequence[Any], Sequence[Any]]],
        *,
        raise_on_error: bool = True,
    ) -> list[Any]:
        """Run ``script`` once per (keys, args): one round trip (concurrent calls on a cluster,
        whose pipelines refuse scripts). ``raise_on_error=False``: a call's Redis error is
        returned in its place."""
        if isinstance(self.redis, RedisCluster):
            return list(
                await asyncio.gather(
                    *(script(self.redis, k, a) for k, a in calls),
                    return_exceptions=not raise_on_error,
                )
            )
        for attempt in range(2):
            async with self.redis.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    pipe.evalsha(script.sha, len(keys), *keys, *args)
                results: list[Any] = await pipe.execute(raise_on_error=False)
            if attempt == 0 and any(isinstance(r, NoScriptError) for r in results):
                await script.load(self.redis)
                continue  # scripts are idempotent for the calls that did run
            for result in results:
                if isinstance(result, Exception) and (
                    raise_on_error or not isinstance(result, ResponseError)
                ):
                    raise result
            return results
        raise AssertionError("unreachable")

    # --- scheduling ----------------------------------------------------------

    async def schedule(self, event: NewEvent) -> int:
        """Schedule one in-memory event (no DB row); return its id. See ``schedule_many``."""
        return (await self.schedule_many([event]))[0]

    async def schedule_many(self, events: Sequence[NewEvent]) -> list[int]:
        """Schedule in-memory events (no DB row); return their ids in order.

        All or nothing: raises ``ScheduleError`` before anything is sent for
        a due time more than ``max_ahead_ms`` ahead or negative, a priority
        outside SMALLINT, an empty or over-long kind, or a payload msgpack
        cannot encode.
        """
        if not events:
            return []
        now = self.clock.now_ms()
        latest = min(now + self.max_ahead_ms, DUE_MS_MAX)
        ids = self.ids.next_ids(len(events))
        bodies = []
        packb = _packb
        for i, event in enumerate(events):
            eid = event.id
            if eid is None:
                eid = ids[i]
            else:
                ids[i] = eid
            due = event.due_ms
            prio = event.priority
            kind = event.kind
            if not (
                type(due) is int
                and 0 <= due <= latest
                and type(prio) is int
                and PRIORITY_MIN <= prio <= PRIORITY_MAX
                and type(kind) is str
                and 0 < len(kind) <= KIND_MAX_LEN
                and type(event.village_id) is int
                and type(event.payload) is dict
                and type(eid) is int
                and 0 < eid <= _ID_MAX
            ):
                raise _invalid(event, now, latest)
            try:
                body = packb([eid, kind, event.village_id, due, prio, event.payload, 0, False])
            except (TypeError, ValueError, OverflowError) as exc:
                raise ScheduleError(f"event {kind!r}: payload cannot be encoded: {exc}") from None
            if len(body) > BODY_MAX:
                raise ScheduleError(f"event {kind!r}: payload too large ({len(body)} bytes)")
            bodies.append(body)
        # Nothing can fail from here on: encode the rest chunk by chunk and send each
        # chunk at once, so Redis stores one chunk while Python encodes the next.
        if self._plain:
            await self._add_plain(events, ids, bodies)
        else:
            groups: dict[int, list[bytes]] = {}
            earliest: dict[int, int] = {}
            for event, eid, body in zip(events, ids, bodies, strict=True):
                p = event.village_id % self.partitions
                due = event.due_ms
                head = HEADER_MEMORY % (event.priority + PRIORITY_BIAS, eid, due, len(body))
                groups.setdefault(p, []).append(head + body)
                earliest[p] = min(earliest.get(p, due), due)
            await self._add(groups, earliest, nx=False)
        return ids

    async def _add_plain(
        self, events: Sequence[NewEvent], ids: list[int], bodies: list[bytes]
    ) -> None:
        """One ZADD per partition and one wake-up PUBLISH per chunk, packed in C."""
        line = self._lines.pop() if self._lines else Line(self.redis)  # type: ignore[arg-type]
        parts = self.partitions
        header = HEADER_MEMORY
        keys = self._keys
        failure: ResponseError | None = None
        try:
            for start in range(0, len(events), _SEND_CHUNK):
                stop = start + _SEND_CHUNK
                groups: dict[int, list[Any]] = {}
                earliest: dict[int, int] = {}
                for event, eid, body in zip(
                    events[start:stop], ids[start:stop], bodies[start:stop], strict=True
                ):
                    due = event.due_ms
                    p = event.village_id % parts
                    zadd = groups.get(p)
                    if zadd is None:
                        zadd = groups[p] = ["ZADD", keys[p].due]
                        earliest[p] = due
                    elif due < earliest[p]:
                        earliest[p] = due
                    zadd.append(due)
                    zadd.append(
                        header % (event.priority + PRIORITY_BIAS, eid, due, len(body)) + body
                    )
                commands = [pack_command(tuple(zadd)) for zadd in groups.values()]
                news = b",".join([keys[p].wake_message(due) for p, due in earliest.items()])
                commands.append(pack_command(("PUBLISH", keys[0].channel, news)))
                await line.send(b"".join(commands), replies=len(commands))
            while line.pending:
                try:
                    await line.read()
                except ResponseError as exc:
                    failure = failure or exc
        except BaseException:
            await line.close()
            raise
        if len(self._lines) < _IDLE_LINES:
            self._lines.append(line)
        else:
            await line.close()
        if failure is not None:
            raise failure

    async def aclose(self) -> None:
        """Close the queue's own connections (the Redis client stays open)."""
        lines, self._lines = self._lines, []
        for line in lines:
            await line.close()

    async def index(self, events: Iterable[Event]) -> int:
        """Index durable events (DB rows already committed) by due time; return how many were new.

        Idempotent: an event Redis knows by id (pending or dead) is left alone,
        so the reconciler and the committing command can both index it. (One
        in flight at that moment would be delivered twice; its DB row makes the
        second delivery a no-op.)
        """
        groups, earliest = self._grouped(events)
        if not groups:
            return 0
        return await self._add(groups, earliest, nx=True)

    async def index_on(self, client: ScriptRunner, events: Iterable[Event]) -> int:
        """``index`` on the web tier's pipelined connection (one Redis, not a cluster): it goes
        out in the same write as the other commands of its loop iteration."""
        groups, earliest = self._grouped(events)
        calls = self._schedule_calls(groups, earliest, nx=True)
        added = await asyncio.gather(
            *(client.eval_script(_SCHEDULE.text, keys, args) for keys, args in calls)
        )
        return sum(int(n) for n in added)

    def _grouped(self, events: Iterable[Event]) -> tuple[dict[int, list[bytes]], dict[int, int]]:
        groups: dict[int, list[bytes]] = {}
        earliest: dict[int, int] = {}
        for event in events:
            p = event.village_id % self.partitions
            groups.setdefault(p, []).append(codec.encode_event(event))
            if p not in earliest or event.due_ms < earliest[p]:
                earliest[p] = event.due_ms
        return groups, earliest

    def _schedule_calls(
        self, groups: dict[int, list[bytes]], earliest: dict[int, int], nx: bool
    ) -> list[tuple[tuple[str, str], tuple[str | bytes | int, ...]]]:
        flag = b"1" if nx else b"0"
        calls: list[tuple[tuple[str, str], tuple[str | bytes | int, ...]]] = []
        for p, blobs in groups.items():
            k = self._keys[p]
            args = (k.channel, flag, earliest[p], k.wake_message(earliest[p]), _envelope(blobs))
            calls.append(((k.due, k.byid), args))
        return calls

    async def _add(self, groups: dict[int, list[bytes]], earliest: dict[int, int], nx: bool) -> int:
        calls = self._schedule_calls(groups, earliest, nx)
        if len(calls) == 1:
            keys, args = calls[0]
            return int(await _SCHEDULE(self.redis, keys, args))
        return sum(int(r) for r in await self._pipelined(_SCHEDULE, calls))

    # --- claiming --------------------------------------------------------------

    def claim_request(
        self,
        partition: int,
        limit: int,
        lease_ms: int,
        ack: Sequence[bytes] = (),
        ahead_ms: int = 0,
    ) -> tuple[bytes, tuple[str, ...], tuple[Any, ...]]:
        """(batch token, keys, args) of one claim script call.

        ``ahead_ms`` > 0 also claims the events due within that many ms from now: the
        caller holds them until due (``PartitionWorker``). The script takes "now" to be
        that moment, so a batch whose lease ends within ``ahead_ms`` counts as expired
        already: the leases last thousands of times longer.
        """
        if not 1 <= limit <= MAX_CLAIM:
            raise ValueError(f"limit must be 1..{MAX_CLAIM}")
        k = self._keys[partition]
        now = self.clock.now_ms()
        self._token_seq += 1
        token = b"%s.%x" % (self._token_base, self._token_seq)
        keys = (k.due, k.byid, k.inflight, k.batches, k.dead, k.deadinfo)
        until = now + ahead_ms
        return token, keys, (until, limit, token, now + lease_ms, b",".join(ack), DUE_MS_MAX)

    def claim_result(self, partition: int, token: bytes, reply: list[Any]) -> Claim:
        """Decode the reply of a claim script call."""
        n, batch, head, lease, buried = reply
        dead = _pairs(buried) if buried else []
        if not n:
            return Claim(partition, b"", [], [], _score(head), _score(lease), dead)
        events = codec.decode_stream(batch, n)
        bad: list[tuple[bytes, str]] = []
        if events is None:  # a malformed entry: decode blob by blob to name it
            events, bad = codec.decode_many(codec.split(batch))
        return Claim(partition, token, events, bad, _score(head), _score(lease), dead)

    async def claim(
        self,
        partition: int,
        limit: int = BATCH_SIZE,
        lease_ms: int = CLAIM_LEASE_MS,
        *,
        ack: Sequence[bytes] = (),
    ) -> Claim:
        """Move up to ``limit`` due events of ``partition`` to in-flight, in run order.

        The batch is leased for ``lease_ms``: unless acked (or renewed) by then,
        its events return to *due*. ``ack`` names finished batches to ack in
        the same round trip. Undecodable entries come back in ``Claim.bad`` (for
        ``bury``); entries that are not framed as a blob, or scored outside
        0..``DUE_MS_MAX``, go to *dead* in the claim itself (``Claim.buried``).
        """
        token, keys, args = self.claim_request(partition, limit, lease_ms, ack)
        return self.claim_result(partition, token, await _CLAIM(self.redis, keys, args))

    async def ack(self, partition: int, token: bytes) -> bool:
        """Forget a finished batch. False if its lease had expired: its events went back to
        *due* and run again (harmless for durable events, whose DB record decides)."""
        k = self._keys[partition]
        return bool(await _ACK(self.redis, (k.inflight, k.batches), (token,)))

    async def renew(self, partition: int, tokens: Sequence[bytes], lease_ms: int) -> int:
        """Extend the lease of in-flight batches; return how many were still in flight."""
        if not tokens:
            return 0
        k = self._keys[partition]
        deadline = self.clock.now_ms() + lease_ms
        return int(await _RENEW(self.redis, (k.inflight,), (deadline, *tokens)))

    async def release(self, partition: int, token: bytes) -> int:
        """Return an unprocessed batch to *due* now; return its event count."""
        k = self._keys[partition]
        return int(await _RELEASE(self.redis, (k.due, k.byid, k.inflight, k.batches), (token,)))

    async def recover(self, partition: int) -> int:
        """Return every in-flight batch of ``partition`` to *due* (its previous owner is gone)."""
        k = self._keys[partition]
        return int(await _RECOVER(self.redis, (k.due, k.byid, k.inflight, k.batches), ()))

    async def _move(self, partition: int, token: bytes, entries: list[list[Any]]) -> int:
        if not entries:
            return 0
        k = self._keys[partition]
        now = self.clock.now_ms()
        keys = (k.due, k.byid, k.batches, k.dead, k.deadinfo)
        return int(await _RETRY(self.redis, keys, (now, token, _envelope(entries))))

    async def retry(
        self,
        partition: int,
        token: bytes,
        failures: Sequence[tuple[Event, str]],
        policy: RetryPolicy,
    ) -> tuple[int, int]:
        """Take failed events out of batch ``token``: retry after a backoff, or dead letters.

        Returns (retried, dead). Each failure counts one attempt; the event
        that reaches ``policy.max_attempts`` goes to *dead* with its error.
        """
        now = self.clock.now_ms()
        entries: list[list[Any]] = []
        retried = dead = 0
        for event, error in failures:
            failures_so_far = event.attempts + 1
            m = codec.member(event.priority, event.id)
            if policy.gives_up(failures_so_far):
                blob = codec.encode_event(event, attempts=failures_so_far)
                info = codec.pack([error, failures_so_far, now])
                entries.append([m, -1, blob, info])
                dead += 1
            else:
                due = now + policy.delay_ms(failures_so_far)
                # the backoff moves when it runs (the score, also in the header, for a
                # requeue after a lease expiry), never its due time: that is game time
                blob = codec.encode_event(event, attempts=failures_so_far, score_ms=due)
                entries.append([m, due, blob, b""])
                retried += 1
        moved = await self._move(partition, token, entries)
        if moved != len(entries):  # the batch expired meanwhile: its events run again anyway
            return 0, 0
        return retried, dead

    async def bury(self, partition: int, token: bytes, bad: Sequence[tuple[bytes, str]]) -> int:
        """Send undecodable entries of batch ``token`` to *dead* with their reason (the raw
        blob is kept there for inspection)."""
        now = self.clock.now_ms()
        return await self._move(
            partition, token, [[m, -1, b"", codec.pack([reason, 0, now])] for m, reason in bad]
        )

    async def defer(self, partition: int, token: bytes, moves: Sequence[tuple[Event, int]]) -> int:
        """Put events of batch ``token`` back to *due* at new times without counting a failure."""
        entries: list[list[Any]] = [
            [codec.member(e.priority, e.id), due, codec.encode_event(e, due_ms=due), b""]
            for e, due in moves
        ]
        return await self._move(partition, token, entries)

    async def hold(self, partition: int, token: bytes, events: Sequence[Event]) -> int:
        """Put events of batch ``token`` back to *due* as they were (blob, score, place in the
        run order, attempts): not a failure, not a reschedule."""
        entries: list[list[Any]] = [[codec.member(e.priority, e.id), -2, b"", b""] for e in events]
        return await self._move(partition, token, entries)

    # --- cancel and reschedule -------------------------------------------------

    async def cancel(self, village_id: int, event_id: int) -> bool:
        """Cancel a pending event. True: it will not run. False: it already ran, is
        running right now, is dead, or never existed.

        Atomic against ``claim``: exactly one of the two gets a pending event.
        Durable events are found by id at once; an in-memory one with a scan of
        its partition. For durable events call ``durable.cancel_durable`` in the
        command's transaction first; the DB then decides, and this only tidies
        Redis (a claimed copy finds no row and is acked without effect).
        """
        k = self._keys[self.partition_of(village_id)]
        keys = (k.due, k.byid, k.deadinfo)
        return int(await _CANCEL(self.redis, keys, (codec.id_key(event_id),))) == 1

    async def _find_pending(self, k: PartitionKeys, id16: bytes) -> bytes | None:
        blob = cast("bytes | None", await self.redis.hget(k.byid, id16))  # type: ignore[misc]
        if blob is not None:
            return blob
        async for member, _ in self.redis.zscan_iter(k.due, match=b"??????" + id16 + b"*"):  # type: ignore[attr-defined]
            return bytes(member)
        return None

    async def reschedule(self, village_id: int, event_id: int, due_ms: int) -> bool:
        """Move a pending event to ``due_ms``. True: moved. False: it already ran, is
        running, is dead, or never existed. Atomic against ``claim``."""
        now = self.clock.now_ms()
        latest = min(now + self.max_ahead_ms, DUE_MS_MAX)
        if type(due_ms) is not int or not 0 <= due_ms <= latest:
            raise ScheduleError(_due_message(due_ms, now, latest))
        k = self._keys[self.partition_of(village_id)]
        id16 = codec.id_key(event_id)
        for _ in range(10):  # compare-and-set: read again only if the event changed meanwhile
            blob = await self._find_pending(k, id16)
            if blob is None:
                return False
            try:
                new_blob = codec.encode_event(codec.decode(blob), due_ms=due_ms)
            except MalformedEvent:
                return False
            result = int(
                await _RESCHEDULE(
                    self.redis,
                    (k.due, k.byid, k.deadinfo),
                    (id16, blob, new_blob, due_ms, k.channel, k.wake_message(due_ms)),
                )
            )
            if result != -3:
                return result == 1
        return False

    # --- dead letters -----------------------------------------------------------

    async def dead(self, partition: int | None = None, limit: int = 100) -> list[DeadEvent]:
        """Dead events (oldest death first), at most ``limit`` per partition."""
        parts = range(self.partitions) if partition is None else [partition]
        out: list[DeadEvent] = []
        for p in parts:
            k = self._keys[p]
            rows = cast(
                "list[tuple[bytes, float]]",
                await self.redis.zrange(k.dead, 0, limit - 1, withscores=True),  # type: ignore[misc]
            )
            if not rows:
                continue
            ids = [b[6:MEMBER_LEN] for b, _ in rows]
            infos = cast(
                "list[bytes | None]",
                await self.redis.hmget(k.deadinfo, ids),  # type: ignore[misc]
            )
            for (blob, died), info in zip(rows, infos, strict=True):
                out.append(_dead_event(p, blob, int(died), info))
        return out

    async def _find_dead(self, k: PartitionKeys, id16: bytes) -> bytes | None:
        async for member, _ in self.redis.zscan_iter(k.dead, match=b"??????" + id16 + b"*"):  # type: ignore[attr-defined]
            return bytes(member)
        return None

    async def find_dead(self, event_id: int) -> int | None:
        """The partition holding dead event ``event_id``, or None."""
        id16 = codec.id_key(event_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            for p in range(self.partitions):
                pipe.hexists(self._keys[p].deadinfo, id16)
            found = await pipe.execute()
        for p, hit in enumerate(found):
            if hit:
                return p
        return None

    async def requeue_dead(self, partition: int, event_id: int) -> bool:
        """Run a dead event again now, with its attempt count reset."""
        k = self._keys[partition]
        id16 = codec.id_key(event_id)
        blob = await self._find_dead(k, id16)
        if blob is None:
            return False
        now = self.clock.now_ms()
        try:
            # runs now, as of its own due time (game time)
            new_blob = codec.encode_event(codec.decode(blob), attempts=0, score_ms=now)
        except MalformedEvent:
            new_blob = blob  # requeue as is; it will come back here with its reason
        keys = (k.due, k.byid, k.dead, k.deadinfo)
        args = (id16, blob, new_blob, now, k.channel, k.wake_message(now))
        return int(await _REQUEUE_DEAD(self.redis, keys, args)) == 1

    async def drop_dead(self, partition: int, event_id: int) -> bool:
        """Delete a dead event for good (a durable one also needs its DB row deleted)."""
        k = self._keys[partition]
        id16 = codec.id_key(event_id)
        blob = await self._find_dead(k, id16)
        if blob is None:
            return False
        keys = (k.dead, k.byid, k.deadinfo)
        return int(await _DROP_DEAD(self.redis, keys, (id16, blob))) == 1

    # --- reconciliation and stats ------------------------------------------------

    async def missing(self, partition: int, event_ids: Sequence[int]) -> list[int]:
        """The durable event ids among ``event_ids`` that ``partition`` does not know (not
        pending, in flight or dead)."""
        if not event_ids:
            return []
        k = self._keys[partition]
        ids = [codec.id_key(i) for i in event_ids]
        out = await _MISSING(self.redis, (k.byid, k.inflight, k.batches), ids)
        return [int(i, 16) for i in out]

    async def _bad_keys(self, partition: int) -> str:
        """Which of a partition's keys hold the wrong type (what the stats script trips on)."""
        k = self._keys[partition]
        bad = []
        for field, expected in _KEY_TYPES.items():
            key = getattr(k, field)
            found = await self.redis.type(key)
            found = found.decode() if isinstance(found, bytes) else str(found)
            if found not in (expected, "none"):
                bad.append(f"{key} is a {found}, not a {expected}")
        what = "; ".join(bad) or "a key of the wrong type"
        return f"unreadable: {what} (delete or repair it)"

    async def stats(self, partitions: Iterable[int] | None = None) -> list[PartitionStats]:
        """Depth, in-flight, dead and lag (now - oldest due, 0 if none overdue) per partition.

        A partition whose keys cannot be read is reported with ``error`` set and zeros, so
        one bad key hides no other partition's figures."""
        parts = list(range(self.partitions) if partitions is None else partitions)
        if not parts:
            return []
        now = self.clock.now_ms()
        calls = []
        for p in parts:
            k = self._keys[p]
            calls.append(((k.due, k.inflight, k.batches, k.dead), (now,)))
        rows = await self._pipelined(_STATS, calls, raise_on_error=False)
        out = []
        for p, row in zip(parts, rows, strict=True):
            if isinstance(row, ResponseError):  # one bad key: name it, report the rest
                out.append(PartitionStats(p, 0, 0, 0, 0, None, 0, await self._bad_keys(p)))
                continue
            depth, ready, inflight, dead, head = row
            oldest = _score(head)
            lag = max(0, now - oldest) if oldest is not None else 0
            out.append(PartitionStats(p, depth, ready, inflight, dead, oldest, lag))
        return out


_KEY_TYPES = {"due": "zset", "inflight": "zset", "batches": "hash", "dead": "zset"}


def _dead_event(partition: int, blob: bytes, died_ms: int, info: bytes | None) -> DeadEvent:
    error, attempts = "unknown", 0
    if info is not None:
        try:
            error, attempts, _ = codec.unpack(info)
        except Exception:
            error = f"unreadable dead-letter info {info[:64]!r}"
    event: Event | None = None
    with contextlib.suppress(MalformedEvent):
        event = codec.decode(blob)
    try:
        _, event_id = codec.split_member(blob[:MEMBER_LEN])
    except ValueError:
        event_id = 0
    member = blob[:MEMBER_LEN]
    return DeadEvent(partition, event_id, member, str(error), int(attempts), died_ms, event)


def _due_message(due_ms: object, now: int, latest: int) -> str:
    if type(due_ms) is not int:
        return f"due_ms must be an int of ms since the epoch, got {due_ms!r}"
    if due_ms < 0:
        return f"due_ms {due_ms} is negative"
    ahead_days = (due_ms - now) / 86_400_000
    return (
        f"due_ms {due_ms} is {ahead_days:.0f} days ahead; the queue accepts at most "
        f"{(latest - now) / 86_400_000:.0f} days (is it in seconds instead of ms?)"
    )


def _invalid(event: NewEvent, now: int, latest: int) -> ScheduleError:
    """Name the first thing wrong with ``event`` (the slow path of ``schedule_many``)."""
    kind = event.kind
    if type(kind) is not str or not 0 < len(kind) <= KIND_MAX_LEN:
        return ScheduleError(f"kind must be a str of 1..{KIND_MAX_LEN} chars, got {kind!r}")
    due = event.due_ms
    if type(due) is not int or not 0 <= due <= latest:
        return ScheduleError(f"event {kind!r}: {_due_message(due, now, latest)}")
    if type(event.priority) is not int or not PRIORITY_MIN <= event.priority <= PRIORITY_MAX:
        return ScheduleError(
            f"event {kind!r}: priority must be an int in {PRIORITY_MIN}..{PRIORITY_MAX}, "
            f"got {event.priority!r}"
        )
    if type(event.village_id) is not int:
        return ScheduleError(f"event {kind!r}: village_id must be an int, got {event.village_id!r}")
    if type(event.payload) is not dict:
        return ScheduleError(f"event {kind!r}: payload must be a dict, got {event.payload!r}")
    return ScheduleError(f"event {kind!r}: id must be an int in 1..2**63-1, got {event.id!r}")


def check_new_event(event: NewEvent, now: int, latest: int) -> None:
    """Raise ScheduleError unless ``event`` can be scheduled (due at most ``latest``)."""
    eid = event.id
    if not (
        type(event.due_ms) is int
        and 0 <= event.due_ms <= latest
        and type(event.priority) is int
        and PRIORITY_MIN <= event.priority <= PRIORITY_MAX
        and type(event.kind) is str
        and 0 < len(event.kind) <= KIND_MAX_LEN
        and type(event.village_id) is int
        and type(event.payload) is dict
        and (eid is None or (type(eid) is int and 0 < eid <= _ID_MAX))
    ):
        raise _invalid(event, now, latest)
