"""Holm's step-down correction against hand computations: the adjusted p-values, the decisions at alpha = 0.05, where
it rejects more than Bonferroni and where its step-down stops before a p-value that alone would pass."""

from __future__ import annotations

import pytest

from domain.multiple_tests import holm


def adjusted(p_values: list[float]) -> list[float]:
    return [d.adjusted_p for d in holm(p_values)]


def rejected(p_values: list[float]) -> list[bool]:
    return [d.rejected for d in holm(p_values)]


def test_holm_adjusts_each_p_value_by_its_rank_and_keeps_them_in_order():
    # by hand: sorted 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04, raised to 0.06)
    assert adjusted([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert rejected([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]


def test_holm_rejects_more_than_bonferroni():
    # 0.01 x3 = 0.03, 0.02 x2 = 0.04, 0.04 x1 = 0.04: all three; Bonferroni (x3) keeps only the first
    assert adjusted([0.02, 0.01, 0.04]) == pytest.approx([0.04, 0.03, 0.04])
    assert rejected([0.02, 0.01, 0.04]) == [True, True, True]


def test_the_step_down_stops_at_the_first_test_it_keeps():
    # 0.01 x3 = 0.03 rejected; 0.03 x2 = 0.06 kept, so 0.04 (x1 = 0.04 alone) is kept too
    assert adjusted([0.04, 0.03, 0.01]) == pytest.approx([0.06, 0.06, 0.03])
    assert rejected([0.04, 0.03, 0.01]) == [False, False, True]


def test_one_test_is_its_own_p_value_and_none_gives_none():
    assert adjusted([0.049]) == pytest.approx([0.049]) and rejected([0.049]) == [True]
    assert adjusted([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []
