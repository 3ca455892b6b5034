"""Redis key names and the queue's tunable constants, in one place.

Every key of partition ``p`` carries the hash tag ``{qP}``, so a partition
lives in one Redis Cluster slot and each Lua script touches one slot only.

Layout of partition ``p`` (prefix ``wg``)::

    wg:{q3}:due       sorted set  member -> due ms          (pending events)
    wg:{q3}:payload   hash        id16 -> blob              (pending and dead events)
    wg:{q3}:inflight  sorted set  batch token -> lease deadline ms
    wg:{q3}:batches   hash        batch token -> msgpack array of the batch's blobs
    wg:{q3}:dead      sorted set  member -> time it died ms
    wg:{q3}:deadinfo  hash        id16 -> msgpack [error, attempts, died_ms]
    wg:{q3}:marker    string      set by the reconciler; its absence means Redis lost data
    wg:wake           pub/sub channel: "partition:due_ms[,...]" when events are scheduled

A *member* is ``PPPP`` + ``IIIIIIIIIIIIIIII``: the priority shifted to be
non-negative and the event id, both fixed-width lowercase hex. Within one
due ms Redis orders members lexicographically, which is (priority, id).
A *blob* is the member, the due ms as 13 decimal digits, then the msgpack
body (see ``codec``). A claim moves blobs from the payload hash into the
batch, so acking a batch is O(1).
"""

from __future__ import annotations

# --- event encoding --------------------------------------------------------
PRIORITY_MIN = -32_768  # the DB column is a SMALLINT
PRIORITY_MAX = 32_767
PRIORITY_BIAS = 32_768  # added so the hex form is non-negative and sorts like the number
MEMBER_LEN = 20  # 4 hex digits of priority + 16 of id
HEADER_LEN = 33  # member + 13 decimal digits of due ms
DUE_MS_MAX = 9_999_999_999_999  # 13 digits: year 2286
KIND_MAX_LEN = 32  # scheduled_events.kind is VARCHAR(32)

# --- scheduling ------------------------------------------------------------
MAX_AHEAD_MS = 366 * 24 * 3600 * 1000  # a due time further ahead is a bug, not a plan

# --- claiming and leases ---------------------------------------------------
BATCH_SIZE = 1000  # events per claim: large batches amortize round trips
CLAIM_LEASE_MS = 15_000  # an unacked batch returns to *due* after this
RENEW_EVERY_MS = 5_000  # a worker extends its in-flight batches this often
MAX_IDLE_MS = 5_000  # a sleeping worker re-checks at least this often (lost wake-ups)
HANDLER_TIMEOUT_S = 30.0  # a handler call running longer is cancelled and retried

# --- retries ---------------------------------------------------------------
MAX_ATTEMPTS = 5  # the 5th failure sends an event to *dead*
BACKOFF_BASE_MS = 1_000  # first retry after 1 s, then 2 s, 4 s, ...
BACKOFF_MAX_MS = 300_000  # ... capped at 5 minutes

# --- partition leases ------------------------------------------------------
PARTITION_LEASE_GROUP = "queue"
PARTITION_LEASE_TTL_MS = 5_000  # a dead process's partitions are free after this
PARTITION_HEARTBEAT_MS = 1_000

# --- reconciler ------------------------------------------------------------
RECONCILE_EVERY_MS = 300_000  # full pass over pending DB events
MARKER_CHECK_MS = 1_000  # how often a vanished marker (Redis lost data) is looked for
RECONCILE_CHUNK = 5_000  # DB rows read per query

# --- metrics ---------------------------------------------------------------
STATS_EVERY_S = 5.0  # depth and lag gauges refresh


class PartitionKeys:
    """The Redis keys of one queue partition."""

    __slots__ = (
        "batches", "channel", "dead", "deadinfo", "due", "inflight", "marker",
        "partition", "payload",
    )  # fmt: skip

    def __init__(self, prefix: str, partition: int) -> None:
        self.partition = partition
        tag = f"{prefix}:{{q{partition}}}"
        self.due = f"{tag}:due"
        self.payload = f"{tag}:payload"
        self.inflight = f"{tag}:inflight"
        self.batches = f"{tag}:batches"
        self.dead = f"{tag}:dead"
        self.deadinfo = f"{tag}:deadinfo"
        self.marker = f"{tag}:marker"
        self.channel = wake_channel(prefix)

    def wake_message(self, due_ms: int) -> bytes:
        return b"%d:%d" % (self.partition, due_ms)


def wake_channel(prefix: str) -> str:
    """One channel per world: a worker ignores news of other partitions and of later events."""
    return f"{prefix}:wake"
