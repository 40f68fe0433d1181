"""The op library as the papers describe it: FlexFlow's Table 2 kinds, Tofu's conv1d halo
intervals, errors that name the op and the offending expression, and every example tracing."""

from __future__ import annotations

from fractions import Fraction

import pytest

from stratagem.errors import TDLError
from stratagem.tdl import Sum, analyze, op
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.library import LIBRARY

OPS = sorted(name for name in LIBRARY if name != "opaque")


def kinds(analysis):
    return {d.name: d.kind for d in analysis.dims}


# ---- FlexFlow Table 2 ---------------------------------------------------------------------------

def test_conv2d_kinds_are_flexflow_table_2():
    a = analyze("conv2d", [4, 3, 9, 9], [8, 3, 3, 3], [8], padding=1)
    assert kinds(a) == {"b": "sample", "h": "attribute", "w": "attribute", "co": "parameter",
                        "ci": "reduction", "kh": "reduction", "kw": "reduction"}
    assert {d.reducer for d in a.dims if d.is_reduction} == {"sum"}


def test_conv1d_kinds_are_flexflow_table_2():
    a = analyze("conv1d", [4, 3, 9], [8, 3, 3])
    assert kinds(a) == {"b": "sample", "l": "attribute", "co": "parameter", "ci": "reduction",
                        "k": "reduction"}


@pytest.mark.parametrize("name, shape, positions", [
    ("max_pool1d", [4, 3, 9], ["l"]), ("avg_pool1d", [4, 3, 9], ["l"]),
    ("max_pool2d", [4, 3, 8, 8], ["h", "w"]), ("avg_pool2d", [4, 3, 8, 8], ["h", "w"])])
def test_pooling_kinds_are_flexflow_table_2(name, shape, positions):
    a = analyze(name, shape, kernel_size=2)
    assert kinds(a)["b"] == "sample" and kinds(a)["c"] == "attribute"
    assert all(kinds(a)[p] == "attribute" for p in positions)


def test_matrix_multiplication_kinds_are_flexflow_table_2():
    assert kinds(analyze("linear", [6, 5], [7, 5])) == {"b": "sample", "j": "parameter", "k": "reduction"}
    product = analyze("mm", [6, 5], [5, 7], weights=[False, True])
    assert kinds(product) == {"m": "sample", "n": "parameter", "k": "reduction"}
    activations = analyze("mm", [6, 5], [5, 7], weights=[False, False])
    assert kinds(activations)["n"] == "attribute"


def test_embedding_vocab_split_is_a_reduction_left_as_partial_sums():
    a = analyze("embedding", [4, 5], [11, 6])
    split = a.split("v", 2)
    assert split.output_placement == "P(sum)" and split.placements == ("R", "S(0)")


def test_training_batch_norm_statistics_split_on_the_batch_are_partial_sums():
    stats = analyze("batch_norm_stats", [4, 3, 5, 5])
    split = stats.split("rb", 2)
    assert split.output_placement == "P(sum)" and split.placements == ("S(0)",)
    apply = analyze("batch_norm_apply", [4, 3, 5, 5], [2, 3], [3], [3], count=100)
    assert apply.split("b", 2).placements == ("S(0)", "R", "R", "R")


def test_layer_norm_offers_no_reduction_split_and_replicates_rows_under_a_hidden_split():
    a = analyze("layer_norm", [4, 5, 6], [6], [6], normalized_shape=(6,))
    assert not any(d.is_reduction for d in a.dims)
    assert a.split("d2", 2).placements == ("R", "S(0)", "S(0)")


def test_causal_attention_split_on_queries_reads_a_prefix_of_the_keys():
    a = analyze("scaled_dot_product_attention", [2, 4, 6, 3], [2, 4, 6, 3], [2, 4, 6, 3], is_causal=True)
    first, second = a.split("i", 2).workers
    assert first.input_boxes[1][2] == (0, 3) and second.input_boxes[1][2] == (0, 6)


def test_grouped_query_attention_head_split_shards_the_key_heads():
    a = analyze("scaled_dot_product_attention", [2, 4, 5, 3], [2, 2, 5, 3], [2, 2, 5, 3], enable_gqa=True)
    assert a.split("h", 2).placements == ("S(1)", "S(1)", "S(1)")


def test_lstm_cell_hidden_split_is_not_offered_because_gate_rows_interleave():
    a = analyze("lstm_cell", [3, 4], [3, 5], [3, 5], [20, 4], [20, 5], [20], [20])
    assert a.can_split("b", 2) and not a.can_split("j", 2)


def test_a_stride_two_1x1_convolution_still_splits_its_batch():
    a = analyze("conv2d", [4, 3, 8, 8], [6, 3, 1, 1], stride=2)
    assert a.can_split("b", 2) and a.split("b", 2).placements == ("S(0)", "R")


def test_gpt2_head_reshape_splits_along_batch_tokens_and_heads():
    a = analyze("reshape", [2, 8, 16], shape=(2, 8, 4, 4))
    assert [a.split(d, 2).placements for d in ("d0", "d1", "d2")] == [("S(0)",), ("S(1)",), ("S(2)",)]


def test_a_language_model_head_reshape_splits_rows_and_vocabulary_at_full_size():
    """[B, T, V] -> [B*T, V] before the loss: T5-small's 8 GB logits. Each dim keeps its own index
    arithmetic, so the analysis never enumerates B*T x V positions (it used to, gave up, and left
    the reshape replicated: a full all-gather of the logits on every device)."""
    a = analyze("reshape", [128, 512, 32128], shape=(65536, 32128))
    assert a.split("d0", 16).placements == ("S(0)",) and a.split("d1", 16).placements == ("S(2)",)
    assert a.split("d0", 16).workers[3].input_boxes[0] == ((24, 32), (0, 512), (0, 32128))


# ---- Tofu's symbolic intervals: conv1d's halo ------------------------------------------------------

def test_conv1d_halo_split_symbolic_intervals():
    a = analyze("conv1d", [2, 4, 9], [6, 4, 3])          # L = 9 - 3 + 1 = 7
    first, second = (a.symbolic_regions("l", 2, w)[0][2] for w in (0, 1))
    assert str(first) == "[0, K + 1/2*L - 1)" and str(second) == "[1/2*L, K + L - 1)"
    extents = {"K": 3, "L": 7}
    assert first.evaluate(extents) == (0, Fraction(9, 2))          # inclusive, before rounding
    assert [b[2] for b in (w.input_boxes[0] for w in a.split("l", 2).workers)] == [(0, 5), (3, 9)]
    assert a.split("l", 2).placements[0] is None                  # a halo: no DTensor placement


def test_conv1d_reduction_split_symbolic_intervals_shard_both_inputs():
    a = analyze("conv1d", [2, 4, 9], [6, 4, 3])
    x, weight = a.symbolic_regions("ci", 2, 1)
    assert str(x[1]) == "[1/2*CI, CI)" and str(weight[1]) == "[1/2*CI, CI)"


# ---- errors ------------------------------------------------------------------------------------------

def test_a_product_of_two_indices_raises_naming_the_op_and_the_expression():
    @op(name="outer_index")
    def outer_index(x):
        return lambda i, j: x[i * j]

    with pytest.raises(TDLError, match=r"outer_index.*\(i\) \* \(j\)"):
        outer_index.describe([12], )


def test_a_data_dependent_index_raises_naming_the_op_and_the_expression():
    @op(name="lookup")
    def lookup(ids, table):
        return lambda b, d: table[ids[b], d]

    with pytest.raises(TDLError, match=r"lookup.*data-dependent index `ids\[b\]`"):
        lookup.describe([4], [10, 3])


def test_an_access_out_of_bounds_raises_naming_the_op():
    @op(name="shift", shape=lambda x: x.shape)
    def shift(x):
        return lambda i: x[i + 2]

    with pytest.raises(TDLError, match=r"shift.*leaves x's bounds"):
        shift.describe([5])


def test_shapes_that_do_not_fit_raise():
    with pytest.raises(TDLError, match="linear"):
        analyze("linear", [5, 7], [6, 8])
    with pytest.raises(TDLError, match="do not broadcast"):
        analyze("add", [5, 6], [5])
    with pytest.raises(TDLError, match="ceil_mode"):
        analyze("avg_pool2d", [1, 2, 5, 5], kernel_size=2, ceil_mode=True)
    with pytest.raises(TDLError, match="not a multiple"):
        analyze("adaptive_avg_pool2d", [1, 2, 5, 5], output_size=(2, 2))


# ---- every op ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", OPS)
def test_every_example_traces_and_is_analyzed(name):
    analysis = Analysis(LIBRARY[name].describe_example())
    assert all(size >= 1 for size in analysis.output_shape)
    assert len(analysis.output_dims) == len(analysis.output_shape) and LIBRARY[name].doc


def test_the_library_has_more_than_eighty_ops():
    assert len(OPS) >= 80


def test_flop_overrides_count_gathers_and_attention_once():
    embedding = analyze("embedding", [4, 5], [100, 6])
    assert embedding.flops() == 4 * 5 * 6
    attention = analyze("scaled_dot_product_attention", [2, 4, 5, 3], [2, 4, 6, 3], [2, 4, 6, 3])
    rows = 2 * 4 * 5
    assert attention.flops() == rows * 6 * (2 * 3 + 3) + 2 * rows * 6 * 3
    assert attention.flops({"j": 3}) == rows * 6 * (2 * 3 + 3) + 2 * rows * 3 * 3


def test_matmul_flops_come_from_the_description():
    assert analyze("linear", [5, 7], [6, 7]).flops() == 2 * 5 * 6 * 7
    assert analyze("conv2d", [2, 3, 6, 6], [4, 3, 3, 3]).flops() == 2 * 2 * 4 * 4 * 4 * 3 * 3 * 3


def test_reduction_over_a_compute_names_its_indices():
    @op(name="row_sums")
    def row_sums(x):
        from stratagem.tdl import Compute
        return lambda b: Sum(Compute(["r1", "r2"], lambda r1, r2: x[b, r1, r2]))

    a = Analysis(row_sums.describe([3, 4, 5]))
    assert [(d.name, d.size, d.kind) for d in a.dims] == [
        ("b", 3, "sample"), ("r1", 4, "reduction"), ("r2", 5, "reduction")]
