"""A game's snapshot parts are checked when its statement is built, and mapped into the
union's typed slots in the order of their columns."""

from __future__ import annotations

import pytest
from sqlalchemy import Boolean, cast, select

from gameapi import Resource, SnapshotPart, places, stocks_for
from refgame.models import Building, Troop
from webfront.snapshot_build import SnapshotBuilder, _empty, _fill

STOCKS = stocks_for((Resource("metal", "metal"), Resource("crystal", "crystal")))


def test_parts_fill_the_slots_of_their_column_types() -> None:
    builder = SnapshotBuilder(
        STOCKS,
        [
            SnapshotPart("levels", lambda: select(Building.village_id.label("place_id"),
                                                  Building.kind, Building.level), shape="map"),
            SnapshotPart("troops", lambda: select(Troop.home_village_id.label("place_id"),
                                                  Troop.unit, Troop.count, Troop.village_id)),
        ],
    )  # fmt: skip
    levels, troops = builder.parts
    width_i = builder.widths["i"]
    # i1 is the place; strings come after the integers; the row keeps the column order
    assert levels.names == ("kind", "level") and levels.slots == (2 + width_i, 3)
    assert troops.names == ("unit", "count", "village_id")
    assert troops.slots == (2 + width_i, 3, 4)
    assert builder.place_keys == {"levels": "map", "troops": "list"}
    assert width_i == 4 + 2 + 2 + 2  # id, x, y, updated_ms; 2 stocks, 2 rates, 2 caps


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (SnapshotPart("x", lambda: select(places.c.id, places.c.name)), "labelled place_id"),
        (SnapshotPart("x", lambda: select(places.c.id.label("place_id")), shape="tree"),
         "not in"),
        (SnapshotPart("x", lambda: select(places.c.id.label("place_id"), places.c.name),
                      shape="map"), "2 column"),
        (SnapshotPart("x", lambda: select(places.c.id.label("place_id"),
                                          cast(places.c.x, Boolean))), "integers, strings"),
    ],
)  # fmt: skip
def test_a_malformed_part_is_refused_when_the_statement_is_built(
    part: SnapshotPart, message: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        SnapshotBuilder(STOCKS, [part])


def test_an_object_part_is_one_row_through_its_view_or_null() -> None:
    part = SnapshotPart(
        "best",
        lambda: select(Troop.home_village_id.label("place_id"), Troop.unit, Troop.count),
        shape="object",
        view=lambda row, viewer: {**row, "viewer": viewer},
    )
    builder = SnapshotBuilder(STOCKS, [part])
    (built,) = builder.parts
    assert builder.place_keys == {"best": "object"} and built.names == ("unit", "count")
    assert _empty("object") is None  # a place or player without a row
    found = [((), built, ["spear", 7])]
    assert _fill(None, found, 5) == {"unit": "spear", "count": 7, "viewer": 5}
