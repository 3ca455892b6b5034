"""The reference game's starting village: the tests register real players."""

from __future__ import annotations

from refgame.world import village_template

__all__ = ["village_template"]
