from __future__ import annotations

import pytest

from common.errors import ConfigError
from common.settings import Settings, env_variables, load_settings


def test_defaults_are_sqlite_and_local_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in env_variables():
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.is_sqlite
    assert settings.redis_url == "redis://127.0.0.1:6379/0"
    assert settings.tick_shards == 60


def test_reads_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:secret@db:5432/game")
    monkeypatch.setenv("WORLD_SPEED", "3")
    monkeypatch.setenv("TICK_SHARDS", "12")
    settings = load_settings()
    assert settings.database_url == "postgresql+asyncpg://u:secret@db:5432/game"
    assert settings.world_speed == 3.0
    assert settings.tick_shards == 12
    assert "secret" not in repr(settings)


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("REDIS_URL", "http://localhost", "REDIS_URL: must start with redis://"),
        ("DATABASE_URL", "mysql://x/y", "DATABASE_URL: unsupported database 'mysql'"),
        ("DATABASE_URL", "::::", "DATABASE_URL: is not a database URL"),
        ("WORLD_SPEED", "0", "WORLD_SPEED: Input should be greater than 0"),
        ("TICK_SHARDS", "many", "TICK_SHARDS: Input should be a valid integer"),
        ("WEB_PORT", "70000", "WEB_PORT:"),
        ("REDIS_PREFIX", "a{b}", "REDIS_PREFIX: must be non-empty"),
    ],
)
def test_bad_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, fragment: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_every_field_has_an_environment_variable() -> None:
    assert "REDIS_URL" in env_variables()
    assert len(env_variables()) == len(Settings.model_fields)
