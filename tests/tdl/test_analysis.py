"""Analysis behaviours the library relies on (changes to the core are tested here)."""

from __future__ import annotations

import numpy as np
import pytest

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


# ---- workers moved instead of analyzed ----------------------------------------------------------

def _moved_equals_analyzed(analysis: Analysis, part_counts) -> int:
    """Every splittable dim at every count of `part_counts` dividing it: the shares with workers
    moved (`_worker_shares`) equal those analyzed one by one; returns how many used the moves."""
    used = 0
    for dim in analysis.dims:
        for parts in part_counts:
            if not dim.splittable or parts > dim.size:
                continue
            fast, slow = analysis._worker_shares(dim.name, parts), analysis._worker_shares(dim.name, parts, moved=False)
            assert fast == slow, f"{analysis.name} {dim.name} x{parts}"
            period = analysis._period(dim.name, parts, dim.is_reduction and parts > 1)
            used += fast is not None and period is not None and period[0] < parts - 1
    return used


def test_moved_workers_are_the_analyzed_ones_for_every_library_op():
    from tests.tdl.test_ground_truth import OPS, instances
    used = sum(_moved_equals_analyzed(inst.analysis, range(3, 8)) for name in OPS for inst in instances(name))
    assert used > 50


@pytest.mark.parametrize("model", ["gpt-tiny", "unet", "rnnlm"])
def test_moved_workers_are_the_analyzed_ones_on_zoo_graphs(model):
    """Attention with its causal mask, convolutions with padding and pooling, recurrent steps: the
    moved shares equal the analyzed ones at every count up to 64, and some splits use the moves."""
    from stratagem import zoo
    from stratagem.tdl.graphops import AnalysisCache
    graph = zoo.build(model)
    cache = AnalysisCache(graph)
    distinct = {id(cache[op.name]): cache[op.name] for op in graph.ops}
    assert sum(_moved_equals_analyzed(a, (3, 4, 6, 8, 16, 32, 64)) for a in distinct.values()) > 0


def test_moves_are_refused_where_workers_differ():
    """A causal mask (an index condition on the split dim), a padded window (clipped at the
    edges) and an uneven split are analyzed worker by worker; a matmul's rows move one worker at
    a time, a flip's backwards, and a merging reshape's rows (x[L // 6, L % 6]) a period at a time."""
    from stratagem.tdl.library import LIBRARY
    matmul = Analysis(LIBRARY["mm"].describe((8, 4), (4, 6)))
    assert matmul._period(matmul.dims[0].name, 4, False) == (1, (2, 0), ((2, 0), (0, 0)))
    assert matmul._period(matmul.dims[0].name, 3, False) is None                 # 8 rows in 3
    conv = Analysis(LIBRARY["conv2d"].describe((2, 3, 8, 8), (4, 3, 3, 3), padding=(1, 1)))
    row = next(d for d in conv.dims if d.size == 8 and d.kind == "attribute")
    assert conv._period(row.name, 4, False) is None
    mask = Analysis(LIBRARY["tril"].describe((8, 8)))
    assert all(mask._period(d.name, 4, False) is None for d in mask.dims)
    flipped = Analysis(LIBRARY["flip"].describe((8, 6), dims=(0,)))
    assert flipped._period(flipped.dims[0].name, 4, False) == (1, (2, 0), ((-2, 0),))
    merged = Analysis(LIBRARY["reshape"].describe((4, 6, 5), shape=(24, 5)))
    rows = merged.dims[0].name
    assert merged._period(rows, 12, False) == (3, (6, 0), ((1, 0, 0),))          # 3 chunks of 2: one row of 6
    assert merged._worker_shares(rows, 12) == merged._worker_shares(rows, 12, moved=False)


def test_a_dim_read_whole_by_every_worker_stays_whole_as_the_others_move():
    """A norm split along its normalized dim reads each row whole (its mean square) and its weight
    in chunks; a mean loss split along its positions reads every target (to count them): the
    whole dims do not move, the others do, and the moved shares equal the analyzed ones."""
    from stratagem.tdl.library import LIBRARY
    norm = Analysis(LIBRARY["rms_norm"].describe((4, 6, 8), (8,), normalized_shape=(8,)))
    hidden = norm.dims[2].name
    assert norm._period(hidden, 4, False) == (1, (0, 0, 2), ((0, 0, 0), (2,)))
    loss = Analysis(LIBRARY["cross_entropy"].describe((8, 5), (8,)))
    assert loss._period("n", 4, True) == (1, (), ((2, 0), (0,)))
    for analysis, dim in ((norm, hidden), (loss, "n")):
        assert analysis._worker_shares(dim, 4) == analysis._worker_shares(dim, 4, moved=False)
