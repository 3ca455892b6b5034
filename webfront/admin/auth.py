"""Operator login, logout and ``authenticate_operator`` for every console route.

An operator's session travels in the ``wg_operator`` cookie (``HttpOnly;
SameSite=Strict; Path=/admin``) or as ``Authorization: Bearer``; it is looked up only
in ``operator_sessions``, so a player's token (cookie ``wg_session`` or bearer) never
opens the console. CSRF rules are the player API's (``webfront.guard``): every POST
must be ``application/json`` and the cookie is never sent cross-site. Login is
rate-limited per name and per address before any password is hashed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from aiohttp import web
from pydantic import Field

from webfront import ratelimit
from webfront.admin import operators
from webfront.admin.operators import OperatorRow
from webfront.codec import respond
from webfront.errors import ApiError, unauthorized
from webfront.passwords import hash_password, needs_rehash, verify_password
from webfront.state import CLOCK, CONFIG, ENGINE, HASH_POOL, LIMITER, SETTINGS
from webfront.validation import Out, Password, StrictBody, read_body

log = logging.getLogger("webfront.admin")

OperatorName = Annotated[str, Field(pattern=operators.NAME_RE.pattern, max_length=32)]


class OperatorLoginBody(StrictBody):
    name: OperatorName
    password: Password


class OperatorOut(Out):
    operator_id: int
    name: str
    expires_ms: int | None = None
    token: str | None = None


def answer(request: web.Request, data: Any) -> web.Response:
    """A console answer: operators' data, never kept by a browser's or a proxy's cache."""
    return respond(request, data, headers={"Cache-Control": "no-store"})


def _cookies(request: web.Request) -> dict[str, str]:
    return dict(request.cookies)


async def authenticate_operator(request: web.Request) -> OperatorRow:
    """The logged-in operator, or 401 (a player's session is no operator's)."""
    token = operators.operator_token(request.headers.get("Authorization"), _cookies(request))
    if token is None:
        raise unauthorized("log in to the operator console first")
    found = await operators.session_operator(
        request.app[ENGINE], token, request.app[CLOCK].now_ms()
    )
    if found is None:
        raise unauthorized("the operator session is unknown, expired or logged out")
    return found


async def _hash_in_pool(request: web.Request, func: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(request.app[HASH_POOL], func, *args)


async def login(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    body = await read_body(request, OperatorLoginBody)
    await request.app[LIMITER].hit(
        ratelimit.Check(
            "admin-login-account",
            ratelimit.hashed(body.name.casefold()),
            config.login_per_account,
            "too many login attempts for this operator; try again later",
        ),
        ratelimit.Check(
            "admin-login-address",
            ratelimit.hashed(request.remote or "unknown"),
            config.login_per_address,
            "too many login attempts from this address; try again later",
        ),
        code="too_many_attempts",
    )
    engine = request.app[ENGINE]
    found = await operators.find_operator(engine, body.name)
    stored = found[1] if found else None
    ok = await _hash_in_pool(request, verify_password, body.password, stored, config.password_hash)
    if not ok or found is None:
        raise ApiError(401, "invalid_credentials", "wrong operator name or password")
    operator_id, password_hash = found
    if needs_rehash(password_hash, config.password_hash):
        new_hash = await _hash_in_pool(request, hash_password, body.password, config.password_hash)
        await operators.set_operator_hash(engine, operator_id, new_hash)
    ttl_s = request.app[SETTINGS].operator_session_ttl_s
    opened = await operators.open_session(
        engine, operator_id, request.app[CLOCK].now_ms(), ttl_s * 1000
    )
    log.info("operator %d logged in", operator_id)
    response = respond(
        request,
        {
            "operator_id": operator_id,
            "name": body.name,
            "expires_ms": opened.expires_ms,
            "token": opened.token,
        },
    )
    response.set_cookie(
        operators.COOKIE,
        opened.token,
        max_age=ttl_s,
        path=operators.COOKIE_PATH,
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )
    response.headers["Cache-Control"] = "no-store"
    return response


async def logout(request: web.Request) -> web.Response:
    await authenticate_operator(request)
    token = operators.operator_token(request.headers.get("Authorization"), _cookies(request))
    assert token is not None  # authenticate_operator found it
    await operators.close_session(request.app[ENGINE], token)
    response = answer(request, {"ok": True})
    response.del_cookie(operators.COOKIE, path=operators.COOKIE_PATH)
    return response


async def me(request: web.Request) -> web.Response:
    operator = await authenticate_operator(request)
    return answer(request, {"operator_id": operator.id, "name": operator.name})
