"""A worker's claim line: the next claim goes on the wire before the current batch runs."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

from common.queue import codec
from common.queue.eventqueue import _CLAIM, EventQueue
from common.queue.events import Claim
from common.queue.line import Line, pack_command
from common.queue.line import supports as line_supported


class ClaimLine:
    """Claims of one partition: ``send`` puts a claim on the wire and returns at once,
    ``receive`` waits for its reply, ``decode`` turns it into a ``Claim``.

    On a single server the claims use a ``Line`` of their own; on a cluster
    they run as tasks on the cluster client (routing, redirections).
    """

    def __init__(
        self, queue: EventQueue, partition: int, limit: int, lease_ms: int, ahead_ms: int = 0
    ) -> None:
        self.queue = queue
        self.partition = partition
        self.limit = limit
        self.lease_ms = lease_ms
        self.ahead_ms = ahead_ms  # also claim events due this soon (held until due)
        self._line = Line(queue.redis) if line_supported(queue.redis) else None  # type: ignore[arg-type]
        self._sent: list[tuple[bytes, list[bytes], Any]] = []  # (token, acked tokens, request)

    @property
    def pending(self) -> int:
        return len(self._sent)

    async def send(self, ack: list[bytes]) -> None:
        """Send a claim (acking the finished batches ``ack`` first, in the same script call)."""
        token, keys, args = self.queue.claim_request(
            self.partition, self.limit, self.lease_ms, ack, self.ahead_ms
        )
        if self._line is not None:
            packed = pack_command(("EVALSHA", _CLAIM.sha, len(keys), *keys, *args))
            await self._line.send(packed)
            self._sent.append((token, ack, packed))
        else:
            task = asyncio.ensure_future(_CLAIM(self.queue.redis, keys, args))
            self._sent.append((token, ack, task))
            for _ in range(3):  # let the task write its request before we go on
                await asyncio.sleep(0)

    async def receive(self) -> tuple[bytes, list[bytes], list[Any]]:
        """(token, the batches it acked, raw reply) of the oldest claim sent.

        An error reply (a key of the wrong type, say) raises and leaves the line in step
        for the claims sent after it; a broken line raises and forgets them all.
        """
        token, ack, request = self._sent.pop(0)
        if self._line is None:
            return token, ack, await request
        try:
            reply = await self._line.read()
        except NoScriptError:  # Redis restarted: load the script and ask again
            await _CLAIM.load(self.queue.redis)
            await self._line.send(request)
            reply = await self._line.read()
        except ResponseError:
            raise
        except BaseException:
            self._sent.clear()  # the line closed: no reply will come for them
            raise
        return token, ack, reply

    def decode(self, token: bytes, reply: list[Any]) -> Claim:
        return self.queue.claim_result(self.partition, token, reply)

    def ready_times(self, claim: Claim, reply: list[Any]) -> dict[int, int]:
        """Event id -> when it may run, for the retries of a batch claimed ahead.

        A retry waits in *due* under its backoff time (its header's score), later than
        its due time (game time, which the ``Event`` carries): claimed ahead, it must not
        run before that. Other events run at their due time and are not listed.
        """
        retries = {e.id for e in claim.events if e.attempts}
        if not self.ahead_ms or not retries:
            return {}
        ready: dict[int, int] = {}
        for blob in codec.split(reply[1]):
            try:
                event_id, score = int(blob[6:22], 16), int(blob[22:35])
            except ValueError:  # a malformed entry (``Claim.bad``): it does not run
                continue
            if event_id in retries:
                ready[event_id] = score
        return ready

    async def close(self) -> None:
        """Forget unread claims (their batches return to *due* when their lease expires)."""
        for _, _, request in self._sent:
            if isinstance(request, asyncio.Future):
                request.cancel()
                with contextlib.suppress(BaseException):
                    await request
        self._sent.clear()
        if self._line is not None:
            await self._line.close()
