"""Recomputed blocks (cost.recompute): which ops form a block, what they keep, what it costs, and
that the simulator (full and delta) and FT (against brute force) price it as the cost model does."""

from __future__ import annotations

import pytest

from stratagem.cost import CostModel
from stratagem.cost.recompute import blocks, check_recompute
from stratagem.errors import ConfigError
from stratagem.ir import Graph, Op, Role, TensorSpec
from stratagem.sim.builder import Simulation
from stratagem.space import Configuration
from tests.search.oracle import assert_ft_finds_the_exact_frontier, build_uncapped_space, space_assignments

B, W = 256, 128


def data_parallel(graph: Graph) -> dict[str, Configuration]:
    return {op.name: Configuration.of(d0=2) if op.kind == "softmax" else Configuration.of(b=2) for op in graph.ops}


def layered(layers: int = 2) -> Graph:
    """x -> [fc (w_i) -> softmax -> out (v_i)] per layer, each layer the module "layers.i" (the
    softmax's output s_i is kept by it and by out_i); a head fc outside."""
    tensors = [TensorSpec("x0", (B, W), "float32", Role.INPUT, 0)]
    ops = []
    for i in range(layers):
        tensors += [TensorSpec(f"w{i}", (W, W), "float32", Role.WEIGHT),
                    TensorSpec(f"v{i}", (W, W), "float32", Role.WEIGHT),
                    TensorSpec(f"h{i}", (B, W), "float32", Role.ACTIVATION, 0),
                    TensorSpec(f"s{i}", (B, W), "float32", Role.ACTIVATION, 0),
                    TensorSpec(f"x{i + 1}", (B, W), "float32", Role.ACTIVATION, 0)]
        ops += [Op(f"fc{i}", "linear", (f"x{i}", f"w{i}"), (f"h{i}",), module=f"layers.{i}.fc"),
                Op(f"act{i}", "softmax", (f"h{i}",), (f"s{i}",), {"dim": 1}, module=f"layers.{i}"),
                Op(f"out{i}", "linear", (f"s{i}", f"v{i}"), (f"x{i + 1}",), module=f"layers.{i}.out")]
    tensors += [TensorSpec("wo", (W, W), "float32", Role.WEIGHT), TensorSpec("y", (B, W), "float32", Role.ACTIVATION, 0)]
    ops.append(Op("head", "linear", (f"x{layers}", "wo"), ("y",), module="head"))
    return Graph.build("layered", tensors, ops, ["y"])


def test_blocks_are_module_list_elements_with_their_outside_inputs():
    found = blocks(layered(2))
    assert [(b.name, b.ops, b.inputs) for b in found] == [("layers.0", ("fc0", "act0", "out0"), ("x0",)),
                                                         ("layers.1", ("fc1", "act1", "out1"), ("x1",))]
    with pytest.raises(ConfigError, match="blocks the graph does not have"):
        check_recompute(layered(2), ["layers.7"])


def test_a_recomputed_block_keeps_only_its_input_and_pays_its_forward_again():
    graph = layered(2)
    plain = CostModel(graph, "v100-2x8", num_devices=2)
    recomputed = CostModel(graph, "v100-2x8", num_devices=2, recompute=("layers.0", "layers.1"))
    assert recomputed.graph.op("fc0").saved == ("x0",) and recomputed.graph.op("act0").saved == ()
    assert recomputed.graph.meta["recompute_saved"]["act0"] == ("s0",)      # softmax keeps its output
    strategy = data_parallel(graph)
    for op in ("fc0", "act0", "out0", "fc1", "act1", "out1"):
        a, b = plain.op_cost(op, strategy[op]), recomputed.op_cost(op, strategy[op])
        assert b.backward_time_s == pytest.approx(a.backward_time_s + a.forward_time_s)
    assert recomputed.op_cost("act0", strategy["act0"]).memory.activation_bytes == 0
    assert recomputed.op_cost("head", strategy["head"]).backward_time_s == \
        plain.op_cost("head", strategy["head"]).backward_time_s
    kept = (B // 2) * W * 4
    activations = [m.memory_parts(strategy)["activations"][0] for m in (plain, recomputed)]
    assert activations[0] - activations[1] == 2 * kept                  # s0 and s1 are no longer kept


def test_an_input_moved_into_a_recomputed_op_is_moved_again_in_backward():
    graph = layered(2)
    recomputed = CostModel(graph, "v100-2x8", num_devices=2, recompute=("layers.1",))
    plain = CostModel(graph, "v100-2x8", num_devices=2)
    a, b = (m.edge_cost("x1", "out0", Configuration.of(j=2), "fc1", Configuration.of(b=2))
            for m in (plain, recomputed))
    assert a.forward_steps and b.backward_time_s == pytest.approx(a.backward_time_s + a.forward_time_s)
    assert len(b.backward_steps) == len(a.backward_steps) + len(a.forward_steps)


def test_the_simulator_holds_a_blocks_activations_again_during_its_backward():
    """act0's softmax output, dropped after forward, lives again from its block's recomputation
    (the backward of out0, the block's last op) until act0's backward."""
    graph = layered(2)
    model = CostModel(graph, "v100-2x8", num_devices=2, recompute=("layers.0", "layers.1"))
    sim = Simulation(model, data_parallel(graph))
    sim.run()
    kept_again = (B // 2) * W * 4                     # act0's output, its softmax's saved tensor
    for d in range(2):
        b = sim.op_tasks["out0"]["B"][d]
        buffers = sim.op_buffers["act0"]
        mine = (buffers.device == d) & (buffers.alloc_task == b)
        assert buffers.num_bytes[mine].tolist() == [kept_again]
    plain = Simulation(CostModel(graph, "v100-2x8", num_devices=2), data_parallel(graph))
    plain.run()
    assert not any((plain.op_buffers["act0"].alloc_task == t).any() for t in plain.op_tasks["out0"]["B"])


@pytest.mark.parametrize("seed", range(6))
def test_delta_simulation_with_recomputation_gives_the_full_timeline(seed):
    from tests.sim.test_builder import assert_delta_is_full
    assert_delta_is_full(CostModel(layered(2), "v100-2x8", num_devices=4, recompute=("layers.0", "layers.1")), seed, 4)


def test_ft_finds_the_exact_frontier_with_recomputation():
    model = CostModel(layered(2), "v100-2x8", num_devices=2, recompute=("layers.0", "layers.1"))
    space = build_uncapped_space(model, coarsening=False)
    assert_ft_finds_the_exact_frontier(model, space, (base for base, _ in space_assignments(space)))


def test_a_recomputed_plan_says_what_it_saves_and_costs():
    from stratagem.search.context import context, make_plan, recomputing
    ctx = context(layered(2), "v100-2x8", 2)
    plan = make_plan(recomputing(ctx), data_parallel(ctx.graph), "recomputed")
    effect = plan.details["recompute_effect"]
    assert effect["saved_bytes"] == 2 * (B // 2) * W * 4              # s0 and s1
    assert effect["time_s"] > 0
