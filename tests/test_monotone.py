"""Isotonic regression: the least-squares non-decreasing fit, checked against its definition."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.monotone import non_decreasing


def test_a_dip_is_pooled_with_what_it_violates():
    assert non_decreasing([3.6, 3.0, 1.6, 4.3]) == pytest.approx([2.7333333, 2.7333333, 2.7333333, 4.3])
    assert non_decreasing([1, 2, 3]) == [1, 2, 3] and non_decreasing([]) == []
    assert non_decreasing([2, 1], weights=[3, 1]) == pytest.approx([1.75, 1.75])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=5))
def test_no_non_decreasing_sequence_is_closer(values):
    fitted = non_decreasing(values)
    assert all(a <= b + 1e-12 for a, b in zip(fitted, fitted[1:]))
    error = sum((f - v) ** 2 for f, v in zip(fitted, values))
    # every non-decreasing sequence on a grid of quarter steps: none is closer
    for candidate in itertools.combinations_with_replacement([i / 4 for i in range(17)], len(values)):
        assert error <= sum((c - v) ** 2 for c, v in zip(candidate, values)) + 1e-9
