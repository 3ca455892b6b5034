"""Load tools: queue events/s, tick capacity, snapshot polling, each beside its raw ceiling."""
