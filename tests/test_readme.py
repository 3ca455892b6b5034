"""The README's configuration table stays true to the settings."""

from __future__ import annotations

import re
from pathlib import Path

from common.settings import env_variables

README = Path(__file__).resolve().parent.parent / "README.md"


def test_configuration_table_lists_every_variable() -> None:
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", README.read_text(), re.MULTILINE))
    assert documented == env_variables()


def test_readme_shows_the_two_commands() -> None:
    text = README.read_text()
    assert "make run" in text and "make test" in text
