"""Fixtures of the chaos tests: the queue's (a queue on the test Redis, workers, a manual
clock), for the regression tests of what the chaos run found."""

from tests.queue.conftest import (  # noqa: F401  (fixtures, found by pytest by name)
    clock,
    make_queue,
    queue,
    workers,
)
