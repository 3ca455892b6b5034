from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refgame import units as u
from refgame.errors import (
    InsufficientTroops,
    InvalidQuantity,
    PrerequisiteMissing,
    QueueFull,
    UnknownUnit,
)
from refgame.units import (
    MAX_TRAIN_PER_ORDER,
    TRAINING_QUEUE_LIMIT,
    UNITS,
    carry_capacity,
    check_troops_available,
    plan_training,
    slowest_speed,
    total_upkeep,
    train_cost,
    train_duration_ms,
    validate_troops,
)


def test_table_is_usable() -> None:
    u.validate_tables()
    assert len(UNITS) >= 4
    assert {s.category for s in UNITS.values()} == {"infantry", "cavalry"}


def test_training_duration() -> None:
    # 3 legionnaires × 1600 s at barracks level 1, speed 1
    assert train_duration_ms("legionnaire", 3, 1, 1) == 4_800_000
    # barracks level 2 trains in 90 % of the time; world speed 2 halves it
    assert train_duration_ms("legionnaire", 3, 2, 2) == 2_160_000


@given(st.sampled_from(sorted(UNITS)), st.integers(1, MAX_TRAIN_PER_ORDER - 1))
def test_more_units_take_longer_and_cost_more(unit: str, n: int) -> None:
    level = UNITS[unit].barracks_level
    assert train_duration_ms(unit, n + 1, level, 1) > train_duration_ms(unit, n, level, 1)
    assert train_cost(unit, n + 1).total > train_cost(unit, n).total
    assert train_cost(unit, n) == UNITS[unit].cost * n


@pytest.mark.parametrize("bad", [0, -5, MAX_TRAIN_PER_ORDER + 1, 10**18, 2.0, "1", True])
def test_bad_training_counts(bad: object) -> None:
    with pytest.raises(InvalidQuantity):
        train_duration_ms("legionnaire", bad, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidQuantity):
        train_cost("legionnaire", bad)  # type: ignore[arg-type]


def test_unknown_unit() -> None:
    with pytest.raises(UnknownUnit) as info:
        train_duration_ms("dragon", 1, 1, 1)
    assert info.value.code == "unknown_unit"
    assert "legionnaire" in info.value.message


def test_barracks_is_needed() -> None:
    with pytest.raises(PrerequisiteMissing):
        train_duration_ms("legionnaire", 1, 0, 1)
    needs = UNITS["equites_imperatoris"].barracks_level
    with pytest.raises(PrerequisiteMissing) as info:
        train_duration_ms("equites_imperatoris", 1, needs - 1, 1)
    assert info.value.details["requires"] == {"barracks": needs}
    assert train_duration_ms("equites_imperatoris", 1, needs, 1) > 0


def test_training_queue() -> None:
    plan = plan_training("legionnaire", 2, 1, [5_000], 1_000, 1)
    assert plan.start_ms == 5_000
    assert plan.done_ms == 5_000 + 3_200_000
    assert plan.cost == UNITS["legionnaire"].cost * 2
    with pytest.raises(QueueFull):
        plan_training("legionnaire", 2, 1, [5_000] * TRAINING_QUEUE_LIMIT, 1_000, 1)


def test_validate_troops() -> None:
    assert validate_troops({"legionnaire": 3, "praetorian": 0}) == {"legionnaire": 3}
    bads: list[object] = [{}, {"legionnaire": 0}, {"legionnaire": -1}, {"legionnaire": 1.5}, []]
    for bad in bads:
        with pytest.raises(InvalidQuantity):
            validate_troops(bad)  # type: ignore[arg-type]
    with pytest.raises(UnknownUnit):
        validate_troops({"dragon": 1})


def test_troops_available() -> None:
    check_troops_available({"legionnaire": 3}, {"legionnaire": 3, "praetorian": 1})
    with pytest.raises(InsufficientTroops) as info:
        check_troops_available({"legionnaire": 4, "imperian": 1}, {"legionnaire": 3})
    assert info.value.details["missing"] == {"legionnaire": 1, "imperian": 1}


def test_army_figures() -> None:
    army = {"legionnaire": 2, "equites_imperatoris": 1}
    assert total_upkeep(army) == 2 * 1 + 3
    assert carry_capacity(army) == 2 * 50 + 100
    assert slowest_speed(army) == 6
    assert slowest_speed({"legionnaire": 0, "equites_imperatoris": 1}) == 14
    with pytest.raises(InvalidQuantity):
        slowest_speed({"legionnaire": 0})
