"""No Docker engine runs on our machines, so check the compose file statically."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from common.settings import env_variables

ROOT = Path(__file__).resolve().parent.parent
SERVICE_ENV = {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}  # the postgres image's own


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _entry_points() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["scripts"])


def test_stack_has_every_tier() -> None:
    services = _compose()["services"]
    assert {"redis", "postgres", "migrate", "gameserver", "webfront"} <= set(services)
    assert services["gameserver"]["deploy"]["replicas"] >= 2
    assert services["migrate"]["command"] == ["wgctl", "migrate"]


def test_app_commands_are_entry_points_of_the_project() -> None:
    scripts = _entry_points()
    for name, service in _compose()["services"].items():
        if "build" not in service:
            continue  # third-party image
        command = service.get("command")
        assert command, f"{name} has no command"
        assert command[0] in scripts, f"{name} runs {command[0]!r}, not a project entry point"


def test_task_server_metrics_listen_where_a_scraper_reaches_them() -> None:
    gameserver = _compose()["services"]["gameserver"]
    assert gameserver["environment"]["GAMESERVER_METRICS_HOST"] == "0.0.0.0"
    assert "ports" not in gameserver  # the internal network only: no authentication


def test_app_environment_is_read_by_settings() -> None:
    known = env_variables()
    for name, service in _compose()["services"].items():
        for variable in service.get("environment", {}):
            if "build" in service:
                assert variable in known, f"{name} sets {variable}, which no setting reads"
            else:
                assert variable in SERVICE_ENV | known, f"{name}: unexpected {variable}"


def test_dockerfile_copies_every_package() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        assert f"COPY {package} {package}" in dockerfile, f"Dockerfile misses {package}/"
