"""The console page: served with a strict CSP and no inline script or style."""

from __future__ import annotations

import re

from aiohttp.test_utils import TestClient

from webfront.admin import STATIC_DIR


async def test_page_and_files_are_served_under_a_strict_csp(client: TestClient) -> None:
    resp = await client.get("/admin")
    assert resp.status == 200
    csp = resp.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    html = await resp.text()
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html) is None  # every script is a file
    assert "<style" not in html and " style=" not in html
    assert re.search(r"\son[a-z]+=", html) is None  # no inline event handlers
    for name in ("admin.js", "admin.css"):
        got = await client.get(f"/admin/static/{name}")
        assert got.status == 200
        assert (await got.read()) == (STATIC_DIR / name).read_bytes()
    assert (await client.get("/admin/static/..%2Fapp.js")).status == 404
