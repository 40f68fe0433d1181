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
