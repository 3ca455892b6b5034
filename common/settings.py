"""The one typed settings object, read from environment variables.

Nothing else in the project reads ``os.environ``. Each field's environment
variable is its upper-case name (``redis_url`` -> ``REDIS_URL``).
"""

from __future__ import annotations

import ipaddress
import re
from functools import cached_property
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url

from common.errors import ConfigError

_DB_DRIVERS = {
    "postgresql": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    redis_url: str = Field("redis://127.0.0.1:6379/0", description="Redis or Valkey server")
    redis_prefix: str = Field("wg", description="prefix of every Redis key this world uses")
    database_url: str = Field(
        "sqlite+aiosqlite:///var/world.db", description="SQLAlchemy URL (PostgreSQL or SQLite)"
    )
    world_speed: float = Field(1.0, gt=0, le=1000, description="scales production and durations")
    map_radius: int = Field(100, ge=5, le=2000, description="map spans -radius..radius on x and y")
    tick_shards: int = Field(60, ge=1, le=3600, description="villages are ticked in S shards")
    queue_partitions: int = Field(16, ge=1, le=1024, description="event-queue partitions")
    web_host: str = Field("127.0.0.1", description="web server bind address")
    web_port: int = Field(8080, ge=1, le=65535, description="web server port")
    push_max_channels: int = Field(
        20_000, ge=0, le=1_000_000, description="open event streams per web process (then 503)"
    )
    gameserver_metrics_host: str = Field(
        "127.0.0.1", min_length=1, description="task server Prometheus bind address"
    )
    gameserver_metrics_port: int = Field(
        9100, ge=0, le=65535, description="task server Prometheus port (0 = off)"
    )
    web_metrics_token: str | None = Field(
        None,
        min_length=16,
        description="bearer token that opens the web tier's /metrics to a scraper elsewhere",
    )
    session_ttl_s: int = Field(7 * 24 * 3600, ge=60, description="player session lifetime")
    trusted_proxies: str = Field(
        "", description="reverse proxies whose forwarding headers are believed: IPs/CIDRs, commas"
    )
    operator_session_ttl_s: int = Field(
        8 * 3600, ge=60, le=7 * 24 * 3600, description="operator console session lifetime"
    )
    clock_skew_warn_ms: int = Field(
        250, ge=1, description="warn when this process's clock is this far off Redis TIME"
    )
    clock_skew_max_ms: int = Field(
        2_000, ge=1, description="past this offset from Redis TIME: no handlers, no tick"
    )
    retention_every_s: int = Field(
        300, ge=1, le=86_400, description="the retention job runs this often (once per world)"
    )
    retention_batch: int = Field(
        5_000, ge=1, le=100_000, description="rows per retention DELETE (20 per table per run)"
    )
    retention_processed_events_s: int = Field(
        7 * 86_400,
        ge=86_400,  # above the longest a redelivery can come late: gameserver.retention
        description="processed-event records are kept this long",
    )
    retention_idempotency_s: int = Field(
        86_400, ge=60, description="idempotency records (a retried command's answer) kept this long"
    )
    retention_sessions_s: int = Field(
        86_400, ge=0, description="expired player sessions are kept this long after expiry"
    )
    retention_reports_s: int = Field(
        30 * 86_400, ge=0, description="a game's reports are kept this long (0: for ever)"
    )
    game: str = Field("refgame", description="Python package with the game's rules")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO")
    event_loop: Literal["uvloop", "asyncio"] = Field(
        "uvloop", description="the web and task servers' event loop (asyncio: the standard one)"
    )

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str) -> str:
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix://")
        return value

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str) -> str:
        try:
            url = make_url(value)
        except Exception as exc:  # sqlalchemy raises ArgumentError with a long text
            raise ValueError("is not a database URL") from exc
        driver = _DB_DRIVERS.get(url.drivername)
        if driver is None:
            raise ValueError(f"unsupported database {url.drivername!r}; use postgresql or sqlite")
        return url.set(drivername=driver).render_as_string(hide_password=False)

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: str) -> str:
        for i, part in enumerate(p.strip() for p in value.split(",")):
            try:
                if part:
                    ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"entry {i + 1} is not an IP address or CIDR block") from None
        return value

    @field_validator("redis_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        if not value or any(c in value for c in "{} \t\n"):
            raise ValueError("must be non-empty without braces or spaces")
        return value

    @cached_property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def __repr__(self) -> str:  # hide passwords in logs
        db = make_url(self.database_url).render_as_string(hide_password=True)
        redis = self.redis_url.split("@")[-1] if "@" in self.redis_url else self.redis_url
        return f"Settings(database_url={db!r}, redis_url={redis!r}, prefix={self.redis_prefix!r})"

    __str__ = __repr__


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def _redacted(value: object) -> str:
    """``repr(value)`` with the password of any URL in it replaced by ``***``."""
    return _URL_PASSWORD.sub(r"\1***@", repr(value))


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment; raise ConfigError naming the bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        variable = str(first["loc"][0]).upper() if first["loc"] else "settings"
        message = first["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{variable}: {message} (got {_redacted(first.get('input'))})") from None


def env_variables() -> set[str]:
    """The names of every environment variable the settings read."""
    return {name.upper() for name in Settings.model_fields}
