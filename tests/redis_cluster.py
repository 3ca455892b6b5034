"""A real local 3-master Redis Cluster (Valkey binary) for the queue's and the web tier's
cluster tests."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import redis

from common.embedded_redis import EmbeddedRedis
from tests.waiting import wait_for_blocking

SLOTS = ((0, 5460), (5461, 10922), (10923, 16383))


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_ports() -> list[int]:
    """Three ports whose cluster-bus ports (port + 10000) are free too, all below Linux's
    ephemeral range (32768+), where an outgoing connection can hold a port nobody listens
    on (the server then exits at start with "address already in use")."""
    ports: list[int] = []
    candidate = 21000 + (time.time_ns() // 1000) % 1500
    while len(ports) < 3:
        candidate += 1
        if _bindable(candidate) and _bindable(candidate + 10000):
            ports.append(candidate)
    return ports


@contextlib.contextmanager
def local_cluster() -> Iterator[list[int]]:
    """Start three masters, give each a third of the slots, wait until all agree: the
    ports, stopped at the end."""
    servers = []
    try:
        for port in cluster_ports():
            servers.append(
                EmbeddedRedis(
                    port=port,
                    extra_args=["--cluster-enabled", "yes", "--cluster-node-timeout", "3000"],
                ).start()
            )
        clients = [redis.Redis(port=s.port) for s in servers]
        for client, (first, last) in zip(clients, SLOTS, strict=True):
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        for s in servers[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", s.port)
        wait_for_blocking(
            lambda: all(
                c.execute_command("CLUSTER", "INFO").decode().count("cluster_state:ok")
                and len(c.execute_command("CLUSTER", "SLOTS")) == 3
                for c in clients
            ),
            "the local cluster to agree on its slots",
            timeout_s=30,
        )
        for c in clients:
            c.close()
        yield [s.port for s in servers]
    finally:
        for s in servers:
            s.stop()
