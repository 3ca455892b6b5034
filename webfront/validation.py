"""Request validation: strict pydantic models for bodies, bounded ones for queries.

Bodies are parsed by pydantic straight from the raw bytes (strict: a JSON
string is never taken for a number, ``true`` never for ``1``), unknown fields
are refused, and every number and string has bounds. Names are NFKC-normalized
first and then length-checked, so compatibility forms collapse and nothing
grows past its column; look-alikes are compared by ``common.names.name_key``.
Error answers never show a key the client chose (``field_names``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Annotated, Any, TypeVar, get_args

from aiohttp import web
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from webfront.errors import ApiError, from_validation

M = TypeVar("M", bound=BaseModel)

INT64_MAX = 2**63 - 1
NAME_MIN, NAME_MAX = 3, 24
_SPACES = re.compile(r"\s+")
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


class StrictBody(BaseModel):
    """Base of every JSON request body."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Query(BaseModel):
    """Base of query-string models: values arrive as text and are converted, then bounded."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Out(BaseModel):
    """Base of documented response bodies (handlers build plain dicts for speed)."""

    model_config = ConfigDict(extra="forbid")


def _normalize_name(value: str) -> str:
    name = _SPACES.sub(" ", unicodedata.normalize("NFKC", value)).strip()
    if any(unicodedata.category(ch) in _BAD_CATEGORIES for ch in name):
        raise ValueError("must not contain control or invisible characters")
    if not NAME_MIN <= len(name) <= NAME_MAX:
        raise ValueError(f"must be {NAME_MIN} to {NAME_MAX} characters after normalization")
    return name


def _normalize_password(value: str) -> str:
    password = unicodedata.normalize("NFKC", value)
    if any(unicodedata.category(ch) in {"Cc", "Cs"} for ch in password):
        raise ValueError("must not contain control characters")
    return password


PlayerName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        description=f"NFKC-normalized, spaces collapsed, {NAME_MIN}-{NAME_MAX} characters",
    ),
    AfterValidator(_normalize_name),
]
Password = Annotated[str, Field(min_length=8, max_length=128), AfterValidator(_normalize_password)]
Id = Annotated[int, Field(ge=1, le=INT64_MAX)]


@functools.cache
def field_names(model: type[BaseModel]) -> frozenset[str]:
    """Every field name and alias of ``model`` and the models inside it: the location parts
    an error may show (anything else in a location was chosen by the client)."""
    names: set[str] = {"[key]"}
    seen: set[type[BaseModel]] = set()
    todo: list[Any] = [model]
    while todo:
        item = todo.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            if item in seen:
                continue
            seen.add(item)
            for name, info in item.model_fields.items():
                names.add(name)
                if info.alias:
                    names.add(info.alias)
                todo.append(info.annotation)
        else:
            todo.extend(get_args(item))
    return frozenset(names)


async def read_body(request: web.Request, model: type[M]) -> M:
    """The validated JSON body; 400/413/422 with the error shape otherwise."""
    raw = await request.read()  # aiohttp raises 413 past client_max_size
    if not raw.strip():
        raise ApiError(400, "malformed_json", "the request body is empty; send a JSON object")
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        raise from_validation(exc, field_names(model)) from None


def read_query(request: web.Request, model: type[M]) -> M:
    known = field_names(model)
    for name in request.query:
        if len(request.query.getall(name)) > 1:
            shown = name if name in known else "*"
            raise ApiError(422, "invalid_request", f"{shown}: given more than once")
    try:
        return model.model_validate(dict(request.query))
    except ValidationError as exc:
        raise from_validation(exc, known) from None


def path_id(request: web.Request, name: str, what: str) -> int:
    """A positive int64 path parameter; anything else is 404 (no such resource)."""
    text = request.match_info[name]
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or not 1 <= int(text) <= INT64_MAX:
        raise ApiError(404, "not_found", f"no such {what}")
    return int(text)
