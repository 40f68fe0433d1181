"""CostModel: op and edge costs under data and model parallelism, reuse options, plan totals."""

from __future__ import annotations

import time

import numpy as np

import pytest

from stratagem.cluster import load
from stratagem.cost import CostModel
from stratagem.errors import ConfigError, GraphError
from stratagem.ir import Graph, Op, Role, TensorSpec
from stratagem.space import Configuration, SpaceOptions
from tests.cost.graphs import conv, mlp, mlp_with_views

B, D, H = 64, 1024, 4096


@pytest.fixture
def model(checked):
    return CostModel(checked(mlp(B, D, H, activation=True)), "h100-1x8")


def test_data_parallel_syncs_weight_gradients_model_parallel_does_not(model):
    dp = model.op_cost("fc1", Configuration.of(b=8))
    step, = dp.sync
    assert step.kind == "all_reduce" and step.groups == (tuple(range(8)),) and step.num_bytes == H * D * 4
    assert dp.sync_time_s == pytest.approx(model.cluster.collective_time_s("all_reduce", H * D * 4, range(8)))
    assert model.op_cost("fc1", Configuration.of(j=8)).sync == ()
    assert model.op_cost("fc1", Configuration.of(rep=8)).sync == ()       # redundant compute: whole gradients


def test_each_parameter_syncs_on_its_own(checked):
    """A biased linear under data parallelism: its weight's and its bias's gradients are two
    all-reduces, as the runtime syncs each parameter (one bucket would price one collective's
    latency for two)."""
    tensors = [TensorSpec("x", (B, D), "float32", Role.INPUT, 0), TensorSpec("w", (H, D), "float32", Role.WEIGHT),
               TensorSpec("bias", (H,), "float32", Role.WEIGHT), TensorSpec("y", (B, H), "float32", Role.ACTIVATION, 0)]
    graph = checked(Graph.build("biased", tensors, [Op("fc", "linear", ("x", "w", "bias"), ("y",))], ["y"]))
    model = CostModel(graph, "h100-1x8")
    steps = model.op_cost("fc", Configuration.of(b=8)).sync
    assert sorted((s.kind, s.num_bytes) for s in steps) == [("all_reduce", H * 4), ("all_reduce", H * D * 4)]
    assert all(s.groups == (tuple(range(8)),) for s in steps)
    assert model.op_cost("fc", Configuration.of(b=8)).sync_time_s == pytest.approx(
        sum(model.cluster.collective_time_s("all_reduce", n, range(8)) for n in (H * 4, H * D * 4)))


def test_collectives_are_priced_with_the_dispatch_of_the_path_the_runtime_issues_them_on(checked, tmp_path):
    """With a measured table, a replicated weight's gradient sync pays the table's "sync"
    dispatch and every re-scheduling step (forward, and its gradient back) the "move" dispatch,
    as do a sharded weight's gather and its gradient's reduce-scatter (the runtime moves it into
    the reader's layout under autograd), on top of the collective: swapping the two figures
    changes each price by their difference."""
    from stratagem.cluster import CommTable
    from stratagem.cluster.comm_table import Series
    series = Series((64.0, 1 << 20), (1e-4, 1e-2))
    groups = ((0, 1),)
    kinds = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
    graph = checked(mlp(8, 16, 32, activation=True))
    priced = {}
    for name, dispatch in (("a", {"move": 2e-3, "sync": 5e-4}), ("b", {"move": 5e-4, "sync": 2e-3})):
        path = tmp_path / f"{name}.json"
        CommTable("gloo", 2, "cpu", {(k, groups): series for k in kinds}, dispatch).save(path)
        model = CostModel(graph, load("cpu-1x2", comm_table=path))
        sync = model.op_cost("fc1", Configuration.of(b=2)).sync
        edge = model.edge_cost("h", "fc1", Configuration.of(j=2), "act", Configuration.of(d0=2))
        sharded = model.op_cost("fc1", Configuration.of(b=2).with_state("sharded"))   # gathered, then moved back
        priced[name] = (sync, edge.forward_steps + edge.backward_steps + sharded.gather + sharded.sync)
    (sync_a, moves_a), (sync_b, moves_b) = priced["a"], priced["b"]
    assert sync_a and moves_a and {s.kind for s in moves_a} >= {"all_gather", "reduce_scatter"}
    for a, b in zip(sync_a, sync_b):
        assert a.time_s == pytest.approx(series.time_s(a.num_bytes) + 5e-4)
        assert b.time_s - a.time_s == pytest.approx(1.5e-3)
    for a, b in zip(moves_a, moves_b):
        assert a.time_s == pytest.approx(series.time_s(a.num_bytes) + 2e-3)
        assert a.time_s - b.time_s == pytest.approx(1.5e-3)


def test_hybrid_mesh_syncs_over_the_data_parallel_axis_only(model):
    cost = model.op_cost("fc1", Configuration.of(b=2, j=4))
    step, = cost.sync
    assert step.groups == ((0, 4), (1, 5), (2, 6), (3, 7)) and step.num_bytes == H * D * 4 / 4


def test_time_is_the_sum_of_its_parts(model):
    cost = model.op_cost("fc2", Configuration.of(b=4, k=2))
    assert cost.time_s == pytest.approx(cost.forward_time_s + cost.backward_time_s + cost.update_time_s
                                        + cost.sync_time_s)
    assert cost.memory_bytes == cost.memory.total_bytes


def test_edges_of_the_graph(model):
    assert [(e.tensor, e.src_op, e.dst_op) for e in model.edges()] == [
        ("x", None, "fc1"), ("h", "fc1", "act"), ("a", "act", "fc2")]


def test_matching_layouts_cost_nothing_and_share_saved_tensors(model):
    edge = model.edge_cost("a", "act", Configuration.of(d0=8), "fc2", Configuration.of(b=8))
    # softmax keeps a, fc2 keeps a: one buffer
    assert edge.time_s == 0 and edge.forward_steps == edge.backward_steps == ()
    assert [o.name for o in edge.reuse] == ["shared"]
    assert edge.extra_memory_bytes == -(B // 8) * H * 4


def test_reuse_options_when_re_scheduling(model):
    edge = model.edge_cost("a", "act", Configuration.of(d0=8), "fc2", Configuration.of(k=8))
    assert [s.kind for s in edge.forward_steps] == ["all_to_all"]
    options = {o.name: o for o in edge.reuse}
    assert set(options) == {"keep_both", "keep_before", "keep_after"}
    local = (B // 8) * H * 4
    assert options["keep_both"].memory_delta_bytes == 0 and edge.extra_memory_bytes == 0
    assert options["keep_before"].memory_delta_bytes == options["keep_after"].memory_delta_bytes == -local
    assert options["keep_before"].backward_time_s == pytest.approx(edge.forward_time_s)
    kept = edge.with_reuse("keep_after")
    assert kept.extra_memory_bytes == -local and kept.backward_time_s > edge.backward_time_s


def test_keep_after_only_for_the_one_consumer_that_keeps_the_tensor(checked):
    """keep_after drops the producer's copy: with a second consumer keeping the tensor, the
    buffer stays (the simulator keeps it for that consumer) and two keep_afters would credit it
    twice, so neither edge offers it; the simulated peak is the cost model's under every option."""
    from stratagem.ir import Graph, Op, Role, TensorSpec
    from stratagem.sim.builder import simulate
    from stratagem.space import Edge, Strategy
    tensors = [TensorSpec("x", (B, D), "float32", Role.INPUT, 0), TensorSpec("w1", (H, D), "float32", Role.WEIGHT),
               TensorSpec("h", (B, H), "float32", Role.ACTIVATION, 0),
               TensorSpec("a", (B, H), "float32", Role.ACTIVATION, 0)]
    ops = [Op("fc1", "linear", ("x", "w1"), ("h",)), Op("act", "softmax", ("h",), ("a",), {"dim": 1})]
    for name in ("fc2", "fc3"):
        tensors += [TensorSpec(f"w{name}", (D, H), "float32", Role.WEIGHT),
                    TensorSpec(f"y{name}", (B, D), "float32", Role.ACTIVATION, 0)]
        ops.append(Op(name, "linear", ("a", f"w{name}"), (f"y{name}",)))
    two = CostModel(checked(Graph.build("two", tensors, ops, ["yfc2", "yfc3"])), "v100-2x8", num_devices=8)
    strategy = {"fc1": Configuration.of(b=8), "act": Configuration.of(d0=8), "fc2": Configuration.of(k=8),
                "fc3": Configuration.of(k=8)}
    for reader in ("fc2", "fc3"):
        edge = two.edge_cost("a", "act", strategy["act"], reader, strategy[reader])
        assert edge.forward_steps and {o.name for o in edge.reuse} == {"keep_both", "keep_before"}
    for option in ("keep_both", "keep_before"):
        chosen = Strategy(strategy, {Edge("a", "act", "fc2"): option, Edge("a", "act", "fc3"): option})
        assert two.plan_cost(chosen).memory_bytes >= simulate(two, chosen).peak_memory_bytes


def test_topology_decides_between_all_to_all_and_gather_then_slice(checked):
    # DGX-1V: an all-to-all sends 3 of 7 pairs over PCIe and QPI, while an all-gather rides the
    # NVLink rings, so S(0) -> S(1) is cheaper as all-gather + slice; on NVSwitch it is an all-to-all.
    graph = checked(mlp(B, D, H, activation=True))
    src, dst = Configuration.of(d0=8), Configuration.of(k=8)
    for cluster, kind in (("v100-2x8", "all_gather"), ("h100-1x8", "all_to_all")):
        edge = CostModel(graph, cluster, num_devices=8).edge_cost("a", "act", src, "fc2", dst)
        assert [s.kind for s in edge.forward_steps] == [kind]


def test_gradient_re_scheduling_goes_back_to_the_producer(model):
    edge = model.edge_cost("h", "fc1", Configuration.of(j=8), "act", Configuration.of(d0=8))
    assert [s.kind for s in edge.forward_steps] == ["all_to_all"]
    assert [s.kind for s in edge.backward_steps] == ["all_to_all"]
    edge = model.edge_cost("h", "fc1", Configuration.of(k=8), "act", Configuration.of(d0=8))
    assert [s.kind for s in edge.forward_steps] == ["reduce_scatter"]     # P(sum) -> S(0)
    assert [s.kind for s in edge.backward_steps] == ["all_gather"]         # S(0) -> R


def test_data_loader_edge(model):
    edge = model.edge_cost("x", None, None, "fc1", Configuration.of(j=8))
    assert [s.kind for s in edge.forward_steps] == ["all_gather"] and edge.backward_steps == ()
    assert model.edge_cost("x", None, None, "fc1", Configuration.of(b=8)).time_s == 0


def test_plan_cost_is_the_sum_of_op_and_edge_costs(model):
    strategy = {"fc1": Configuration.of(j=8), "act": Configuration.of(d0=8), "fc2": Configuration.of(b=8)}
    plan = model.plan_cost(strategy)
    ops = sum(model.op_cost(n, c).time_s for n, c in strategy.items())
    edges = sum(model.edge_cost(e.tensor, e.src_op, strategy.get(e.src_op), e.dst_op, strategy[e.dst_op]).time_s
                for e in model.edges())
    assert plan.time_s == pytest.approx(ops + edges)
    assert plan.communication_time_s == pytest.approx(edges + sum(model.op_cost(n, c).sync_time_s
                                                                  for n, c in strategy.items()))


def test_operator_parallel_memory_counts_only_where_ops_run(checked):
    model = CostModel(checked(mlp(B, D, H)), "v100-2x8", num_devices=8)
    plan = model.plan_cost({"fc1": Configuration.of(0, b=4), "fc2": Configuration.of(4, b=4)})
    low, high = plan.per_device_memory_bytes[:4], plan.per_device_memory_bytes[4:]
    assert len(set(low)) == 1 and len(set(high)) == 1 and low[0] != high[0]
    edge = model.edge_cost("h", "fc1", Configuration.of(0, b=4), "fc2", Configuration.of(4, b=4))
    assert {s.kind for s in edge.forward_steps} == {"p2p"}


def test_configurations_come_from_the_space(model):
    configs = model.configurations("fc1", SpaceOptions(max_axes=1, allow_fewer_devices=False))
    assert {str(c) for c in configs} == {"b8@0-7", "j8@0-7", "k8@0-7", "rep8@0-7"}


def test_costs_are_memoized_and_fast_on_repeat(model):
    config = Configuration.of(b=2, j=4)
    first = model.op_cost("fc1", config)
    assert model.op_cost("fc1", Configuration.of(b=2, j=4)) is first
    start = time.perf_counter()
    for _ in range(1000):
        model.op_cost("fc1", config)
    assert time.perf_counter() - start >= 0       # speed is measured in benchmarks/, not asserted


def test_errors(model):
    with pytest.raises(ConfigError, match="beyond the model's 8"):
        model.op_cost("fc1", Configuration.of(8, b=8))
    with pytest.raises(GraphError, match="does not read tensor 'x'"):
        model.edge_cost("x", None, None, "fc2", Configuration.of(b=8))
    with pytest.raises(GraphError, match="has no source op"):
        model.edge_cost("h", None, None, "act", Configuration.of(d0=8))
    with pytest.raises(ConfigError, match="strategy lacks ops"):
        model.plan_cost({"fc1": Configuration.of(b=8)})


def test_every_configuration_and_random_strategies_price_finitely(checked):
    import math
    import random

    from tests.cost.graphs import conv
    rng = random.Random(0)
    for graph in (checked(mlp(8, 16, 32, activation=True)), checked(conv(4, 4, 16, 3))):
        model = CostModel(graph, "v100-2x8", num_devices=4)
        options = SpaceOptions(allow_irregular=True)
        configs = {op.name: model.configurations(op.name, options) for op in graph.ops}
        for name, cs in configs.items():
            for c in cs:
                cost = model.op_cost(name, c)
                assert math.isfinite(cost.time_s) and cost.time_s > 0 and cost.memory_bytes > 0
        for _ in range(60):
            strategy = {name: rng.choice(cs) for name, cs in configs.items()}
            plan = model.plan_cost(strategy)
            assert math.isfinite(plan.time_s) and plan.time_s >= plan.communication_time_s >= 0
            assert plan.memory_bytes > 0


def test_a_weight_read_by_two_ops_belongs_to_the_first(checked):
    from stratagem.ir import Graph, Op, Role, TensorSpec
    graph = checked(Graph.build("tied", [
        TensorSpec("x1", (8, 16), role=Role.INPUT, sample_dim=0), TensorSpec("x2", (8, 16), role=Role.INPUT,
                                                                              sample_dim=0),
        TensorSpec("w", (32, 16), role=Role.WEIGHT), TensorSpec("y1", (8, 32), sample_dim=0),
        TensorSpec("y2", (8, 32), sample_dim=0)],
        [Op("fc1", "linear", ("x1", "w"), ("y1",)), Op("fc2", "linear", ("x2", "w"), ("y2",))], ["y1", "y2"]))
    model = CostModel(graph, "h100-1x8", num_devices=4)
    dp, mp = Configuration.of(b=4), Configuration.of(j=4)
    assert model.op_cost("fc2", dp).memory.parameter_bytes == 0 and model.op_cost("fc2", dp).sync == ()
    assert model.op_cost("fc1", mp).memory.parameter_bytes == 32 * 16 * 4 / 4
    assert ("w", "fc1", "fc2") in [(e.tensor, e.src_op, e.dst_op) for e in model.edges()]
    edge = model.edge_cost("w", "fc1", mp, "fc2", dp)
    assert [s.kind for s in edge.forward_steps] == ["all_gather"]          # S(0) -> R for fc2
    assert [s.kind for s in edge.backward_steps] == ["reduce_scatter"]     # fc2's P(sum) grad -> S(0)


def _tied(second: str = "linear"):
    """fc1 owns w[32, 16]; a second op reads it too (a tied LM head; `second` = "add": a bias
    read by an op whose gradient needs no values)."""
    from stratagem.ir import Graph, Op, Role, TensorSpec
    if second == "linear":
        tensors = [TensorSpec("x2", (8, 16), role=Role.INPUT, sample_dim=0), TensorSpec("y2", (8, 32), sample_dim=0)]
        op = Op("fc2", "linear", ("x2", "w"), ("y2",))
    else:
        tensors = [TensorSpec("x2", (32, 16), role=Role.INPUT), TensorSpec("y2", (32, 16))]
        op = Op("fc2", "add", ("x2", "w"), ("y2",))
    return Graph.build("tied", [
        TensorSpec("x1", (8, 16), role=Role.INPUT, sample_dim=0), TensorSpec("w", (32, 16), role=Role.WEIGHT),
        TensorSpec("y1", (8, 32), sample_dim=0), *tensors],
        [Op("fc1", "linear", ("x1", "w"), ("y1",)), op], ["y1", "y2"])


def test_a_gathered_tied_weight_its_reader_keeps_is_memory_until_backward(checked):
    """fc2 keeps the all-gathered w for dX = dY w: the copy stays until its backward, as the
    simulator holds it; read in its owner's layout, there is no copy."""
    from stratagem.cost.memory import keeps_weight_copy
    from stratagem.sim.builder import simulate
    graph = checked(_tied())
    model = CostModel(graph, "h100-1x8", num_devices=4)
    dp, mp = Configuration.of(b=4), Configuration.of(j=4)
    assert keeps_weight_copy(graph, graph.op("fc2"), "w")
    assert model.edge_cost("w", "fc1", mp, "fc2", dp).extra_memory_bytes == 32 * 16 * 4
    assert model.edge_cost("w", "fc1", mp, "fc2", mp).extra_memory_bytes == 0
    for strategy in ({"fc1": mp, "fc2": dp}, {"fc1": mp, "fc2": mp}, {"fc1": dp, "fc2": mp}):
        assert model.plan_cost(strategy).memory_bytes == simulate(model, strategy).peak_memory_bytes


def test_a_gathered_weight_its_reader_does_not_keep_is_transient(checked):
    """An add needs no values for its gradient: the gathered copy lives while it runs only."""
    from stratagem.cost.memory import keeps_weight_copy
    from stratagem.cost.transient import input_transient_bytes
    from stratagem.sim.builder import simulate
    from stratagem.space import Edge
    graph = checked(_tied("add"))
    model = CostModel(graph, "h100-1x8", num_devices=4)
    mp, whole = Configuration.of(j=4), Configuration.of(rep=4)
    assert not keeps_weight_copy(graph, graph.op("fc2"), "w")
    edge = model.edge_cost("w", "fc1", mp, "fc2", whole)
    assert edge.forward_steps and edge.extra_memory_bytes == 0
    copy = 32 * 16 * 4       # at the run, while another input moves, while it moves (the weight is resident)
    assert input_transient_bytes(model, Edge("w", "fc1", "fc2"), mp, whole) == (copy, copy, copy + edge.temporary_bytes)
    strategy = {"fc1": mp, "fc2": whole}
    assert model.plan_cost(strategy).memory_bytes == simulate(model, strategy).peak_memory_bytes


def _memory_parts_per_device(model, strategy, terms):
    """The oracle: memory_parts by a loop over every device of every op and edge, in its order."""
    from stratagem.cost.model import MEMORY_KINDS
    from stratagem.cost.sharing import sharing_credits
    parts = {kind: [0.0] * model.num_devices for kind in MEMORY_KINDS}
    fields = {"weights": "parameter_bytes", "gradients": "gradient_bytes", "optimizer_state": "optimizer_bytes",
              "activations": "activation_bytes"}
    for op in model.graph.ops:
        memory = model.op_cost(op.name, strategy[op.name]).memory
        for d in strategy[op.name].devices:
            for kind, field in fields.items():
                parts[kind][d] += getattr(memory, field)
    for edge in model.edges():
        for d in strategy[edge.dst_op].devices:
            parts["activations"][d] += model.edge_cost_in(edge, strategy).extra_memory_bytes
    for num_bytes, devices in sharing_credits(model, strategy):
        for d in devices:
            parts["activations"][d] -= num_bytes
    for num_bytes, devices, _ in terms:
        for d in devices:
            parts["transient"][d] = max(parts["transient"][d], num_bytes)
    return parts


@pytest.mark.parametrize("name", ["mlp", "conv", "views"])
def test_memory_parts_are_per_device_sums_in_a_loops_order(name):
    """Per span of devices alike, then spread: the same floats in the same order as summing
    device by device, with ops on blocks of devices of every size and place."""
    from stratagem.cost.transient import transient_terms
    from stratagem.space import Strategy
    graphs = {"mlp": lambda: mlp(32, 64, 128, activation=True), "conv": lambda: conv(8, 8, 34, 3),
              "views": lambda: mlp_with_views(32, 64, 128, transposed=True)}
    model = CostModel(graphs[name](), "v100-2x8", num_devices=16)
    configs = {op.name: model.configurations(op.name, SpaceOptions(state_sharding=True)) for op in model.graph.ops}
    rng = np.random.default_rng(5)
    spans = set()
    for _ in range(20):
        strategy = {op: c[rng.integers(len(c))] for op, c in configs.items()}
        reuse = {}
        for edge in model.edges():
            names = [option.name for option in model.edge_cost_in(edge, strategy).reuse]
            if len(names) > 1:
                reuse[edge] = names[rng.integers(len(names))]
        strategy = Strategy(strategy, reuse)
        terms = tuple(transient_terms(model, strategy))
        assert model.memory_parts(strategy) == _memory_parts_per_device(model, strategy, terms)
        spans |= {(c.devices.start, c.devices.stop) for c in strategy.values()}
    assert len(spans) > 4


def _random_strategies(name: str, seed: int, count: int = 3):
    """A zoo model's cost model on 16 V100s, a generator, and `count` strategies of random
    configurations (weights sharded among them), drawn as they are asked for."""
    from stratagem.frontend import zoo
    model = CostModel(zoo.build(name), "v100-2x8", num_devices=16)
    configs = {op.name: model.configurations(op.name, SpaceOptions(state_sharding=True)) for op in model.graph.ops}
    rng = np.random.default_rng(seed)
    return model, rng, ({op: c[rng.integers(len(c))] for op, c in configs.items()} for _ in range(count))


@pytest.mark.parametrize("name", ["gpt-tiny", "hf:t5-small"])
def test_edges_alike_cost_what_each_prices_alone(name):
    """A repeated layer's edges are priced once (CostModel._first_alike_edge): each edge's cost
    under random configuration pairs, asked after the others', equals pricing it alone."""
    from stratagem.cost.edgecost import build_edge_cost
    model, _, strategies = _random_strategies(name, 11)
    edges = list(model.edges())
    for strategy in strategies:
        for edge in edges:
            src = strategy[edge.src_op] if edge.src_op else None
            alone = build_edge_cost(model, edge.tensor, edge.src_op, src, edge.dst_op, strategy[edge.dst_op])
            assert model.edge_cost(edge.tensor, edge.src_op, src, edge.dst_op, strategy[edge.dst_op]) == alone, edge
    firsts = {model._first_alike_edge(e.tensor, e.src_op, e.dst_op) for e in edges}
    assert len(firsts) < len(edges) / 2         # the layers' edges were priced as the first layer's


@pytest.mark.parametrize("name", ["gpt-tiny", "hf:t5-small"])
def test_edges_alike_have_the_transient_terms_each_has_alone(name):
    """A repeated layer's edges' (L, H, P) are found once (cost.transient.transient_signature):
    each edge's terms under random configurations, reuse options and sharing, asked after the
    others', equal input_transient_bytes of that edge alone."""
    from stratagem.cost.transient import input_transient_bytes
    model, rng, strategies = _random_strategies(name, 12)
    edges = list(model.edges())
    for strategy in strategies:
        for edge in edges:
            src = strategy[edge.src_op] if edge.src_op else None
            options = [None] + [o.name for o in model.edge_cost_in(edge, strategy).reuse]
            option, shared = options[rng.integers(len(options))], bool(rng.integers(2))
            alone = input_transient_bytes(model, edge, src, strategy[edge.dst_op], option, shared)
            assert model.input_transient(edge, src, strategy[edge.dst_op], option, shared) == alone, edge
    signatures = {model._transient_signatures[e] for e in edges}
    assert len(signatures) < len(edges) / 2      # the layers' edges were found as the first layer's
