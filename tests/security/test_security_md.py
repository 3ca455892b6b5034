"""SECURITY.md names the test behind each defence: every one it names must exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def test_every_test_named_in_security_md_exists() -> None:
    text = (ROOT / "SECURITY.md").read_text()
    references = REFERENCE.findall(text)
    assert len(references) >= 40
    missing = []
    for path, name in references:
        source = ROOT / path
        if not source.exists() or not re.search(rf"def {name}\(", source.read_text()):
            missing.append(f"{path}::{name}")
    assert missing == []
