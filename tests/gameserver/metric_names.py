"""The metrics the code defines, enumerated from the registries (never a hand list): what
the task servers' and web servers' /metrics can export, for the tests of what is served
and of what the dashboards and alert rules reference."""

from __future__ import annotations

import inspect
from typing import Any

from prometheus_client import CollectorRegistry

import gameserver.metrics
from webfront.metrics import Metrics

# Samples a family of each type exports (prometheus_client's text format).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
}


def gameserver_families() -> dict[str, str]:
    """Name -> type of every metric of the task server: each metrics class of
    ``gameserver.metrics`` built on one registry, so a new class or metric is found too."""
    registry = CollectorRegistry()
    for _, cls in inspect.getmembers(gameserver.metrics, inspect.isclass):
        factory: Any = cls
        if cls.__module__ == gameserver.metrics.__name__ and "registry" in (
            inspect.signature(cls).parameters
        ):
            factory(registry)
    return {family.name: family.type for family in registry.collect()}


def webfront_families() -> dict[str, str]:
    return {family.name: family.type for family in Metrics().registry.collect()}


def sample_names() -> set[str]:
    """Every sample name the code can export (what a PromQL expression selects)."""
    families = {**gameserver_families(), **webfront_families()}
    return {name + suffix for name, kind in families.items() for suffix in _SUFFIXES[kind]}
