"""Compute times: roofline bounds, efficiency curves, backward factor."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.cluster import load
from stratagem.cluster.spec import CALCULON_MATRIX, CALCULON_MEMORY, CALCULON_VECTOR
from stratagem.cost import CostModel
from stratagem.cost.compute import roofline_time_s
from stratagem.errors import ConfigError
from stratagem.space import Configuration
from tests.cost.graphs import mlp

V100 = load("v100-2x8").spec.device


@settings(max_examples=60, deadline=None)
@given(st.floats(1, 1e15), st.floats(1, 1e15))
def test_efficiency_curves_are_monotone_and_bounded(a, b):
    small, large = sorted((a, b))
    for curve in (CALCULON_MATRIX, CALCULON_VECTOR, CALCULON_MEMORY):
        assert 0 < curve.at(small) <= curve.at(large) <= 1


def test_calculon_breakpoints():
    assert CALCULON_MATRIX.at(128e9) == 0.95 and CALCULON_MATRIX.at(1e9) == 0.6
    assert CALCULON_MATRIX.at(4e9) == pytest.approx(0.6 + 0.3 * 0.5)      # halfway in log10 from 1 to 16
    assert CALCULON_MEMORY.at(1e8) == 0.9 and CALCULON_VECTOR.at(1.0) == 0.1


def test_large_matmul_is_compute_bound_and_small_copy_memory_bound():
    flops = 2 * 8192 ** 3
    t = roofline_time_s(V100, flops, 3 * 8192 ** 2 * 2, "float16", matrix=True)
    assert t == pytest.approx(flops / (0.95 * 125e12) + V100.launch_overhead_s)
    copy_bytes = 1e9
    t = roofline_time_s(V100, 1e6, copy_bytes, "float16", matrix=False)
    assert t == pytest.approx(copy_bytes / (0.9 * 900e9) + V100.launch_overhead_s)


def test_missing_dtype_peak_is_a_clear_error():
    device = load("cpu-1x2").spec.device
    from dataclasses import replace
    device = replace(device, matrix_flops_per_s=(("float32", 1e9),))
    with pytest.raises(ConfigError, match="no matrix peak for dtype 'int8'"):
        roofline_time_s(device, 1e6, 1e3, "int8", matrix=True)


def test_backward_counts_inputs_that_need_gradients(checked):
    model = CostModel(checked(mlp()), "v100-2x8", num_devices=4)
    dp = Configuration.of(b=4)
    fc1, fc2 = model.op_cost("fc1", dp), model.op_cost("fc2", dp)
    assert fc1.backward_time_s == pytest.approx(fc1.forward_time_s)        # only w1 (x is data)
    assert fc2.backward_time_s == pytest.approx(2 * fc2.forward_time_s)    # h and w2


def biased_linear_and_lstm_cell():
    from stratagem.ir import Graph, Op, TensorSpec
    specs = [TensorSpec("x", (256, 1024), role="input", sample_dim=0), TensorSpec("w", (1024, 1024), role="weight"),
             TensorSpec("b", (1024,), role="weight"), TensorSpec("y", (256, 1024)),
             TensorSpec("h", (256, 256), role="input", sample_dim=0),
             TensorSpec("c", (256, 256), role="input", sample_dim=0),
             TensorSpec("w_ih", (4, 256, 1024), role="weight"), TensorSpec("w_hh", (4, 256, 256), role="weight"),
             TensorSpec("b_ih", (4, 256), role="weight"), TensorSpec("b_hh", (4, 256), role="weight"),
             TensorSpec("h2", (256, 256)), TensorSpec("c2", (256, 256))]
    ops = [Op("fc", "linear", ["x", "w", "b"], ["y"]),
           Op("cell", "gated_lstm_cell", ["y", "h", "c", "w_ih", "w_hh", "b_ih", "b_hh"], ["h2", "c2"])]
    return Graph.build("cells", specs, ops, ["h2", "c2"])


def test_contraction_operands_are_the_factors_of_the_summed_product(checked):
    model = CostModel(checked(biased_linear_and_lstm_cell()), "h100-1x8", num_devices=1)
    assert model.analyses["fc"].contraction_operands == {0, 1}                  # x, W; not the bias
    assert model.analyses["cell"].contraction_operands == {0, 1, 3, 4}          # x, h, w_ih, w_hh


def test_a_bias_gradient_is_a_pass_over_dy_not_a_contraction(checked):
    """dx and dW are contractions like the forward; db sums dY: one memory-bound pass over dY and b."""
    model = CostModel(checked(biased_linear_and_lstm_cell()), "h100-1x8", num_devices=1)
    device = model.cluster.spec.device
    fc = model.op_cost("fc", Configuration())
    # x is the graph's input (no gradient): dW by a contraction, db by a pass over dY (256 x 1024) and b
    db = roofline_time_s(device, 0.0, (256 * 1024 + 1024) * 4, "float32", matrix=False)
    assert fc.backward_time_s == pytest.approx(fc.forward_time_s + db)
    assert fc.backward_time_s < 1.5 * fc.forward_time_s
    cell = model.op_cost("cell", Configuration())
    # h and c are data: y, w_ih, w_hh by contractions (3 forwards); b_ih, b_hh by passes over dY
    pass_s = roofline_time_s(device, 0.0, (256 * 256 + 4 * 256) * 4, "float32", matrix=False)
    assert cell.backward_time_s == pytest.approx(3 * cell.forward_time_s + 2 * pass_s)


def test_splitting_divides_flops(checked):
    model = CostModel(checked(mlp(batch=4096, width=4096, hidden=4096)), "v100-2x8", num_devices=8)
    one, eight = model.op_cost("fc1", Configuration()), model.op_cost("fc1", Configuration.of(b=8))
    assert 7 < one.forward_time_s / eight.forward_time_s < 9


def conv_then_linear():
    from stratagem.ir import Graph, Op, TensorSpec
    specs = [TensorSpec("x", (8, 64, 32, 32), role="input", sample_dim=0),
             TensorSpec("k", (64, 64, 3, 3), role="weight"), TensorSpec("c", (8, 64, 32, 32)),
             TensorSpec("f", (8, 65536)), TensorSpec("w", (10, 65536), role="weight"), TensorSpec("y", (8, 10))]
    ops = [Op("conv", "conv2d", ["x", "k"], ["c"], {"padding": 1}), Op("flat", "flatten", ["c"], ["f"]),
           Op("fc", "linear", ["f", "w"], ["y"])]
    return Graph.build("convnet", specs, ops, ["y"])


@pytest.mark.parametrize("cluster, conv_peak", [("h100-1x8", 494.7e12), ("a100-1x8", 156.0e12), ("v100-2x8", 15.7e12)])
def test_float32_convolutions_run_on_tf32_where_the_device_has_it_and_matmuls_do_not(cluster, conv_peak):
    model = CostModel(conv_then_linear(), cluster, num_devices=1)
    device = model.device
    for op_name, peak in (("conv", conv_peak), ("fc", device.peak_flops_per_s("float32", True))):
        work = model.op_work(op_name, model.configurations(op_name)[0])
        compute_s = work.flops / (device.matrix_efficiency.at(work.flops) * peak)
        memory_s = work.num_bytes / (device.memory_efficiency.at(work.num_bytes) * device.memory_bandwidth_bytes_per_s)
        expected = max(compute_s, memory_s) + device.launch_overhead_s
        assert model.op_cost(op_name, model.configurations(op_name)[0]).forward_time_s == pytest.approx(expected)
    assert model.op_work("conv", model.configurations("conv")[0]).dtype == "tfloat32"
    assert model.op_work("fc", model.configurations("fc")[0]).dtype == "float32"


def lm_head(vocab: int, dtype: str):
    from stratagem.ir import Graph, Op, TensorSpec
    specs = [TensorSpec("x", (16384, 2048), dtype=dtype, role="input", sample_dim=0),
             TensorSpec("w", (vocab, 2048), dtype=dtype, role="weight"), TensorSpec("y", (16384, vocab), dtype=dtype)]
    return Graph.build("head", specs, [Op("head", "linear", ["x", "w"], ["y"])], ["y"])


@pytest.mark.parametrize("cluster, dtype, slower", [("h200-1x8", "bfloat16", True), ("h200-1x8", "float32", False),
                                                    ("a100-1x8", "bfloat16", False)])
def test_a_tensor_core_gemm_with_rows_not_a_multiple_of_16_bytes_runs_at_the_devices_fraction(
        checked, cluster, dtype, slower):
    """GPT-2's 50,257-word LM head in bf16: cuBLAS leaves its tensor-core tiles (measured 0.125 of the
    curve on an H200); IEEE float32 takes no tensor cores, and a device without the measurement keeps 1."""
    def forward_s(vocab: int) -> float:
        model = CostModel(checked(lm_head(vocab, dtype)), cluster, num_devices=1)
        return model.op_cost("head", Configuration()).forward_time_s / vocab   # per output column
    ratio = forward_s(50257) / forward_s(50256)
    factor = load(cluster).spec.device.unaligned_gemm_factor
    if slower:
        assert factor < 1 and ratio == pytest.approx(1 / factor, rel=0.01)   # compute-bound: time / efficiency
    else:
        assert ratio == pytest.approx(1.0, rel=0.01)
