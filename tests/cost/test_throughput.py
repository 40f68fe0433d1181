"""Tokens (or samples) per second and MFU from a plan's iteration time (cost.throughput)."""

from __future__ import annotations

import pytest

from stratagem.cost import CostModel
from stratagem.cost.throughput import items_per_iteration, model_flops, throughput
from stratagem.ir import with_floating_dtype
from tests.cost.graphs import mlp

B, D, H = 64, 1024, 4096


def test_model_flops_are_three_forwards_of_the_whole_ops():
    model = CostModel(mlp(B, D, H), "a100-1x8", num_devices=8)
    forward = 2 * B * D * H * 2                      # two linears, 2 FLOPs per multiply-add
    assert model_flops(model) == 3 * forward
    rate = throughput(model, 0.5)
    assert (rate.unit, rate.items_per_s) == ("samples", B / 0.5)
    assert rate.mfu == pytest.approx(3 * forward / (0.5 * 8 * 19.5e12), rel=1e-3)   # A100 float32 peak


def test_bf16_graphs_are_measured_against_the_bf16_peak():
    model = CostModel(with_floating_dtype(mlp(B, D, H), "bfloat16"), "a100-1x8", num_devices=8)
    fp32 = CostModel(mlp(B, D, H), "a100-1x8", num_devices=8)
    assert throughput(model, 1.0).mfu == pytest.approx(throughput(fp32, 1.0).mfu * 19.5 / 312, rel=1e-3)


def test_token_inputs_count_tokens():
    from stratagem.frontend import zoo
    graph = zoo.build("gpt-tiny-tiny", batch_size=8)
    count, unit = items_per_iteration(graph)
    assert unit == "tokens" and count == 8 * next(graph.tensors[t].shape[1] for t in graph.inputs)
