from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refgame import buildings as b
from refgame.buildings import (
    BUILD_QUEUE_LIMIT,
    BUILDINGS,
    BuildOrderInfo,
    build_cost,
    build_duration_ms,
    can_build,
    plan_build,
)
from refgame.errors import MaxLevel, PrerequisiteMissing, QueueFull, UnknownBuilding
from refgame.resources import Cost

VILLAGE = {"main_building": 3, "rally_point": 1, "warehouse": 1, "woodcutter": 2}


def test_tables_are_consistent() -> None:
    b.validate_tables()


def test_field_kinds_cover_every_resource() -> None:
    assert set(b.FIELD_KINDS.values()) <= set(BUILDINGS)
    assert {"main_building", "warehouse", "granary", "barracks", "wall", "rally_point"} <= set(
        BUILDINGS
    )


def test_level_one_costs_the_base_and_level_two_rounds_half_up() -> None:
    assert build_cost("main_building", 1) == Cost(70, 40, 60, 20)
    # 70×1.28 = 89.6 -> 90, 40×1.28 = 51.2 -> 51, 60×1.28 = 76.8 -> 77, 20×1.28 = 25.6 -> 26
    assert build_cost("main_building", 2) == Cost(90, 51, 77, 26)
    # 40 × 1.67 = 66.8 -> 67; 50 × 1.67 = 83.5 -> 84 (half up)
    assert build_cost("woodcutter", 2) == Cost(67, 167, 84, 100)


@given(st.sampled_from(sorted(BUILDINGS)), st.data())
def test_costs_and_durations_grow_strictly_with_level(kind: str, data: st.DataObject) -> None:
    top = BUILDINGS[kind].max_level
    level = data.draw(st.integers(1, top - 1))
    lo, hi = build_cost(kind, level), build_cost(kind, level + 1)
    assert all(h > low for h, low in zip(hi.as_dict().values(), lo.as_dict().values(), strict=True)
               if low > 0)  # fmt: skip
    assert hi.total > lo.total
    assert build_duration_ms(kind, level + 1, 1, 1) > build_duration_ms(kind, level, 1, 1)


def test_duration_formula() -> None:
    # 1500 s × 1.2^(2-1) = 1800 s at main building 1, speed 1
    assert build_duration_ms("main_building", 2, 1, 1) == 1_800_000
    # at main building 20 (50 %) and world speed 3: 1800 s × 0.5 / 3 = 300 s
    assert build_duration_ms("main_building", 2, 20, 3) == 300_000
    # a huge speed still leaves at least one ms
    assert build_duration_ms("woodcutter", 1, 1, 10**12) == 1


@given(st.integers(1, 19), st.integers(0, 19))
def test_a_higher_main_building_never_slows_building(level: int, mb: int) -> None:
    assert build_duration_ms("barracks", level, mb + 1, 1) <= build_duration_ms(
        "barracks", level, mb, 1
    )


def test_unknown_building() -> None:
    with pytest.raises(UnknownBuilding) as info:
        build_cost("castle", 1)
    assert info.value.code == "unknown_building"
    assert "main_building" in info.value.message
    with pytest.raises(UnknownBuilding):
        can_build("castle", VILLAGE)


def test_cost_past_max_level() -> None:
    with pytest.raises(MaxLevel):
        build_cost("woodcutter", 11)
    with pytest.raises(ValueError):
        build_cost("woodcutter", 0)


def test_can_build_returns_the_next_level() -> None:
    assert can_build("woodcutter", VILLAGE) == 3
    assert can_build("wall", VILLAGE) == 1  # no row: level 0


def test_max_level_counts_queued_levels() -> None:
    top = BUILDINGS["woodcutter"].max_level
    with pytest.raises(MaxLevel) as info:
        can_build("woodcutter", {**VILLAGE, "woodcutter": top})
    assert info.value.code == "max_level"
    queued = [BuildOrderInfo("woodcutter", top, 1000)]
    with pytest.raises(MaxLevel):
        can_build("woodcutter", {**VILLAGE, "woodcutter": top - 1}, queued)
    assert can_build("woodcutter", {**VILLAGE, "woodcutter": top - 2}, queued[:0]) == top - 1


def test_queued_orders_raise_the_target_level() -> None:
    queued = [BuildOrderInfo("woodcutter", 3, 1000)]
    assert can_build("woodcutter", VILLAGE, queued) == 4


def test_prerequisites_count_built_levels_only() -> None:
    with pytest.raises(PrerequisiteMissing) as info:
        can_build("barracks", {"main_building": 2, "rally_point": 1})
    assert info.value.code == "prerequisite_missing"
    assert info.value.details["requires"] == {"main_building": 3}
    queued = [BuildOrderInfo("main_building", 3, 1000)]
    with pytest.raises(PrerequisiteMissing):
        can_build("barracks", {"main_building": 2, "rally_point": 1}, queued)
    assert can_build("barracks", VILLAGE) == 1


def test_queue_limit() -> None:
    queued = [BuildOrderInfo("woodcutter", 3 + i, 1000 * (i + 1)) for i in range(BUILD_QUEUE_LIMIT)]
    with pytest.raises(QueueFull) as info:
        can_build("wall", VILLAGE, queued)
    assert info.value.code == "queue_full"


def test_orders_run_one_after_another() -> None:
    now = 1_000_000
    first = plan_build("woodcutter", VILLAGE, [], now, 1)
    assert first.start_ms == now
    assert first.target_level == 3
    assert first.cost == build_cost("woodcutter", 3)
    assert first.done_ms == now + build_duration_ms("woodcutter", 3, 3, 1)
    second = plan_build("woodcutter", VILLAGE, [first], now + 5, 1)
    assert second.target_level == 4
    assert second.start_ms == first.done_ms
    assert second.done_ms == first.done_ms + build_duration_ms("woodcutter", 4, 3, 1)
    # a finished order in the list does not delay a new one
    late = plan_build("wall", VILLAGE, [BuildOrderInfo("wall", 1, now - 10)], now, 1)
    assert late.start_ms == now
