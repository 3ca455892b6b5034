"""The README's configuration table stays true to the settings."""

from __future__ import annotations

import re
from pathlib import Path

from common.settings import env_variables

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_configuration_table_lists_every_variable() -> None:
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", README.read_text(), re.MULTILINE))
    assert documented == env_variables()


def test_readme_shows_the_two_commands() -> None:
    text = README.read_text()
    assert "make run" in text and "make test" in text


def test_readme_shows_the_example_game_as_it_is() -> None:
    """The README's example game is the tested package, file for file."""
    text = (ROOT / "README.md").read_text()
    for name in ("world.py", "commands.py", "handlers.py"):
        path = f"examples/harvest/{name}"
        block = f"```python\n# {path}\n{(ROOT / path).read_text()}```"
        assert block in text, f"README.md does not show {path} as it is"
