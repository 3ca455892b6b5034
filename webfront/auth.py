"""Register, login, logout, and ``authenticate(request)`` for every other route.

A session travels in an ``HttpOnly; SameSite=Strict; Path=/`` cookie (plus
``Secure`` over https) for browsers, or as ``Authorization: Bearer <token>``
for other clients; the login answer carries the token for the latter. Every
login makes a new token (no session fixation). Login is rate-limited per
client address, then per existing account and address, then per account
(``WebConfig``), registration per address, before any password is hashed, so
the limits also cap the CPU an attacker can burn. A client is what
``webfront.proxies`` says (the peer, or what a trusted proxy forwards).
"""

from __future__ import annotations

import asyncio
import logging
import unicodedata
from typing import Annotated, Any

from aiohttp import web
from pydantic import AfterValidator, Field

from db.accounts import MapFull, NameTaken, create_account, find_credentials, set_password_hash
from gameapi.stocks import stocks_of
from webfront import ratelimit
from webfront.admin import bans
from webfront.codec import respond
from webfront.errors import ApiError, unauthorized
from webfront.password_policy import weakness
from webfront.passwords import hash_password, needs_rehash, unusable_reason, verify_password
from webfront.routing import Endpoint
from webfront.sessions import COOKIE, NewSession, token_from_headers, token_hash
from webfront.state import (
    CLIENTS,
    CLOCK,
    CONFIG,
    ENGINE,
    GAME,
    HASH_POOL,
    LIMITER,
    REDIS,
    SESSIONS,
    SETTINGS,
)
from webfront.validation import Id, Out, Password, PlayerName, StrictBody, read_body

log = logging.getLogger(__name__)


class RegisterBody(StrictBody):
    name: PlayerName
    password: Password


def _login_password(value: str) -> str:
    # registration's rules (length, characters) are not checked here: a password that
    # breaks them matches no account, so it is answered 401 like any wrong one
    return unicodedata.normalize("NFKC", value)


class LoginBody(StrictBody):
    name: PlayerName
    password: Annotated[str, Field(max_length=1024), AfterValidator(_login_password)]


class SessionOut(Out):
    player_id: Id
    name: str
    token: str
    expires_ms: int
    village_id: Id | None = None


class OkOut(Out):
    ok: bool


async def authenticate(request: web.Request) -> int:
    """The id of the logged-in player, or 401."""
    token = token_from_headers(request.headers.get("Authorization"), request.headers.get("Cookie"))
    if token is None:
        raise unauthorized()
    digest = token_hash(token)
    player_id = await request.app[SESSIONS].player_of(digest)
    if player_id is None:  # a session lost to a ban says so (403 banned)
        await bans.refuse_if_marked(request.app[REDIS], request.app[SETTINGS].redis_prefix, digest)
        raise unauthorized("the session is unknown, expired or logged out; log in again")
    return player_id


def _address(request: web.Request) -> str:
    # behind a reverse proxy, list it in TRUSTED_PROXIES, or every client has its address
    return request.app[CLIENTS].client(request).address


async def _hash_in_pool(request: web.Request, func: Any, *args: Any) -> Any:
    pool = request.app[HASH_POOL]
    return await asyncio.get_running_loop().run_in_executor(pool, func, *args)


def _session_response(
    request: web.Request, session: NewSession, name: str, village_id: int | None, status: int
) -> web.Response:
    body = {
        "player_id": session.player_id,
        "name": name,
        "token": session.token,
        "expires_ms": session.expires_ms,
        "village_id": village_id,
    }
    response = respond(request, body, status=status)
    response.set_cookie(
        COOKIE,
        session.token,
        max_age=request.app[SETTINGS].session_ttl_s,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )
    response.headers["Cache-Control"] = "no-store"
    return response


async def register(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    await request.app[LIMITER].hit(
        ratelimit.Check(
            "register-address",
            ratelimit.hashed(_address(request)),
            config.register_per_address,
            "too many registrations from this address; try again later",
        ),
        code="too_many_attempts",
    )
    body = await read_body(request, RegisterBody)
    if problem := await _hash_in_pool(request, weakness, body.password, body.name):
        raise ApiError(422, "weak_password", problem)
    settings = request.app[SETTINGS]
    template = request.app[GAME].new_place(settings.world_speed, False)
    password_hash = await _hash_in_pool(request, hash_password, body.password, config.password_hash)
    try:
        account = await create_account(
            request.app[ENGINE],
            name=body.name,
            password_hash=password_hash,
            template=template,
            stocks=stocks_of(request.app[GAME]),  # type: ignore[arg-type]  # PlaceTemplate: worldgen is next
            shards=settings.tick_shards,
            map_radius=settings.map_radius,
            now_ms=request.app[CLOCK].now_ms(),
        )
    except NameTaken:
        raise ApiError(409, "name_taken", "this name is taken; choose another") from None
    except MapFull:
        raise ApiError(503, "map_full", "the map has no free spot left") from None
    session = await request.app[SESSIONS].create(account.player_id)
    return _session_response(request, session, body.name, account.village_id, 201)


async def login(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    limiter = request.app[LIMITER]
    address = ratelimit.hashed(_address(request))
    # the address first: an attempt refused here costs no account anything
    await limiter.hit(
        ratelimit.Check(
            "login-address",
            address,
            config.login_per_address,
            "too many login attempts from this address; try again later",
        ),
        code="too_many_attempts",
    )
    body = await read_body(request, LoginBody)
    engine = request.app[ENGINE]
    found = await find_credentials(engine, body.name)
    if found is not None:
        # Only real accounts are counted (names are public on the map anyway), so made-up
        # names make no keys. Per account and address first: one attacker's address runs
        # out long before the account's ceiling, and its owner elsewhere keeps logging in.
        await limiter.hit(
            ratelimit.Check(
                "login-account-address",
                f"{found.player_id}:{address}",
                config.login_per_account_address,
                "too many login attempts for this account; try again later",
            ),
            ratelimit.Check(
                "login-account",
                str(found.player_id),
                config.login_per_account,
                "too many login attempts for this account; try again later",
            ),
            code="too_many_attempts",
        )
    stored = found.password_hash if found else None
    params = config.password_hash
    ok = await _hash_in_pool(request, verify_password, body.password, stored, params)
    if not ok or found is None:
        # an unusable stored hash matches no password: answered like a wrong one, and told
        # to the operator (never the hash itself)
        if found is not None and (problem := unusable_reason(found.password_hash, params)):
            log.warning(
                "player %d cannot log in: the stored password hash is unusable (%s); "
                "set a new one", found.player_id, problem,
            )  # fmt: skip
        raise ApiError(401, "invalid_credentials", "wrong name or password")
    if needs_rehash(found.password_hash, params):
        new_hash = await _hash_in_pool(request, hash_password, body.password, params)
        await set_password_hash(engine, found.player_id, new_hash)
    session = await request.app[SESSIONS].create(found.player_id)
    # checked after the session exists, so a ban committed meanwhile finds it or is seen here
    if await bans.is_banned(engine, found.player_id):
        await request.app[SESSIONS].revoke(token_hash(session.token))
        raise bans.banned_error()
    return _session_response(request, session, found.name, None, 200)


async def logout(request: web.Request) -> web.Response:
    token = token_from_headers(request.headers.get("Authorization"), request.headers.get("Cookie"))
    await authenticate(request)
    assert token is not None  # authenticate() found it
    await request.app[SESSIONS].revoke(token_hash(token))
    response = respond(request, {"ok": True})
    response.del_cookie(COOKIE, path="/")
    return response


ENDPOINTS = [
    Endpoint(
        "POST",
        "/api/register",
        register,
        "Create a player with a first village and log in",
        "auth",
        auth=False,
        body=RegisterBody,
        response=SessionOut,
        status=201,
        errors=(409, 422, 429),
    ),
    Endpoint(
        "POST",
        "/api/login",
        login,
        "Log in: a new session token (cookie and body)",
        "auth",
        auth=False,
        body=LoginBody,
        response=SessionOut,
        errors=(401, 429),
    ),
    Endpoint("POST", "/api/logout", logout, "End this session", "auth", response=OkOut),
]
