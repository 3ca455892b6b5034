"""A bounded schemathesis run against /api/openapi.json: no answer is a 5xx, and every
error has the one error shape."""

from __future__ import annotations

import asyncio
from typing import Any

import schemathesis
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.core.result import Err

from tests.web.conftest import RegisterFn

_EXAMPLES = 12  # per operation: bounded, the suite stays quick
# logout would end the session we fuzz with; files are no API
_SKIP = {"/api/logout", "/api/events", "/static/{filename}", "/sdk/{filename}", "/"}


def _fuzz(
    document: dict[str, Any], base_url: str, headers: dict[str, str]
) -> tuple[list[str], dict[str, set[int]]]:
    schema = schemathesis.openapi.from_dict(document)
    problems: list[str] = []
    seen: dict[str, set[int]] = {}
    for result in schema.get_all_operations():
        if isinstance(result, Err):
            raise result.err()
        operation = result.ok()
        if operation.path in _SKIP:
            continue

        @settings(
            max_examples=_EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            response = case.call(base_url=base_url, headers=headers, timeout=30)
            label = f"{case.method} {case.formatted_path} -> {response.status_code}"
            seen.setdefault(f"{case.method} {case.operation.path}", set()).add(response.status_code)
            if response.status_code >= 500:
                problems.append(f"{label}: {response.text[:200]}")
            elif response.status_code >= 400:
                error = response.json().get("error", {})
                if not (
                    isinstance(error.get("code"), str) and isinstance(error.get("message"), str)
                ):
                    problems.append(f"{label}: not the error shape: {response.text[:200]}")

        check()
    return problems, seen


async def test_schemathesis_finds_no_server_errors(
    client: TestClient, register: RegisterFn
) -> None:
    alice = await register("Alice")
    document = await (await client.get("/api/openapi.json")).json()
    base_url = str(client.make_url("")).rstrip("/")
    # requests is blocking: fuzz from a thread while this loop serves
    problems, seen = await asyncio.to_thread(_fuzz, document, base_url, alice.auth)
    assert problems == []
    # it really reached the API: every operation answered, commands both ways
    assert len(seen) == len(document["paths"]) - len(_SKIP)
    assert 422 in seen["POST /api/test/spend"], seen
