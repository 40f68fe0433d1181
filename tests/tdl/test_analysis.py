"""Analysis behaviours the library relies on (changes to the core are tested here)."""

from __future__ import annotations

import numpy as np

from stratagem.tdl import Compute, Sum, analyze, exp, log, op
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.interpret import Coverage, run_worker


def test_exactness_is_required_only_where_the_split_narrows_ranges():
    strided = analyze("slice", [6, 9], dim=1, start=0, end=None, step=2)
    assert strided.can_split("d0", 2)          # rows: each worker reads what the whole op reads
    assert not strided.can_split("d1", 2)      # every other column: a box would over-fetch


def test_a_copy_of_the_top_reducer_elsewhere_is_not_linear():
    @op(name="lse_like")
    def lse_like(x):
        def body(b):
            m = Sum(lambda c: x[b, c])
            return m + log(Sum(lambda c2: exp(x[b, c2] - m)))
        return lambda b: body(b)

    a = Analysis(lse_like.describe([3, 4]))
    assert [d.name for d in a.dims] == ["b"]


def test_partial_sums_of_a_scaled_reduction_add_up():
    a = analyze("mean", [4, 6], dim=(1,))
    x = np.arange(24.0).reshape(4, 6)
    parts = [run_worker(a, [x], {"r1": a.chunk("r1", 3, w)}, first_in_reduction=w == 0)[0] for w in range(3)]
    np.testing.assert_allclose(sum(parts), x.mean(1))


def test_the_causal_mask_keeps_workers_off_the_keys_they_never_read():
    a = analyze("cumsum", [7], dim=0)
    reads = Coverage()
    run_worker(a, [np.ones(7)], {"d0": (0, 3)}, coverage=reads)
    assert reads.masks[0].tolist() == [True] * 3 + [False] * 4
    assert a.share({"d0": (0, 3)}).input_boxes == (((0, 3),),)


def test_compute_reducers_and_output_names_are_kept_apart():
    @op(name="double_sum")
    def double_sum(x):
        return Compute(["b"], lambda b: Sum(Compute(["r"], lambda r: x[b, r])) * 2.0)

    a = Analysis(double_sum.describe([2, 3]))
    assert a.split("r", 3).output_placement == "P(sum)"
