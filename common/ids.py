"""Time-ordered 63-bit ids for events and other rows created at high rates.

Layout: 41 bits of milliseconds since 2024-01-01, 10 bits of node, 12 bits of
sequence. A node is one process of a world: ``common.node_lease`` leases one
in Redis when a web or task server starts, so no two live processes of a
world share it (until then, and where no lease can be had, it is random).
Every generator made without a fixed ``node`` shares the process's node and
sequence, so ids made by one process strictly increase and never repeat, and
ids made by different processes in the same millisecond are ordered by node.
That order is the *sequence* in the queue's tie rule.
"""

from __future__ import annotations

import os
import secrets
import threading

from common.clock import SYSTEM_CLOCK, Clock

ID_EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
NODE_BITS = 10
NODE_COUNT = 1 << NODE_BITS
_SEQ_BITS = 12
_SEQ_MASK = (1 << _SEQ_BITS) - 1
_NODE_BITS = NODE_BITS  # (older name)


class _Sequence:
    """The node and the last (ms, sequence) handed out; shared by the generators of a node."""

    __slots__ = ("last_ms", "lock", "node", "seq")

    def __init__(self, node: int) -> None:
        if not 0 <= node < NODE_COUNT:
            raise ValueError(f"node must be in 0..{NODE_COUNT - 1}, got {node}")
        self.node = node
        self.last_ms = 0
        self.seq = 0
        self.lock = threading.Lock()

    def move_to(self, node: int) -> None:
        """Use ``node`` from now on; the next id still exceeds every earlier one."""
        if not 0 <= node < NODE_COUNT:
            raise ValueError(f"node must be in 0..{NODE_COUNT - 1}, got {node}")
        with self.lock:
            if node != self.node:
                self.node = node
                if self.last_ms or self.seq:  # a lower node in the same ms would sort lower
                    self.last_ms += 1
                    self.seq = 0


_PROCESS = _Sequence(secrets.randbelow(NODE_COUNT))


def _after_fork() -> None:
    # a forked child is another process: it must not go on with its parent's node
    _PROCESS.lock = threading.Lock()
    _PROCESS.node = secrets.randbelow(NODE_COUNT)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def process_node() -> int:
    """The node of this process's ids (leased, or random until a lease is had)."""
    return _PROCESS.node


def set_process_node(node: int) -> None:
    """Make ``node`` the node of every generator made without a fixed one (a node leased for
    this process, see ``common.node_lease``). Ids keep increasing across the change."""
    _PROCESS.move_to(node)


class IdGenerator:
    """Ids of this process: ``node=None`` (the default) shares the process's node and
    sequence with every other such generator; a fixed ``node`` has its own (tests)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, node: int | None = None) -> None:
        self._clock = clock
        self._state = _PROCESS if node is None else _Sequence(node)

    @property
    def node(self) -> int:
        return self._state.node

    def next_id(self) -> int:
        return self.next_ids(1)[0]

    def next_ids(self, count: int) -> list[int]:
        st = self._state
        with st.lock:
            ms = max(self._clock.now_ms() - ID_EPOCH_MS, st.last_ms)
            if ms != st.last_ms:
                st.last_ms, st.seq = ms, 0
            out = []
            prefix_shift = NODE_BITS + _SEQ_BITS
            node = st.node << _SEQ_BITS
            for _ in range(count):
                if st.seq > _SEQ_MASK:  # 4096 ids in one ms: borrow the next ms
                    st.last_ms += 1
                    st.seq = 0
                out.append((st.last_ms << prefix_shift) | node | st.seq)
                st.seq += 1
            return out


def id_created_ms(event_id: int) -> int:
    return (event_id >> (NODE_BITS + _SEQ_BITS)) + ID_EPOCH_MS
