"""``python -m chaos fuzz`` end to end, with few cases: the real game's routes on a private
PostgreSQL, anonymous, bearer and cookie clients, schemathesis' conformance checks.

``tests/web/test_fuzz.py`` is the bounded run against the test game (5xx and error
shape only); this one keeps the long run's own machinery working and checks what that
one does not: documented statuses, content types and bodies, refused invalid input,
and that the fuzzing changed nobody else's village.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.fuzz import FuzzConfig, format_fuzz, fuzz_run

pytestmark = pytest.mark.slow


@pytest.mark.timeout(240)
async def test_a_short_fuzzing_run_finds_nothing(tmp_path: Path) -> None:
    result = await fuzz_run(FuzzConfig(examples=4, seed=1, bots=10, workdir=tmp_path / "fuzz"))
    assert result.ok, format_fuzz(result)
    assert result.cases >= 150
    clients = {key.split()[0] for key in result.statuses}
    assert clients == {"anonymous", "bearer", "cookie"}
    assert result.statuses["anonymous 401"] > 0 and result.statuses["bearer 422"] > 0
