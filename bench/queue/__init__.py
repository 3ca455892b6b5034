"""Queue throughput and lateness beside a raw multi-member ZADD and a bare Lua batch pop.

One run, in this order, all under a bench-owned Redis prefix:

1. ceiling for scheduling: N events encoded as the queue stores them (member,
   due ms, msgpack body) and pushed whole as sorted-set members with
   multi-member ZADDs (redis-py, one pipeline per 10,000 events, as the
   bench calls ``schedule_many``);
2. ceiling for dispatch: the same events popped by a bare Lua script
   (ZRANGEBYSCORE + ZREM, batches of the worker's size, one call per
   partition per round trip, redis-py);
3. ours: the same number of events through ``EventQueue.schedule_many``, then
   drained by the real ``TaskServer`` (burst mode, one process, one worker per
   partition) with a no-op in-memory handler: claim + handler + ack;
4. lateness: events due spread over time at a steady rate (half the measured
   dispatch rate unless ``--rate``), run by a ``TaskServer``; lateness is the
   handler's start minus the event's due time.

``--handlers game`` instead runs real events of the game ``GAME`` names (its
``Game.bench`` workload: refgame's march arrivals with battle, loot, reports and
return march; spacegame's fleet arrivals) on a bench database, beside durable
no-op events on the same database (the floor the queue's durable path sets).
"""

from bench.host import db_version, load_average, warn_if_busy
from bench.prefix import check_bench_prefix, clear_prefix
from bench.queue.constants import (
    ARQ_MAX_JOBS,
    ARQ_POLL_DELAY_S,
    ARQ_SETUP,
    BENCH_KIND,
    DEFAULT_ARQ_PYTHON,
    SCHEDULE_CALL,
    TARGETS,
)
from bench.queue.game import game_bench
from bench.queue.memory import check_memory
from bench.queue.noop import noop_bench

__all__ = [
    "ARQ_MAX_JOBS",
    "ARQ_POLL_DELAY_S",
    "ARQ_SETUP",
    "BENCH_KIND",
    "DEFAULT_ARQ_PYTHON",
    "SCHEDULE_CALL",
    "TARGETS",
    "check_bench_prefix",
    "check_memory",
    "clear_prefix",
    "db_version",
    "game_bench",
    "load_average",
    "noop_bench",
    "warn_if_busy",
]
