"""Offloaded activations (cost.activation_offload): what an offloaded block keeps and sends, what its
copies cost, when the simulator holds its activations (full and delta), and that FT (against brute
force) prices it as the cost model does."""

from __future__ import annotations

import pytest

from stratagem.cost import CostModel
from stratagem.errors import ConfigError
from stratagem.sim.builder import Simulation
from stratagem.space import Configuration
from tests.cost.test_recompute import B, W, data_parallel, layered
from tests.search.oracle import assert_ft_finds_the_exact_frontier, build_uncapped_space, space_assignments

BOTH = ("layers.0", "layers.1")
SHARD = (B // 2) * W * 4                 # one [B/2, W] float32 activation on each of 2 devices


def test_an_offloaded_block_keeps_nothing_and_sends_what_it_would_keep_over_the_host_link():
    graph = layered(2)
    plain = CostModel(graph, "v100-2x8", num_devices=2)
    offloaded = CostModel(graph, "v100-2x8", num_devices=2, offload_activations=BOTH)
    assert offloaded.graph.op("fc0").saved == () and offloaded.graph.op("act0").saved == ()
    assert offloaded.graph.meta["offload_saved"]["fc0"] == ("x0",)       # a linear keeps its input
    assert offloaded.graph.meta["offload_saved"]["act0"] == ("s0",)      # softmax keeps its output
    strategy = data_parallel(graph)
    host_copy_s = offloaded.cluster.host_transfer_time_s(SHARD)
    for op in ("fc0", "act0", "out0", "fc1", "act1", "out1"):
        a, b = plain.op_cost(op, strategy[op]), offloaded.op_cost(op, strategy[op])
        assert b.backward_time_s == a.backward_time_s                    # nothing runs again
        assert b.memory.activation_bytes == 0 and b.memory.offloaded_bytes == a.memory.activation_bytes == SHARD
        (out,), (back,) = b.offload, b.reload
        assert (out.kind, back.kind) == ("device_to_host", "host_to_device")
        assert out.groups == back.groups == ((0,), (1,))
        assert out.time_s == back.time_s == pytest.approx(host_copy_s)
        assert b.time_s == pytest.approx(a.time_s + 2 * host_copy_s)
    head = offloaded.op_cost("head", strategy["head"])
    assert not head.offload and head.memory.activation_bytes == SHARD     # outside the blocks: kept
    assert offloaded.host_bytes(strategy) == [6 * SHARD, 6 * SHARD]
    assert offloaded.memory_parts(strategy)["activations"] == [SHARD, SHARD]     # the head's input only
    assert plain.memory_parts(strategy)["activations"] == [5 * SHARD, 5 * SHARD]  # s_i kept once for two ops


def test_a_block_is_offloaded_or_recomputed_not_both_and_must_exist():
    graph = layered(2)
    with pytest.raises(ConfigError, match="both recomputed and offloaded"):
        CostModel(graph, "v100-2x8", num_devices=2, recompute=("layers.0",), offload_activations=("layers.0",))
    with pytest.raises(ConfigError, match="blocks the graph does not have"):
        CostModel(graph, "v100-2x8", num_devices=2, offload_activations=("layers.9",))
    mixed = CostModel(graph, "v100-2x8", num_devices=2, recompute=("layers.0",), offload_activations=("layers.1",))
    assert mixed.recomputed == {"fc0", "act0", "out0"} and mixed.offloaded == {"fc1", "act1", "out1"}
    assert mixed.offloading(("layers.0",)).recompute == () and mixed.recomputing(BOTH).offload_activations == ()


def test_the_simulator_frees_offloaded_activations_after_their_copy_and_holds_them_again_from_their_reload():
    """act0's softmax output lives from F(act0) until its copy to the host has ended and act0's
    forward readers have run, and again from its copy back (after backward reached the block: the
    backward of fc1, the first op after it) until act0's backward, which waits for that copy."""
    graph = layered(2)
    model = CostModel(graph, "v100-2x8", num_devices=2, offload_activations=BOTH)
    sim = Simulation(model, data_parallel(graph))
    sim.run()
    start, end = sim.store.start, sim.store.end
    tasks = sim.op_tasks["act0"]
    (out,), (back,) = tasks["OD"], tasks["OH"]
    assert start[out] >= max(end[t] for t in tasks["F"])
    assert start[back] >= max(end[t] for t in sim.op_tasks["fc1"]["B"])
    assert all(start[t] >= end[back] for t in tasks["B"])
    buffers = sim.op_buffers["act0"]
    reloaded = buffers.alloc_task == back
    assert buffers.num_bytes[reloaded].tolist() == [SHARD, SHARD]       # s0 again, on each device
    kept = CostModel(graph, "v100-2x8", num_devices=2)
    recomputed = CostModel(graph, "v100-2x8", num_devices=2, recompute=BOTH)
    peaks = [Simulation(m, data_parallel(graph)).run().peak_memory_bytes for m in (kept, recomputed, model)]
    assert peaks[0] > peaks[1] > peaks[2]          # recomputation still keeps each block's input


@pytest.mark.parametrize("seed", range(6))
def test_delta_simulation_with_offloaded_activations_gives_the_full_timeline(seed):
    """Blocks offloaded (and one recomputed beside them, on odd seeds), ops moved at random."""
    from tests.sim.test_builder import assert_delta_is_full
    offload = ("layers.0", "layers.2") if seed % 2 else ("layers.1",)
    recompute = ("layers.1",) if seed % 2 else ()
    model = CostModel(layered(3), "v100-2x8", num_devices=4, offload_activations=offload, recompute=recompute)
    assert_delta_is_full(model, seed, 5)


def test_a_reload_waits_for_the_first_op_after_the_block_on_each_device_under_any_placement():
    """Ops after the block on other devices than the block's: each device's reload waits for the
    backward of the first op after the block there, whichever op that is."""
    graph = layered(2)
    model = CostModel(graph, "v100-2x8", num_devices=4, offload_activations=("layers.0",))
    strategy = {name: Configuration.of(b=4) for name in ("fc0", "out0", "head")}
    strategy.update(act0=Configuration.of(d0=4), fc1=Configuration.of(b=2), act1=Configuration((), 2),
                    out1=Configuration((), 3))
    sim = Simulation(model, strategy)
    sim.run()
    start, end = sim.store.start, sim.store.end
    (back,) = sim.op_tasks["out0"]["OH"]
    firsts = [sim.op_tasks["fc1"]["B"][0], sim.op_tasks["fc1"]["B"][1], sim.op_tasks["act1"]["B"][0],
              sim.op_tasks["out1"]["B"][0]]
    assert start[back] >= max(end[t] for t in firsts)


def test_ft_finds_the_exact_frontier_with_offloaded_activations():
    model = CostModel(layered(2), "v100-2x8", num_devices=2, offload_activations=("layers.1",),
                      recompute=("layers.0",))
    space = build_uncapped_space(model, coarsening=False)
    assert_ft_finds_the_exact_frontier(model, space, (base for base, _ in space_assignments(space)))


def test_an_offloaded_plan_says_what_it_saves_costs_and_holds_on_the_host():
    from stratagem.search.context import context, make_plan, offloading
    ctx = context(layered(2), "v100-2x8", 2)
    plan = make_plan(offloading(ctx), data_parallel(ctx.graph), "offloaded")
    assert plan.offload_activations == BOTH
    effect = plan.details["offload_effect"]
    assert effect["saved_bytes"] == 4 * SHARD          # s_i shared by two ops, x_i: 5 shards kept, 1 left
    assert effect["time_s"] == pytest.approx(6 * 2 * ctx.model.cluster.host_transfer_time_s(SHARD))   # 6 ops, out and back
    assert plan.details["host_memory"]["per_node_bytes"] == 2 * 6 * SHARD
