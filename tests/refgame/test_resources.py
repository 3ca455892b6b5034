from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refgame.errors import InsufficientResources, InvalidQuantity
from refgame.resources import (
    RESOURCES,
    Cost,
    check_affordable,
    check_count,
    exact,
    round_half_up,
    scale_duration_ms,
    scale_rate,
)


def test_resources_are_the_stock_columns() -> None:
    assert RESOURCES == ("wood", "clay", "iron", "crop")


def test_floats_are_read_as_their_decimal() -> None:
    assert exact(1.28) == Fraction(128, 100)
    assert exact(0.1) * 3 == Fraction(3, 10)  # a binary float would give 0.30000000000000004
    assert exact(7) == 7


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), True])
def test_bad_world_speed_is_refused(bad: float) -> None:
    with pytest.raises((ValueError, TypeError)):
        scale_rate(10, bad)


def test_rate_rounds_half_up() -> None:
    assert scale_rate(5, 1.5) == 8  # 7.5 -> 8
    assert scale_rate(5, 1.4) == 7  # 7.0
    assert scale_rate(25, 0.1) == 3  # 2.5 -> 3
    assert scale_rate(3, 0.1) == 0  # 0.3 -> 0


def test_duration_rounds_up_and_is_at_least_one_ms() -> None:
    assert scale_duration_ms(1000, 3) == 334  # 333.33 -> 334
    assert scale_duration_ms(900, 3) == 300
    assert scale_duration_ms(1, 1_000_000) == 1


@given(st.integers(0, 10**9), st.integers(1, 1000))
def test_integer_speed_scales_exactly(base: int, s: int) -> None:
    assert scale_rate(base, s) == base * s
    assert scale_duration_ms(base * s, s) == max(1, base)


@given(st.fractions(min_value=0, max_value=10**6))
def test_round_half_up(x: Fraction) -> None:
    n = round_half_up(x)
    assert n - Fraction(1, 2) <= x < n + Fraction(1, 2)


def test_cost_arithmetic() -> None:
    c = Cost(1, 2, 3, 4)
    assert c * 3 == Cost(3, 6, 9, 12) == 3 * c
    assert c + c == c * 2
    assert c.total == 10
    assert c.as_dict() == {"wood": 1, "clay": 2, "iron": 3, "crop": 4}
    assert Cost.of({"iron": 5}) == Cost(0, 0, 5, 0)


def test_affordability() -> None:
    check_affordable(Cost(10, 10, 10, 10), {"wood": 10, "clay": 10, "iron": 10, "crop": 10})
    with pytest.raises(InsufficientResources) as info:
        check_affordable(Cost(10, 10, 10, 10), {"wood": 9, "clay": 10, "iron": 0, "crop": 10})
    assert info.value.code == "insufficient_resources"
    assert info.value.details["missing"] == {"wood": 1, "iron": 10}
    assert info.value.to_dict()["code"] == "insufficient_resources"


@pytest.mark.parametrize("bad", [0, -1, -(10**20), 101, 10**30, 1.0, 2.5, "3", None, True, False])
def test_bad_counts_are_refused(bad: object) -> None:
    with pytest.raises(InvalidQuantity) as info:
        check_count(bad, what="troops", maximum=100)
    assert info.value.code == "invalid_quantity"
    assert info.value.http_status == 400
    assert "troops" in info.value.message


def test_good_counts_pass() -> None:
    assert check_count(1, what="x", maximum=100) == 1
    assert check_count(100, what="x", maximum=100) == 100
