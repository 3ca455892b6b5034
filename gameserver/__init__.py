"""The task server: runs the timed-event queue and the sharded per-second tick, each
partition and shard in the process that holds its lease."""
