"""Commands on the connections the web tier keeps between them (``db.connection_shelf``)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.waiting import wait_for
from tests.web.conftest import RegisterFn
from tests.web.helpers import drop_other_connections, set_wood
from webfront.state import SHELF


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)  # a server that can drop one
async def test_commands_run_on_after_the_server_dropped_the_kept_connections(
    client: TestClient, register: RegisterFn, engine: AsyncEngine
) -> None:
    alice = await register("Alice")
    await set_wood(engine, alice.village_id, 500)
    body = {"village_id": alice.village_id, "wood": 10}
    shelf = client.app[SHELF]
    while len(shelf.idle) < 3:  # commands at once: each kept its connection
        answers = await asyncio.gather(
            *(client.post("/api/test/spend", json=body, headers=alice.auth) for _ in range(6))
        )
        assert {a.status for a in answers} == {200}
    kept = list(shelf.idle)
    await drop_other_connections(engine)  # a restart
    drivers = [c.sync_connection.connection.dbapi_connection.driver_connection for c in kept]  # type: ignore[union-attr]
    await wait_for(lambda: all(d.is_closed() for d in drivers), "the kept connections closed")
    for _ in range(3):
        assert (await client.post("/api/test/spend", json=body, headers=alice.auth)).status == 200
    assert not set(map(id, kept)) & set(map(id, shelf.idle))
