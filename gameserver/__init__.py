"""The task server: runs the timed-event queue (and, later, the sharded tick)."""
