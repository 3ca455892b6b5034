"""The client's icons: one drawn SVG per resource, building kind and unit, self-contained."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from refgame.buildings import BUILDINGS
from refgame.resources import RESOURCES
from refgame.units import UNITS

ICONS = Path(__file__).resolve().parents[2] / "refgame" / "static" / "icons"
SVG = "{http://www.w3.org/2000/svg}"
# the alert banner's and the rankings panel's own icons (refgame/static/icons.js)
UI_ICONS = ("incoming", "population", "attack", "defence")
NAMES = sorted({*RESOURCES, *BUILDINGS, *UNITS, *UI_ICONS})


@pytest.mark.parametrize("name", NAMES)
def test_every_resource_building_and_unit_has_an_svg_icon(name: str) -> None:
    path = ICONS / f"{name}.svg"
    assert path.is_file(), f"{path} is missing: draw one (the client shows it next to the name)"
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg" and root.get("viewBox")
    assert root.find(f"{SVG}title") is not None  # a name for screen readers
    for node in root.iter():
        assert node.tag != f"{SVG}script" and not node.tag.endswith("foreignObject")
        for attr, value in node.attrib.items():
            # nothing fetched from elsewhere: the page's CSP allows only its own origin
            assert not (attr.endswith("href") and not value.startswith("#")), (name, value)
            assert "url(http" not in value and "url(//" not in value, (name, value)


def test_no_icon_without_a_thing_to_show() -> None:
    assert sorted(p.stem for p in ICONS.glob("*.svg")) == NAMES
