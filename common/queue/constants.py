"""Redis key names and the queue's tunable constants, in one place.

Every key of partition ``p`` carries the hash tag ``{qP}``, so a partition
lives in one Redis Cluster slot and each Lua script touches one slot only.

Layout of partition ``p`` (prefix ``wg``)::

    wg:{q3}:due       sorted set  blob -> due ms           (pending events)
    wg:{q3}:byid      hash        id16 -> blob             (durable events, pending or dead)
    wg:{q3}:inflight  sorted set  batch token -> lease deadline ms
    wg:{q3}:batches   hash        batch token -> msgpack array of the batch's blobs
    wg:{q3}:dead      sorted set  blob -> time it died ms
    wg:{q3}:deadinfo  hash        id16 -> msgpack [error, attempts, died_ms]
    wg:{q3}:marker    string      set by the reconciler; its absence means Redis lost data
    wg:wake           pub/sub channel: "partition:due_ms[,...]" when events are scheduled

A *blob* is the whole event, self-delimiting: a 42-byte header, then the
msgpack body (see ``codec``). The header is a msgpack str8 (``\\xd9\\x28``)
holding ``PPPP`` + ``IIIIIIIIIIIIIIII`` (priority shifted to be non-negative
and the event id, fixed-width hex: with the str8 prefix this is the
*member*), the due ms as 13 decimal digits, ``d`` (durable) or ``m`` (in
memory), and the body length as 6 hex digits. Blobs are the sorted-set
members themselves, so scheduling is one ZADD and a claim one range pop,
like a bare sorted set; a batch is stored and sent as the blobs'
concatenation, which Python decodes with one msgpack call. Within one due
ms Redis orders members by bytes, which is (priority, id). Durable events
are also indexed by id (cancel, reschedule and the reconciler need that);
an in-memory event is found by id with a scan.
"""

from __future__ import annotations

# --- event encoding --------------------------------------------------------
PRIORITY_MIN = -32_768  # the DB column is a SMALLINT
PRIORITY_MAX = 32_767
PRIORITY_BIAS = 32_768  # added so the hex form is non-negative and sorts like the number
BLOB_PREFIX = b"\xd9\x28"  # msgpack: a str8 of 40 bytes, the rest of the header
MEMBER_LEN = 22  # prefix + 4 hex digits of priority + 16 of id
HEADER_LEN = 42  # member + 13 decimal digits of due ms + durable flag + 6 hex of body size
BODY_MAX = 0xFFFFFF  # bytes of one msgpack body (6 hex digits)
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
        "batches", "byid", "channel", "dead", "deadinfo", "due", "inflight", "marker",
        "partition",
    )  # fmt: skip

    def __init__(self, prefix: str, partition: int) -> None:
        self.partition = partition
        tag = f"{prefix}:{{q{partition}}}"
        self.due = f"{tag}:due"
        self.byid = f"{tag}:byid"
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
