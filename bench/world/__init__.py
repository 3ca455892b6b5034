"""``python -m bench world``: how many players the whole stack serves on this machine.

The stack runs as an operator runs it: Redis (an embedded Valkey of its own unless
``--redis-url``), PostgreSQL (or SQLite), ``webfront --workers K`` and M ``gameserver``
processes (the console scripts), the tick over every village, players' and bots'. Players
are generated in bulk (``db.worldgen``, one bot village per player besides), their sessions
minted by ``SessionStore.create`` as a login mints them; then N players are simulated over
the real HTTP API by separate load generator processes (``bench.world.load``) following
``PlayerModel``: arrivals spread over the warm-up (a full snapshot, the event stream for a
share of them), a snapshot poll with If-None-Match every 10 s (every 60 s with the stream
open), a build or train every 2 minutes (half the players can pay for anything, half start
as a generated village does and run short), a raid on the nearest bot every 10 minutes (a
quarter recalled a few seconds later), and a password login per player per day.

Each step measures one window after a warm-up: client latencies (from the moment a request
was due: the load is open loop), errors, event lateness and tick shard durations from the
task servers' Prometheus histograms, CPU of every tier and of the load generators from
/proc. N doubles while every service level holds, then is bisected.
"""

from bench.world.model import SLO, PlayerModel
from bench.world.run import Plan, world_bench

__all__ = ["SLO", "Plan", "PlayerModel", "world_bench"]
