"""``GET /api/openapi.json``: an OpenAPI 3.1 document made from the endpoint declarations.

Schemas come from the same pydantic models that validate requests, so the
document cannot drift from the validation; a test checks that every route of
the router is documented and every documented route is served.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from webfront import routing
from webfront.codec import JSON, MSGPACK
from webfront.routing import Endpoint
from webfront.sessions import COOKIE
from webfront.validation import INT64_MAX, Out

_PATH_PARAM = re.compile(r"\{(\w+)(?::[^}]*)?\}")
_REF = "#/components/schemas/{model}"
OPENAPI_DOC = web.AppKey("openapi_doc", dict)


class ErrorDetail(Out):
    code: str
    message: str
    details: Any = None


class ErrorOut(Out):
    error: ErrorDetail


_ERROR_TEXT = {
    400: "malformed request (e.g. invalid JSON)",
    401: "no valid session",
    403: "forbidden",
    404: "not found (or not yours)",
    409: "conflicts with the current state",
    413: "request body too large",
    415: "a POST must be Content-Type: application/json",
    422: "a field is missing, of the wrong type or out of bounds",
    429: "rate limited; see Retry-After",
    503: "a backend is unavailable; retry shortly",
}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _content(schema: dict[str, Any]) -> dict[str, Any]:
    return {JSON: {"schema": schema}, MSGPACK: {"schema": schema}}


def _parameters(endpoint: Endpoint) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {"type": "integer", "minimum": 1, "maximum": INT64_MAX},
        }
        for name in _PATH_PARAM.findall(endpoint.path)
    ]
    if endpoint.query is not None:
        schema = endpoint.query.model_json_schema(ref_template=_REF)
        required = set(schema.get("required", []))
        for name, prop in schema["properties"].items():
            prop = {k: v for k, v in prop.items() if k != "title"}
            param = {"name": name, "in": "query", "required": name in required, "schema": prop}
            if "description" in prop:
                param["description"] = prop["description"]
            params.append(param)
    for name, description in endpoint.headers:
        params.append(
            {
                "name": name,
                "in": "header",
                "required": False,
                "description": description,
                "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"},
            }
        )
    if endpoint.etag:
        params.append(
            {
                "name": "If-None-Match",
                "in": "header",
                "required": False,
                "description": "the ETag of the copy the client holds; 304 if still current",
                "schema": {"type": "string"},
            }
        )
    return params


def _operation_id(endpoint: Endpoint) -> str:
    words = re.sub(r"[^a-z0-9]+", "_", endpoint.path.lower()).strip("_")
    return f"{endpoint.method.lower()}_{words}"


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": _operation_id(endpoint),
        "summary": endpoint.summary,
        "tags": [endpoint.tag],
    }
    params = _parameters(endpoint)
    if params:
        operation["parameters"] = params
    if endpoint.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {JSON: {"schema": _ref(endpoint.body)}},
        }
    responses: dict[str, Any] = {}
    if endpoint.media_type is not None:
        body_type = "object" if endpoint.media_type == JSON else "string"
        success: dict[str, Any] = {
            "description": "success",
            "content": {endpoint.media_type: {"schema": {"type": body_type}}},
        }
    elif endpoint.response is not None:
        success = {"description": "success", "content": _content(_ref(endpoint.response))}
    else:
        success = {"description": "success"}
    responses[str(endpoint.status)] = success
    if endpoint.etag:
        responses["304"] = {"description": "not modified: the client's ETag is current"}
    errors = set(endpoint.errors)
    if endpoint.auth:
        errors.add(401)
        operation["security"] = [{"bearer": []}, {"cookie": []}]
    if endpoint.body is not None:
        errors.update({400, 413, 415, 422})
    if endpoint.method == "POST":
        errors.add(415)  # every POST must be JSON (the CSRF rule), a body-less one too
    if endpoint.query is not None:
        errors.add(422)
    if endpoint.path.startswith("/api/"):
        errors.add(503)
    for status in sorted(errors):
        responses[str(status)] = {
            "description": _ERROR_TEXT.get(status, "error"),
            "content": _content(_ref(ErrorOut)),
        }
    operation["responses"] = responses
    operation.update(endpoint.extra)
    return operation


def build_document(endpoints: Sequence[Endpoint], title: str, version: str) -> dict[str, Any]:
    models: dict[str, type[BaseModel]] = {"ErrorOut": ErrorOut}
    for endpoint in endpoints:
        for model in (endpoint.body, endpoint.response):
            if model is not None:
                models[model.__name__] = model
    _, top = models_json_schema([(m, "validation") for m in models.values()], ref_template=_REF)
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        path = _PATH_PARAM.sub(r"{\1}", endpoint.path)
        paths.setdefault(path, {})[endpoint.method.lower()] = _operation(endpoint)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": version,
            "description": (
                "Player API. JSON by default; send Accept: application/msgpack for msgpack. "
                'Every error is {"error": {"code", "message"}}. POST bodies must be '
                "Content-Type: application/json."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": top.get("$defs", {}),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": COOKIE},
            },
        },
    }


def document_app(app: web.Application) -> None:
    """Build the document once every endpoint is mounted (create_app's last step)."""
    endpoints: list[Endpoint] = app[routing.ENDPOINTS]
    app[OPENAPI_DOC] = build_document(endpoints, "Webgame API", "1")


async def openapi_json(request: web.Request) -> web.Response:
    return web.json_response(request.app[OPENAPI_DOC])


ENDPOINTS = [
    Endpoint(
        "GET",
        "/api/openapi.json",
        openapi_json,
        "This OpenAPI 3.1 document",
        "meta",
        auth=False,
        media_type=JSON,
    ),
]
