"""Weights held sharded (cost.weight_state): the stored layout, what the cost model charges for
each state, and the ops that may take one."""

from __future__ import annotations

import pytest

from stratagem.cost import CostModel
from stratagem.cost.transient import op_transient_bytes, plan_transient
from stratagem.cost.weight_state import can_shard_state, check_state, stored_layout, with_states
from stratagem.errors import ConfigError
from stratagem.ir import Graph, Op, Role, TensorSpec
from stratagem.space import REPLICATE, Configuration, Partial, Shard, SpaceOptions
from stratagem.space.tensor_layout import TensorLayout
from tests.cost.graphs import mlp

B, D, H = 64, 1024, 4096


@pytest.fixture(scope="module")
def model():
    return CostModel(mlp(B, D, H), "a100-1x8", num_devices=4)


def test_the_stored_layout_shards_the_data_parallel_axes_along_the_largest_dim_that_divides():
    read = TensorLayout(0, (2, 2), (REPLICATE, Shard(0)))        # axis 0 data-parallel, axis 1 splits dim 0
    grad = TensorLayout(0, (2, 2), (Partial(), Shard(0)))
    assert stored_layout(read, grad, (12, 6)).placements == (Shard(0), Shard(0))   # local 6x6: dim 0 first
    assert stored_layout(read, grad, (4, 10)).placements == (Shard(1), Shard(0))   # local 2x10: dim 1 larger
    assert stored_layout(read, grad, (6, 5)) is None                               # local 3x5: none divides by 2
    assert stored_layout(read, TensorLayout(0, (2, 2), (REPLICATE, Shard(0))), (12, 6)) is None   # no P: no DP axis


def test_sharded_state_divides_weight_gradient_and_optimizer_state_and_gathers_before_each_pass(model):
    dp = Configuration.of(b=4)
    whole, sharded, kept = (model.op_cost("fc1", dp.with_state(s)) for s in ("replicated", "sharded", "sharded_kept"))
    weight_bytes = H * D * 4
    assert whole.memory.parameter_bytes == whole.memory.gradient_bytes == weight_bytes
    assert whole.memory.optimizer_bytes == 2 * weight_bytes                     # Adam: two states
    for cost in (sharded, kept):
        assert cost.memory.parameter_bytes == cost.memory.gradient_bytes == weight_bytes / 4
        assert cost.memory.optimizer_bytes == 2 * weight_bytes / 4
        assert [(s.kind, s.num_bytes, s.groups) for s in cost.gather] == [("all_gather", weight_bytes, ((0, 1, 2, 3),))]
        assert [(s.kind, s.num_bytes) for s in cost.sync] == [("reduce_scatter", weight_bytes)]
        assert cost.update_time_s < whole.update_time_s
    assert [s.kind for s in whole.sync] == ["all_reduce"] and not whole.gather
    assert sharded.regather and not kept.regather
    assert (sharded.weight_copies.regathered_bytes, sharded.weight_copies.kept_bytes) == (weight_bytes, 0)
    assert (kept.weight_copies.regathered_bytes, kept.weight_copies.kept_bytes) == (0, weight_bytes)
    assert sharded.gather_time_s == 2 * kept.gather_time_s
    assert kept.memory.activation_bytes == sharded.memory.activation_bytes + weight_bytes   # kept until backward
    assert sharded.time_s == pytest.approx(sharded.compute_time_s + sharded.sync_time_s + 2 * sharded.gather[0].time_s)


def test_a_freed_gathered_weight_is_transient_and_a_kept_one_additive(model):
    """Plan memory = additive part + largest transient term: sharding takes 3/4 of the resident
    state off the additive part; a weight freed after forward adds to its op's transient term, one
    kept until backward to the additive part (both weights at once)."""
    dp = {"fc1": Configuration.of(b=4), "fc2": Configuration.of(b=4)}
    weight_bytes = H * D * 4
    plans = {s: {op: c.with_state(s) for op, c in dp.items()} for s in ("replicated", "sharded", "sharded_kept")}
    additive = {s: model.plan_cost(p).memory_bytes - plan_transient(model, p)[0] for s, p in plans.items()}
    resident = 2 * weight_bytes * (1 + 1 + 2)                       # two weights: weight, gradient, Adam
    assert additive["replicated"] - additive["sharded"] == pytest.approx(0.75 * resident, rel=1e-12)
    assert additive["sharded_kept"] - additive["sharded"] == pytest.approx(2 * weight_bytes, rel=1e-12)
    assert plan_transient(model, plans["sharded_kept"]) == plan_transient(model, plans["replicated"])
    assert op_transient_bytes(model, "fc1", plans["sharded"]["fc1"]) == \
        op_transient_bytes(model, "fc1", dp["fc1"]) + weight_bytes


def test_only_ops_with_a_data_parallel_weight_read_by_them_alone_may_shard(model):
    assert can_shard_state(model.graph, model.layouts, "fc1", Configuration.of(b=4))
    assert not can_shard_state(model.graph, model.layouts, "fc1", Configuration.of(j=4))   # weight split, no DP axis
    configs = model.configurations("fc1", SpaceOptions(allow_fewer_devices=False, state_sharding=True))
    assert {c.state for c in configs} == {"replicated", "sharded", "sharded_kept"}
    assert all(can_shard_state(model.graph, model.layouts, "fc1", c) for c in configs if c.sharded_state)
    with pytest.raises(ConfigError, match="cannot hold its weights sharded under j4"):
        model.op_cost("fc1", Configuration.of(j=4).with_state("sharded"))


def test_a_tied_weight_stays_replicated():
    """w is read by fc1 and fc2: its owner fc1 may not shard it (the other reader gets the owner's
    copy over an edge)."""
    tensors = [TensorSpec("x", (B, D), "float32", Role.INPUT, 0), TensorSpec("w", (D, D), "float32", Role.WEIGHT),
               TensorSpec("h", (B, D), "float32", Role.ACTIVATION, 0), TensorSpec("y", (B, D), "float32", Role.ACTIVATION, 0)]
    graph = Graph.build("tied", tensors, [Op("fc1", "linear", ("x", "w"), ("h",)), Op("fc2", "linear", ("h", "w"), ("y",))], ["y"])
    tied = CostModel(graph, "a100-1x8", num_devices=4)
    assert not can_shard_state(graph, tied.layouts, "fc1", Configuration.of(b=4))
    assert with_states(graph, tied.layouts, "fc1", (Configuration.of(b=4),)) == (Configuration.of(b=4),)
    with pytest.raises(ConfigError, match="read by no other op"):
        check_state(graph, tied.layouts, "fc1", Configuration.of(b=4).with_state("sharded_kept"))


def test_offloaded_state_keeps_the_shards_in_host_memory_and_copies_them_over_the_host_link(model):
    """As "sharded", with the local shards of weight, gradient and Adam state in host memory: a
    copy of the weight's shard in before each gather, of the gradient's out after the
    reduce-scatter, each over the device's own host link, and the step on the host CPU."""
    dp = Configuration.of(b=4)
    sharded, offloaded = (model.op_cost("fc1", dp.with_state(s)) for s in ("sharded", "offloaded"))
    host = model.cluster.spec.host
    shard_bytes = H * D * 4 / 4
    memory = offloaded.memory
    assert (memory.parameter_bytes, memory.gradient_bytes, memory.optimizer_bytes) == (0, 0, 0)
    assert memory.host_bytes == sharded.memory.parameter_bytes + sharded.memory.gradient_bytes \
        + sharded.memory.optimizer_bytes == shard_bytes * (1 + 1 + 2)
    assert memory.activation_bytes == sharded.memory.activation_bytes
    copy_in, *gathers = offloaded.gather
    assert (copy_in.kind, copy_in.num_bytes, copy_in.groups) == ("host_to_device", shard_bytes, ((0,), (1,), (2,), (3,)))
    assert copy_in.time_s == pytest.approx(host.link.latency_s + shard_bytes / host.link.bandwidth_bytes_per_s)
    assert tuple(gathers) == sharded.gather
    *syncs, copy_out = offloaded.sync
    assert tuple(syncs) == sharded.sync and (copy_out.kind, copy_out.num_bytes) == ("device_to_host", shard_bytes)
    assert offloaded.update_time_s == pytest.approx(H * D / 4 * (3 * 4 + 2 * 8) / host.optimizer_bytes_per_s)
    assert offloaded.regather and offloaded.weight_copies == sharded.weight_copies
    assert offloaded.gather_time_s == pytest.approx(sharded.gather_time_s + 2 * copy_in.time_s)


def test_offloading_needs_a_cluster_that_describes_its_hosts():
    hostless = CostModel(mlp(B, D, H), "cpu-1x4", num_devices=4)
    with pytest.raises(ConfigError, match="has no host section"):
        hostless.op_cost("fc1", Configuration.of(b=4).with_state("offloaded"))
    assert {c.state for c in hostless.configurations("fc1", SpaceOptions(allow_fewer_devices=False, state_sharding=True))} \
        == {"replicated", "sharded", "sharded_kept"}
