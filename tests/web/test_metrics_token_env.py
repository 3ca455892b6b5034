"""The web tier's /metrics token comes from the environment (WEB_METRICS_TOKEN), so a
scraper on another host (the compose stack's Prometheus) can read it."""

from __future__ import annotations

from typing import Any

import pytest

from common.clock import ManualClock
from common.errors import ConfigError
from common.settings import Settings, load_settings
from tests.web.conftest import FAST_CONFIG
from webfront.app import create_app

TOKEN = "a-long-random-scrape-token"


async def test_the_token_of_the_settings_opens_metrics(
    aiohttp_client: Any, web_settings: Settings, clock: ManualClock
) -> None:
    settings = web_settings.model_copy(update={"web_metrics_token": TOKEN})
    client = await aiohttp_client(create_app(settings, clock, config=FAST_CONFIG))
    proxied = {"X-Forwarded-For": "203.0.113.9"}
    assert (await client.get("/metrics", headers=proxied)).status == 404
    resp = await client.get("/metrics", headers={**proxied, "Authorization": f"Bearer {TOKEN}"})
    assert resp.status == 200 and "webfront_requests_total" in await resp.text()


def test_a_short_token_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEB_METRICS_TOKEN", "short")
    with pytest.raises(ConfigError, match=r"^WEB_METRICS_TOKEN: "):
        load_settings()
    monkeypatch.setenv("WEB_METRICS_TOKEN", TOKEN)
    assert load_settings().web_metrics_token == TOKEN
