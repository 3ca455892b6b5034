"""Task-server tuning that is not world configuration: defaults from the queue constants.

Operators rarely change these; tests shorten the leases and intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.queue.constants import (
    BATCH_SIZE,
    CLAIM_LEASE_MS,
    MARKER_CHECK_MS,
    MAX_IDLE_MS,
    PARTITION_HEARTBEAT_MS,
    PARTITION_LEASE_TTL_MS,
    RECONCILE_EVERY_MS,
    RENEW_EVERY_MS,
    STATS_EVERY_S,
)


@dataclass(frozen=True, slots=True)
class TaskServerConfig:
    batch_size: int = BATCH_SIZE  # events per claim
    claim_lease_ms: int = CLAIM_LEASE_MS  # in-flight batch lease
    renew_every_ms: int = RENEW_EVERY_MS
    max_idle_ms: int = MAX_IDLE_MS
    prefetch: bool = True  # while a backlog drains, claim the next batch during this one
    min_claim_interval_ms: int = 5  # a partition with events flowing in is claimed this often
    # A claim also takes the events due within this many ms and the worker runs each at
    # its due time: under a steady flow the claims come ahead of time and fill up like a
    # backlog's, instead of each returning the few events that came due since the last one:
    # a claim's fixed cost (its round trip, the batch's order check, the ack) is paid once
    # per this many ms per busy partition, however few events it carries. 0: claim only
    # what is due. Keep it far below the game's lookahead (``set_lookahead``).
    claim_ahead_ms: int = 50
    # Durable groups of one kind that wait together, from any of this process's
    # partitions, run as one transaction with one handler call (``common.queue.gathered``;
    # 0 slots: each worker commits its own groups). Groups handed over within
    # ``event_gather_ms`` of the last take wait for the next (a quiet process runs a group
    # at once; a whole ``event_batch`` waiting is taken at once); a take runs every kind
    # that waits, each in calls of at most ``event_batch`` events (and the handler's
    # ``max_batch``), side by side; at most ``event_slots`` takes run at once. The window
    # is what makes a flow of one or two events per partition batch at all: every durable
    # event may run up to that much later (a partition's events one after another, so a
    # few windows at the p99), for fewer transactions and statements. Keep it, with
    # ``claim_ahead_ms``, far below the game's lookahead (``set_lookahead``).
    event_slots: int = 4
    event_batch: int = BATCH_SIZE
    event_gather_ms: int = 50
    partition_lease_ttl_ms: int = PARTITION_LEASE_TTL_MS
    partition_heartbeat_ms: int = PARTITION_HEARTBEAT_MS
    reconcile_every_ms: int = RECONCILE_EVERY_MS
    marker_check_ms: int = MARKER_CHECK_MS
    stats_every_s: float = STATS_EVERY_S
    shutdown_grace_s: float = 10.0  # a stopping worker may finish its batch for this long
    restart_backoff_s: float = 1.0  # a failed worker restarts after this, doubling to 30 s
    # Each claimed event allocates a few container objects; CPython's default gen-0 GC
    # threshold (700) then collects every ~250 events, which costs as much as decoding
    # them. The server raises it while it runs (None: leave the GC alone).
    gc_gen0_threshold: int | None = 50_000

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 4000:
            raise ValueError("batch_size must be 1..4000")
        if not (0 <= self.event_slots <= 64 and 1 <= self.event_batch <= 4000):
            raise ValueError("event_slots must be 0..64 and event_batch 1..4000")
        if not 0 <= self.event_gather_ms <= 1000:
            raise ValueError("event_gather_ms must be 0..1000")
        if not 0 <= self.claim_ahead_ms <= 1000:
            raise ValueError("claim_ahead_ms must be 0..1000")
        if self.partition_heartbeat_ms * 2 > self.partition_lease_ttl_ms:
            raise ValueError("the partition lease must last at least two heartbeats")
        if self.renew_every_ms * 2 > self.claim_lease_ms:
            raise ValueError("the claim lease must last at least two renewals")
