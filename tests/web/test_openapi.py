"""The OpenAPI document describes exactly the routes served, with schemas from the models."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.web.conftest import RegisterFn
from webfront.routing import ENDPOINTS

_METHODS = {"get", "post", "put", "patch", "delete"}


def served_routes(app: web.Application) -> set[tuple[str, str]]:
    """(method, path template) of every route the router serves, HEAD aside."""
    out = set()
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        resource = route.resource
        assert resource is not None
        if isinstance(resource, web.StaticResource):
            path = resource.canonical + "/{filename}"
        else:
            path = resource.canonical
        out.add((route.method.lower(), path))
    return out


def documented_routes(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method, path)
        for path, item in document["paths"].items()
        for method in item
        if method in _METHODS
    }


async def test_every_route_is_documented_and_every_documented_route_is_served(
    client: TestClient,
) -> None:
    resp = await client.get("/api/openapi.json")
    assert resp.status == 200
    document = await resp.json()
    assert document["openapi"].startswith("3.1")
    assert served_routes(client.app) == documented_routes(document)
    assert ("post", "/api/test/spend") in documented_routes(document)  # the game's commands


async def test_documented_schemas_resolve_and_errors_share_one_shape(client: TestClient) -> None:
    document = await (await client.get("/api/openapi.json")).json()
    schemas = document["components"]["schemas"]

    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["$ref"]] if "$ref" in node else []
            return found + [r for v in node.values() for r in refs(v)]
        if isinstance(node, list):
            return [r for v in node for r in refs(v)]
        return []

    for ref in refs(document):
        assert ref.startswith("#/components/schemas/")
        assert ref.rsplit("/", 1)[1] in schemas, ref
    for path, item in document["paths"].items():
        for operation in item.values():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorOut"}, (path, status)
    register = document["paths"]["/api/register"]["post"]
    assert register["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/RegisterBody"
    )
    assert schemas["RegisterBody"]["additionalProperties"] is False
    spend = document["paths"]["/api/test/spend"]["post"]
    assert any(p["name"] == "Idempotency-Key" for p in spend["parameters"])
    assert "401" in spend["responses"] and "429" in spend["responses"]


async def test_documented_responses_match_real_answers(
    client: TestClient, register: RegisterFn
) -> None:
    """Each answer validates against the response model its endpoint documents."""
    alice = await register("Alice")
    endpoints = {(e.method, e.path): e for e in client.app[ENDPOINTS]}
    for path in ("/api/time", "/api/snapshot", "/api/reports", "/api/map?x=0&y=0", "/healthz"):
        resp = await client.get(path, headers=alice.auth)
        assert resp.status == 200, path
        model = endpoints["GET", path.split("?")[0]].response
        assert model is not None
        model.model_validate(await resp.json())
