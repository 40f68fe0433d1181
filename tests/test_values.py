"""Checked values: each kind refuses what is not of it, zero and negatives included, and says what
it expected."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stratagem import values
from stratagem.errors import ConfigError


@pytest.mark.parametrize("text, expected", [("16GB", 16e9), ("14.5GiB", 14.5 * 2 ** 30), ("2e10", 2e10),
                                            ("512 MiB", 512 * 2 ** 20), ("1kb", 1e3), ("100", 100.0),
                                            (3e9, 3e9), (np.int64(7), 7.0)])
def test_sizes_read_numbers_and_decimal_and_binary_units(text, expected):
    assert values.size_bytes(text, "memory cap") == pytest.approx(expected)


@pytest.mark.parametrize("value", ["16 GX", "lots", "-3GB", "", "0GB", "0", 0, -1.0, math.inf, math.nan, "inf",
                                   "nan", None, True, [16]])
def test_a_size_that_is_not_one_says_what_would_do(value):
    with pytest.raises(ConfigError, match=r"memory cap is not valid: expected a size > 0, e\.g\. 16GB") as error:
        values.size_bytes(value, "memory cap")
    assert error.value.got == repr(value)


@pytest.mark.parametrize("value, ok", [(1, True), (np.int32(3), True), (0, False), (-2, False), (2.0, False),
                                       (True, False), ("2", False), (None, False), (9, False)])
def test_integers_are_ints_in_range(value, ok):
    if ok:
        assert values.integer(value, "devices", 1, 8) == int(value)
    else:
        with pytest.raises(ConfigError, match=r"devices is not valid: expected an integer in 1\.\.8"):
            values.integer(value, "devices", 1, 8)


@pytest.mark.parametrize("value", [0, -1, math.inf, -math.inf, math.nan, "3", None, False])
def test_positive_numbers_are_finite_and_above_zero(value):
    with pytest.raises(ConfigError, match="expected a finite number > 0"):
        values.positive(value, "budget_s")


def test_non_negative_numbers_take_zero_but_not_negatives_or_infinity():
    assert values.non_negative(0, "latency_s") == 0.0 and values.positive(2, "x") == 2.0
    for value in (-1e-9, math.inf, math.nan):
        with pytest.raises(ConfigError, match="expected a finite number >= 0"):
            values.non_negative(value, "latency_s")


def test_names_outside_a_list_name_the_closest():
    assert values.one_of("ft", "search algorithm", ["ft", "mcmc"]) == "ft"
    with pytest.raises(ConfigError, match="unknown search algorithm 'mcmcc'.*Did you mean mcmc") as error:
        values.one_of("mcmcc", "search algorithm", ["ft", "mcmc"])
    assert error.value.expected == "one of ft, mcmc"
    assert values.closest("zzz", ["ft", "mcmc"]) is None
