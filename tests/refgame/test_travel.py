from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refgame.errors import InvalidMarch, InvalidQuantity, NotRecallable, PrerequisiteMissing
from refgame.travel import (
    check_recall,
    distance,
    distance_squared,
    march_arrival_ms,
    march_duration_ms,
    plan_march,
    recall,
    recall_deadline_ms,
    recall_return_ms,
    return_march,
    travel_ms,
)
from refgame.units import UNITS

HOUR = 3_600_000
coords = st.tuples(st.integers(-400, 400), st.integers(-400, 400))


def test_distance_is_euclidean_without_wrap() -> None:
    assert distance_squared((0, 0), (3, 4)) == 25
    assert distance((0, 0), (3, 4)) == 5.0
    assert distance((-200, 0), (200, 0)) == 400.0  # no wrap-around on a 401-wide map


def test_duration_uses_the_slowest_unit() -> None:
    # 5 fields at 5 fields/hour (praetorian) is one hour, whoever else marches along
    assert march_duration_ms((0, 0), (3, 4), {"praetorian": 1, "equites_imperatoris": 9}, 1) == HOUR
    assert march_duration_ms((0, 0), (3, 4), {"praetorian": 1}, 2) == HOUR // 2
    assert march_arrival_ms(1000, (0, 0), (3, 4), {"praetorian": 1}, 1) == 1000 + HOUR


@given(st.integers(1, 10**6), st.integers(1, 100), st.sampled_from([1, 2, 3, 0.5, 1.5, 7]))
def test_travel_time_is_the_exact_value_rounded_up(d2: int, v: int, s: float) -> None:
    ms = travel_ms(d2, v, s)
    exact = math.sqrt(d2) * HOUR / (v * s)
    assert ms >= 1
    assert ms - 1 < exact + 1e-6 and ms >= exact - 1e-6
    # exactly: ms is the smallest n with (n × v × s)² ≥ d2 × HOUR²
    fs = Fraction(repr(s))
    assert (ms * v * fs) ** 2 >= d2 * HOUR**2
    assert ms == 1 or ((ms - 1) * v * fs) ** 2 < d2 * HOUR**2


@given(coords, coords)
def test_travel_is_symmetric(a: tuple[int, int], b: tuple[int, int]) -> None:
    if a != b:
        troops = {"legionnaire": 1}
        assert march_duration_ms(a, b, troops, 1) == march_duration_ms(b, a, troops, 1)


def test_plan_march() -> None:
    plan = plan_march("attack", {"legionnaire": 5, "imperian": 0}, (0, 0), (0, 6), 1, 10, 1)
    assert plan.kind == "attack"
    assert plan.troops == {"legionnaire": 5}
    assert plan.depart_ms == 10
    assert plan.arrive_ms == 10 + HOUR  # 6 fields at 6 fields/hour


def test_plan_march_refusals() -> None:
    args = ((0, 0), (5, 5), 1, 0, 1)
    with pytest.raises(InvalidMarch):
        plan_march("return", {"legionnaire": 1}, *args)
    with pytest.raises(InvalidMarch):
        plan_march("siege", {"legionnaire": 1}, *args)
    with pytest.raises(InvalidQuantity):
        plan_march("raid", {"legionnaire": 0}, *args)
    with pytest.raises(InvalidQuantity):
        plan_march("raid", {"legionnaire": -3}, *args)
    with pytest.raises(InvalidMarch):
        plan_march("raid", {"legionnaire": 1}, (2, 2), (2, 2), 1, 0, 1)
    with pytest.raises(PrerequisiteMissing):
        plan_march("raid", {"legionnaire": 1}, (0, 0), (5, 5), 0, 0, 1)


def test_recall_window_is_half_the_way() -> None:
    depart, arrive = 1_000, 2_001  # 1001 ms: half is 500.5, so 1500 is in, 1501 is out
    assert recall_deadline_ms(depart, arrive) == 1_501
    check_recall("attack", depart, arrive, 1_500)
    with pytest.raises(NotRecallable) as info:
        check_recall("attack", depart, arrive, 1_501)
    assert info.value.code == "not_recallable"
    with pytest.raises(NotRecallable):
        check_recall("return", depart, arrive, 1_000)


def test_recall_returns_in_the_time_travelled() -> None:
    assert recall_return_ms(1_000, 1_400) == 1_800
    back = recall("reinforce", {"praetorian": 3}, 1_000, 3_000, 1_400)
    assert (back.kind, back.depart_ms, back.arrive_ms) == ("return", 1_400, 1_800)
    assert back.troops == {"praetorian": 3}


@given(st.integers(0, 10**12), st.integers(1, 10**9), st.data())
def test_recalled_troops_are_home_before_they_would_have_arrived(
    depart: int, duration: int, data: st.DataObject
) -> None:
    arrive = depart + duration
    deadline = recall_deadline_ms(depart, arrive)
    if deadline > depart:
        now = data.draw(st.integers(depart, deadline - 1))
        check_recall("raid", depart, arrive, now)
        assert recall_return_ms(depart, now) <= arrive
    with pytest.raises(NotRecallable):
        check_recall("raid", depart, arrive, data.draw(st.integers(deadline, arrive)))


def test_no_survivors_no_return_march() -> None:
    assert return_march((0, 0), (3, 4), {"legionnaire": 0}, 0, 1) is None
    assert return_march((0, 0), (3, 4), {}, 0, 1) is None


def test_return_march_goes_at_the_survivors_speed() -> None:
    back = return_march(
        (0, 0), (0, 14), {"equites_imperatoris": 2, "praetorian": 0}, 5, 1, {"wood": 7}
    )
    assert back is not None
    assert back.kind == "return"
    assert back.troops == {"equites_imperatoris": 2}
    assert back.arrive_ms == 5 + HOUR * 14 // UNITS["equites_imperatoris"].speed
    assert back.loot == {"wood": 7}
