"""Time-ordered 63-bit ids for events and other rows created at high rates.

Layout: 41 bits of milliseconds since 2024-01-01, 10 bits of node (random per
process), 12 bits of per-process sequence. Ids made by one process strictly
increase; ids made by different processes in the same millisecond are ordered
by node. That order is the *sequence* in the queue's tie rule.
"""

from __future__ import annotations

import secrets
import threading

from common.clock import SYSTEM_CLOCK, Clock

ID_EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
_NODE_BITS = 10
_SEQ_BITS = 12
_SEQ_MASK = (1 << _SEQ_BITS) - 1


class IdGenerator:
    def __init__(self, clock: Clock = SYSTEM_CLOCK, node: int | None = None) -> None:
        self._clock = clock
        self._node = secrets.randbelow(1 << _NODE_BITS) if node is None else node
        self._last_ms = 0
        self._seq = 0
        self._lock = threading.Lock()

    def next_id(self) -> int:
        return self.next_ids(1)[0]

    def next_ids(self, count: int) -> list[int]:
        with self._lock:
            ms = max(self._clock.now_ms() - ID_EPOCH_MS, self._last_ms)
            if ms != self._last_ms:
                self._last_ms, self._seq = ms, 0
            out = []
            prefix_shift = _NODE_BITS + _SEQ_BITS
            for _ in range(count):
                if self._seq > _SEQ_MASK:  # 4096 ids in one ms: borrow the next ms
                    self._last_ms += 1
                    self._seq = 0
                out.append((self._last_ms << prefix_shift) | (self._node << _SEQ_BITS) | self._seq)
                self._seq += 1
            return out


def id_created_ms(event_id: int) -> int:
    return (event_id >> (_NODE_BITS + _SEQ_BITS)) + ID_EPOCH_MS
