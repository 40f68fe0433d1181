"""Tracing descriptions: extents, shapes, bounds, attributes, optional and variadic inputs."""

from __future__ import annotations

import numpy as np
import pytest

from stratagem.errors import TDLError
from stratagem.tdl import Compute, Sum, op, where
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.interpret import run_full


@op
def conv_valid(x, w):
    return lambda b, l: Sum(lambda k: x[b, l + k] * w[k])


def test_an_extent_comes_from_the_tightest_in_bounds_constraint():
    desc = conv_valid.describe([2, 9], [3])
    assert desc.output_shape == (2, 7)


@op
def padded_shift(x):
    return lambda i: x.padded(0.0)[i - 1]


def test_padded_reads_need_an_explicit_shape():
    with pytest.raises(TDLError, match=r"padded_shift.*cannot infer the extent of indices \['i'\]"):
        padded_shift.describe([5])


def test_a_wrong_number_of_indices_raises():
    @op(name="flat")
    def flat(x):
        return lambda i: x[i]

    with pytest.raises(TDLError, match=r"flat.*has 1 indices.*expected 2"):
        flat.describe([3, 4])


def test_attributes_are_bound_with_defaults_and_unknown_ones_rejected():
    @op(name="scaled")
    def scaled(x, *, factor=2.0):
        return lambda i: x[i] * factor

    assert scaled.describe([3]).attrs["factor"] == 2.0
    with pytest.raises(TDLError, match=r"unknown attributes \['facto'\]"):
        scaled.describe([3], facto=1.0)


def test_optional_and_variadic_inputs():
    @op(name="maybe_bias")
    def maybe_bias(x, bias=None):
        return lambda i: x[i] if bias is None else x[i] + bias[i]

    assert len(maybe_bias.describe([4]).inputs) == 1
    assert len(maybe_bias.describe([4], [4]).inputs) == 2

    @op(name="total")
    def total(*xs):
        return lambda i: sum((x[i] for x in xs[1:]), xs[0][i])

    desc = total.describe([3], [3], [3])
    assert [r.name for r in desc.inputs] == ["xs0", "xs1", "xs2"]
    np.testing.assert_allclose(run_full(Analysis(desc), [np.ones(3)] * 3)[0], [3.0, 3.0, 3.0])


def test_a_branch_of_an_index_condition_may_read_past_the_other_branch():
    @op(name="join", shape=lambda a, b: (a.shape[0] + b.shape[0],))
    def join(a, b):
        return lambda i: where(i < a.shape[0], a[i], b[i - a.shape[0]])

    desc = join.describe([2], [3])
    np.testing.assert_allclose(run_full(Analysis(desc), [np.array([1.0, 2]), np.array([3.0, 4, 5])])[0],
                               [1, 2, 3, 4, 5])


def test_a_rank_zero_output_interprets_as_a_zero_dimensional_array():
    @op(name="dot")
    def dot(x, y):
        return Compute([], lambda: Sum(lambda k: x[k] * y[k]))

    out = run_full(Analysis(dot.describe([3], [3])), [np.array([1.0, 2, 3]), np.array([4.0, 5, 6])])[0]
    assert out.shape == () and float(out) == 32.0
