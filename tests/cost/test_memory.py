"""Per-device memory against hand computation."""

from __future__ import annotations

import pytest

from dataclasses import replace

from stratagem import zoo
from stratagem.cost import CostModel
from stratagem.cost import memory as memory_module
from stratagem.cost.memory import is_contiguous, saved_tensors, viewed_input
from stratagem.errors import ConfigError
from stratagem.ir import Graph, Op, Role, TensorSpec
from stratagem.sim.builder import simulate
from stratagem.space import Configuration
from stratagem.tdl.library import LIBRARY
from tests.cost.graphs import mlp

B, D, H, P = 64, 1024, 4096, 4


def test_data_parallel_mlp_with_adam_matches_hand_computation(checked):
    graph = checked(mlp(B, D, H))
    model = CostModel(graph, "v100-2x8", optimizer="adam", num_devices=P)
    dp = Configuration.of(b=P)
    plan = model.plan_cost({"fc1": dp, "fc2": dp})
    params = 2 * H * D                       # w1 and w2, fully replicated under data parallelism
    weights = params * 4                     # fp32
    gradients = params * 4
    adam = params * 2 * 4                    # m and v in fp32
    saved = (B // P) * D * 4 + (B // P) * H * 4     # fc1 keeps x, fc2 keeps h (local batch)
    transient = (B // P) * D * 4             # largest output no op keeps: fc2's (fc1's h is kept by fc2)
    fc1 = model.op_cost("fc1", dp).memory
    assert (fc1.parameter_bytes, fc1.gradient_bytes, fc1.optimizer_bytes) == (H * D * 4, H * D * 4, H * D * 8)
    assert fc1.activation_bytes == (B // P) * D * 4
    assert plan.memory_bytes == weights + gradients + adam + saved + transient
    assert plan.per_device_memory_bytes == (plan.memory_bytes,) * P
    assert simulate(model, {"fc1": dp, "fc2": dp}).peak_memory_bytes == plan.memory_bytes


def test_optimizers_and_mixed_precision(checked):
    """A bf16 graph: pure bf16 holds weight, gradient and states in bf16; mixed precision holds the
    weight in float32 (the master), its gradient and states too, and the linear keeps the bf16
    copy it computed with for backward (dX = dY W)."""
    graph = checked(mlp(B, D, H, dtype="bfloat16"))
    dp = Configuration.of(b=P)
    elements = H * D
    expected = {("sgd", False): 0, ("momentum", False): 2 * elements, ("adam", False): 4 * elements,
                ("adam", True): 8 * elements, ("sgd", True): 0}
    saved_x = (B // P) * D * 2
    for (name, mixed), optimizer_bytes in expected.items():
        model = CostModel(graph, "v100-2x8", optimizer=name, num_devices=P, mixed_precision=mixed)
        cost = model.op_cost("fc1", dp)
        assert cost.memory.optimizer_bytes == optimizer_bytes
        held = 4 if mixed else 2
        assert cost.memory.parameter_bytes == cost.memory.gradient_bytes == held * elements
        assert cost.memory.activation_bytes == saved_x + (2 * elements if mixed else 0)
        assert [s.num_bytes for s in cost.sync] == [held * elements]          # the held gradient's all-reduce
        assert cost.weight_copies.kept_bytes == (2 * elements if mixed else 0)


def test_model_parallel_shards_parameters_and_optimizer(checked):
    model = CostModel(checked(mlp(B, D, H)), "v100-2x8", num_devices=P)
    full, split = model.op_cost("fc1", Configuration.of(b=P)).memory, model.op_cost("fc1", Configuration.of(j=P)).memory
    assert split.parameter_bytes * P == full.parameter_bytes
    assert split.optimizer_bytes * P == full.optimizer_bytes
    assert split.activation_bytes == full.activation_bytes * P       # fc1 keeps the whole x on each device


def test_sharded_updates_divide_optimizer_state(checked):
    graph = checked(mlp(B, D, H))
    dp = Configuration.of(b=P)
    plain = CostModel(graph, "v100-2x8", num_devices=P).op_cost("fc1", dp)
    zero = CostModel(graph, "v100-2x8", num_devices=P, shard_updates=True).op_cost("fc1", dp)
    assert zero.memory.optimizer_bytes * P == plain.memory.optimizer_bytes
    assert [s.kind for s in zero.sync] == ["reduce_scatter", "all_gather"]
    assert [s.kind for s in plain.sync] == ["all_reduce"]
    assert zero.update_time_s < plain.update_time_s


def test_saved_tensor_rule_and_capture_override(checked):
    graph = checked(mlp(activation=True))
    assert saved_tensors(graph, graph.op("fc1")) == ("x",)
    assert saved_tensors(graph, graph.op("act")) == ("a",)          # softmax keeps its output
    assert saved_tensors(graph, graph.op("fc2")) == ("a",)
    captured = Op("fc1", "linear", ("x", "w1"), ("h",), saved=("x", "w1"))
    assert saved_tensors(graph, captured) == ("x",)                  # weights counted as parameters


def test_unknown_optimizer_is_a_clear_error(checked):
    from stratagem.errors import ConfigError
    with pytest.raises(ConfigError, match="unknown optimizer"):
        CostModel(checked(mlp()), "v100-2x8", optimizer="lion")


def _classifier(batch: int, width: int, classes: int, loss: str) -> Graph:
    """x[b, d] -> fc (w[v, d]) -> logits[b, v] -> loss(logits, targets)."""
    tensors = [TensorSpec("x", (batch, width), role=Role.INPUT, sample_dim=0),
               TensorSpec("targets", (batch,), "int64", Role.INPUT, 0),
               TensorSpec("w", (classes, width), role=Role.WEIGHT),
               TensorSpec("logits", (batch, classes), sample_dim=0),
               TensorSpec("loss", ())]
    ops = [Op("fc", "linear", ("x", "w"), ("logits",)), Op("ce", loss, ("logits", "targets"), ("loss",))]
    return Graph.build("classifier", tensors, ops, ["loss"])


def test_what_a_kernel_keeps_inside_is_memory_until_its_backward(checked, monkeypatch):
    """Cross-entropy keeps its log-probabilities (its record's keeps_inside: one copy of its
    input, local shard): in its activation memory, and in the simulated peak, which is that much
    above the same model's with the record saying it keeps nothing inside."""
    b, d, v = 64, 256, 4096
    dp, loss_dp = Configuration.of(b=P), Configuration.of(n=P)
    graph = checked(_classifier(b, d, v, "cross_entropy"))
    model = CostModel(graph, "v100-2x8", num_devices=P)
    memory = model.op_cost("ce", loss_dp).memory
    assert memory.kept_inside_bytes == memory.activation_bytes == (b // P) * v * 4
    peak = simulate(model, {"fc": dp, "ce": loss_dp}).peak_memory_bytes
    monkeypatch.setattr(memory_module, "LIBRARY",
                        {**LIBRARY, "cross_entropy": replace(LIBRARY["cross_entropy"], keeps_inside=())})
    without = CostModel(graph, "v100-2x8", num_devices=P)
    assert without.op_cost("ce", loss_dp).memory.activation_bytes == 0
    assert peak - simulate(without, {"fc": dp, "ce": loss_dp}).peak_memory_bytes == (b // P) * v * 4


def test_attention_keeps_what_its_fused_kernel_keeps_not_what_capture_traced():
    """Capture traces attention's decomposed reference; the runtime runs the fused kernel, which
    keeps q, k, v and the output (tdl fused_saves): no recorded `saved`, the record's rule."""
    graph = zoo.build("gpt-tiny")
    attention = [op for op in graph.ops if op.kind == "scaled_dot_product_attention"]
    assert attention and all(op.saved is None for op in attention)
    for op in attention:
        assert set(saved_tensors(graph, op)) == {*op.inputs[:3], *op.outputs}


def test_the_reshape_after_a_decoders_attention_is_a_view():
    """The query is a transposed [B, L, H, E] (rotary embedding keeps its layout), the fused
    kernel lays its output out as the query lies, so transposing it back is contiguous and the
    reshape to [B, L, D] is a view, as measured on the runtime (no copy to count)."""
    graph = zoo.build("gpt-tiny")
    after = [graph.consumers[op.outputs[0]][0] for op in graph.ops if op.kind == "scaled_dot_product_attention"]
    assert after and all(op.kind == "transpose" for op in after)
    for transpose in after:
        assert is_contiguous(graph, transpose.outputs[0])
        reshape = graph.consumers[transpose.outputs[0]][0]
        assert reshape.kind == "reshape" and viewed_input(graph, reshape) == transpose.outputs[0]


def test_a_device_running_a_fused_kernel_keeps_nothing_inside_it():
    """RMSNorm's record says its (CPU) kernel keeps x/rms beside its input; a device whose preset
    names rms_norm among its fused kernels (CUDA's, measured) keeps no such copy: the op's
    activation memory and the simulated peak are one input's shard lower there, everything else
    alike."""
    graph = zoo.build("gpt-tiny")
    norms = [op for op in graph.ops if op.kind == "rms_norm"]
    cpu, gpu = (CostModel(graph, cluster, num_devices=1) for cluster in ("cpu-1x2", "a100-1x8"))
    assert gpu.device.fused_kernels == ("rms_norm",) and not cpu.device.fused_kernels
    whole = Configuration.of()
    for op in norms:
        first = graph.tensors[op.inputs[0]]
        assert cpu.op_cost(op.name, whole).memory.kept_inside_bytes == first.num_bytes
        assert gpu.op_cost(op.name, whole).memory.kept_inside_bytes == 0
    strategy = {op.name: whole for op in graph.ops}
    peaks = [simulate(m, strategy).peak_memory_bytes for m in (cpu, gpu)]
    assert peaks[0] - peaks[1] == sum(graph.tensors[op.inputs[0]].num_bytes for op in norms)


def test_a_device_naming_an_unknown_fused_kernel_is_refused(tmp_path):
    import yaml
    from stratagem.cluster import load
    from stratagem.cluster.loader import PRESET_DIR
    data = yaml.safe_load((PRESET_DIR / "v100-2x8.yaml").read_text())
    data["device"]["fused_kernels"] = ["rms_norm", "linear"]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="fused_kernels.*linear"):
        CostModel(zoo.build("gpt-tiny"), load(path), num_devices=1)
