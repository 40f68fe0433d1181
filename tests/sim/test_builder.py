"""The simulator's task graph (FlexFlow §5.1): a hand-checked timeline, delta against full, trace."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stratagem.cluster import Cluster, load
from stratagem.cost import CostModel
from stratagem.sim.builder import Simulation
from stratagem.sim.state import SimState
from stratagem.space import Configuration, Level, SpaceOptions
from tests.cost.graphs import conv, fanout, mlp, mlp_with_views


@pytest.fixture(scope="module")
def model():
    return CostModel(mlp(64, 256, 512, activation=True), "v100-2x8", num_devices=2)


def times(sim, op, kind, device_index=0):
    t = sim.op_tasks[op][kind][device_index]
    return sim.store.start[t], sim.store.end[t]


def _three_ops(model):
    dp, act_dp, column = Configuration.of(b=2), Configuration.of(d0=2), Configuration.of(j=2)
    sim = Simulation(model, {"fc1": dp, "act": act_dp, "fc2": column})
    result = sim.run()
    fc1, act, fc2 = (model.op_cost(n, c) for n, c in (("fc1", dp), ("act", act_dp), ("fc2", column)))
    gather = model.edge_cost("a", "act", act_dp, "fc2", column)  # S(0) -> R: all-gather
    assert [s.kind for s in gather.forward_steps] == ["all_gather"]
    assert [s.kind for s in gather.backward_steps] == ["reduce_scatter"]   # P(sum) -> S(0)
    assert model.edge_cost("h", "fc1", dp, "act", act_dp).forward_steps == ()
    (sync,) = fc1.sync                                                     # data-parallel all-reduce
    assert fc2.sync == ()                                                  # column-parallel weights
    return sim, result, fc1, act, fc2, gather, sync


def test_three_ops_on_two_devices_task_by_task(model):
    """fc1 and softmax data parallel, fc2 column parallel, on a cluster whose ranks wait for their
    collectives (stratagem.runtime's way): every task holds both devices in turn, so the timeline
    is the tasks one after another, checked against hand-derived times."""
    sim, result, fc1, act, fc2, gather, sync = _three_ops(model)
    ag, rs = gather.forward_time_s, gather.backward_time_s
    t = fc1.forward_time_s
    for d in range(2):
        assert times(sim, "fc1", "F", d) == pytest.approx((0.0, t))
        assert times(sim, "act", "F", d) == pytest.approx((t, t + act.forward_time_s))
    t += act.forward_time_s + ag
    assert times(sim, "fc2", "F") == pytest.approx((t, t + fc2.forward_time_s))
    t += fc2.forward_time_s
    assert times(sim, "fc2", "B") == pytest.approx((t, t + fc2.backward_time_s))
    t += fc2.backward_time_s + rs            # the reduce-scatter holds the devices
    assert times(sim, "fc2", "U") == pytest.approx((t, t + fc2.update_time_s))
    t += fc2.update_time_s                   # ready before act's backward, so first in FIFO
    assert times(sim, "act", "B") == pytest.approx((t, t + act.backward_time_s))
    t += act.backward_time_s
    assert times(sim, "fc1", "B") == pytest.approx((t, t + fc1.backward_time_s))
    t += fc1.backward_time_s
    sync_task = sim.op_tasks["fc1"]["sync"][0]
    assert (sim.store.start[sync_task], sim.store.end[sync_task]) == pytest.approx((t, t + sync.time_s))
    t += sync.time_s
    assert times(sim, "fc1", "U") == pytest.approx((t, t + fc1.update_time_s))
    assert result.iteration_time_s == pytest.approx(t + fc1.update_time_s)
    resources = sim.store.resources_of(sync_task).tolist()
    assert resources[:2] == [0, 1] and len(resources) > 2 and all(r >= 2 for r in resources[2:])
    # 6 forward + 6 backward + 4 updates (softmax has no weights) + 1 sync + 2 re-scheduling steps
    assert result.num_tasks == 19
    additive = sum(c.time_s for c in (fc1, act, fc2)) + gather.time_s
    assert result.iteration_time_s == pytest.approx(additive)        # nothing overlaps: Eq. 3's sum


def test_three_ops_overlapping_communication_task_by_task():
    """The same plan on a cluster whose runtime computes while collectives run (FlexFlow's
    dataflow assumption, `overlap_compute`): communication holds links only."""
    spec = dataclasses.replace(load("v100-2x8").spec, overlap_compute=True)
    model = CostModel(mlp(64, 256, 512, activation=True), Cluster(spec), num_devices=2)
    sim, result, fc1, act, fc2, gather, sync = _three_ops(model)
    ag, rs = gather.forward_time_s, gather.backward_time_s
    t = fc1.forward_time_s + act.forward_time_s + ag
    assert times(sim, "fc2", "F") == pytest.approx((t, t + fc2.forward_time_s))
    t += fc2.forward_time_s + fc2.backward_time_s
    assert times(sim, "fc2", "U") == pytest.approx((t, t + fc2.update_time_s))
    # FIFO on the device: act's backward waits for the reduce-scatter and for fc2's update
    t_act = max(t + rs, t + fc2.update_time_s)
    assert times(sim, "act", "B") == pytest.approx((t_act, t_act + act.backward_time_s))
    t = t_act + act.backward_time_s + fc1.backward_time_s
    sync_task = sim.op_tasks["fc1"]["sync"][0]
    assert (sim.store.start[sync_task], sim.store.end[sync_task]) == pytest.approx((t, t + sync.time_s))
    assert all(r >= 2 for r in sim.store.resources_of(sync_task))      # on links, not on devices
    assert result.iteration_time_s == pytest.approx(t + sync.time_s + fc1.update_time_s)


def timeline(sim):
    rows = []
    for t in sim.store.live:
        meta = sim.state.tasks.meta(int(t))
        rows.append((meta.label, tuple(sim.store.resources_of(int(t)).tolist()),
                     float(sim.store.start[t]), float(sim.store.end[t])))
    return sorted(rows)


GRAPHS = {"mlp": lambda: mlp(32, 64, 128, activation=True), "conv": lambda: conv(8, 8, 34, 3),
          "views": lambda: mlp_with_views(32, 64, 128, transposed=True), "fanout": lambda: fanout(32, 64, 128)}


@pytest.fixture(scope="module")
def models():
    return {name: CostModel(build(), "v100-2x8", num_devices=4) for name, build in GRAPHS.items()}


WITH_STATES = SpaceOptions(state_sharding=True, offload=True)    # weight owners' sharded states too (their gathers)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(GRAPHS)), st.integers(0, 2**31), st.integers(1, 6))
def test_delta_simulation_gives_the_full_timeline(models, name, seed, changes):
    assert_delta_is_full(models[name], seed, changes, WITH_STATES)


def assert_delta_is_full(model, seed: int, changes: int, options=None) -> None:
    """From a random strategy, `changes` random edits, each simulated delta: the timeline, the
    time and every device's peak equal a fresh full simulation's."""
    rng = np.random.default_rng(seed)
    configs = {op.name: model.configurations(op.name, *(() if options is None else (options,)))
               for op in model.graph.ops}
    sim = Simulation(model, {op: c[rng.integers(len(c))] for op, c in configs.items()})
    sim.run()
    for _ in range(changes):
        op = list(configs)[rng.integers(len(configs))]
        delta = sim.change(op, configs[op][rng.integers(len(configs[op]))])
        fresh = Simulation(model, dict(sim.strategy))
        full = fresh.run()
        assert timeline(sim) == timeline(fresh)
        assert (delta.iteration_time_s, delta.peak_memory_per_device) == \
               (full.iteration_time_s, full.peak_memory_per_device)


def test_chrome_trace_has_an_event_per_task_and_per_resource(model, tmp_path):
    sim = Simulation(model, {"fc1": Configuration.of(b=2), "act": Configuration.of(d0=2),
                             "fc2": Configuration.of(k=2)})
    sim.run()
    result = sim.result(with_trace=True)
    trace = json.loads(json.dumps(result.chrome_trace()))
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    expected = sum(len(sim.store.resources_of(int(t))) for t in sim.store.live)
    assert len(events) == expected
    assert {e["cat"] for e in events} >= {"forward", "backward", "update", "sync", "reschedule"}
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert "device 0 (node 0)" in names and any(n.startswith("link") for n in names)
    assert max(e["ts"] + e["dur"] for e in events) == pytest.approx(result.iteration_time_s * 1e6)


def replicated_peak(graph) -> float:
    model = CostModel(graph, "v100-2x8", num_devices=1)
    strategy = {op.name: model.configurations(op.name)[0] for op in graph.ops}
    return Simulation(model, strategy).run().peak_memory_bytes


def test_a_tensor_is_moved_once_per_layout_its_readers_need():
    """h, column-split by fc1, read by fc2a and fc2b: where both read it split by batch, one
    all-to-all moves it (for fc2a, the first) and one moves its gradient back, as the runtime
    moves a tensor into a layout once; the copy lives until the later of their backwards (both
    keep it). Where they read it in two layouts, each pays its own move."""
    model = CostModel(fanout(32, 64, 128), "v100-2x8", num_devices=2)
    column, batch, whole = Configuration.of(j=2), Configuration.of(b=2), Configuration.of(rep=2)
    shared = Simulation(model, {"fc1": column, "fc2a": batch, "fc2b": batch, "sum": Configuration.of(d0=2)})
    shared.run()
    moves = [t for t in shared.store.live if shared.state.tasks.meta(int(t)).label.startswith(("h ", "grad h "))]
    edge = model.edge_cost("h", "fc1", column, "fc2a", batch)
    assert len(moves) == len(edge.forward_steps) + len(edge.backward_steps) == 2
    k_a, k_b = (shared.state.edges.index(e) for e in shared.state.edges if e.tensor == "h")
    assert shared.state.mover_of(k_a) == shared.state.mover_of(k_b) == k_a
    first_b = shared.op_tasks["fc2b"]["F"][0]
    assert shared.store.start[first_b] >= shared.store.end[shared.state.edge_tasks[k_a]["fwd"][-1]]
    backward = shared.state.edge_tasks[k_a]["bwd"][0]
    assert shared.store.start[backward] >= max(shared.store.end[t] for op in ("fc2a", "fc2b")
                                                 for t in shared.op_tasks[op]["B"])
    apart = Simulation(model, {"fc1": column, "fc2a": batch, "fc2b": whole, "sum": Configuration.of(d0=2)})
    apart.run()
    assert sum(apart.state.tasks.meta(int(t)).label.startswith(("h ", "grad h ")) for t in apart.store.live) == \
        2 + len(model.edge_cost("h", "fc1", column, "fc2b", whole).forward_steps)


def test_a_shared_copy_is_held_once_until_its_last_reader_is_done():
    """Both readers keeping h's batch-split copy: the mover's edge holds one buffer of it per
    device, freed once both readers' backward ran there; the other reader's edge holds none."""
    model = CostModel(fanout(32, 64, 128), "v100-2x8", num_devices=2)
    column, batch = Configuration.of(j=2), Configuration.of(b=2)
    sim = Simulation(model, {"fc1": column, "fc2a": batch, "fc2b": batch, "sum": Configuration.of(d0=2)})
    sim.run()
    k_a, k_b = (sim.state.edges.index(e) for e in sim.state.edges if e.tensor == "h")
    assert len(sim.edge_buffers[k_b].num_bytes) == 0
    held = sim.edge_buffers[k_a]
    copies = np.flatnonzero(held.num_bytes == 32 * 128 * 4 / 2)
    assert sorted(held.device[copies].tolist()) == [0, 1]
    starts = np.concatenate([[0], np.cumsum(held.free_count)])
    for i in copies:
        frees = set(held.free_tasks[starts[i]:starts[i + 1]].tolist())
        d = int(held.device[i])
        assert {sim.op_tasks["fc2a"]["B"][d], sim.op_tasks["fc2b"]["B"][d]} <= frees


def test_views_hold_no_memory_of_their_own():
    """A reshape of a contiguous tensor is its input's storage: fc1 -> reshape -> reshape -> fc2
    peaks exactly as fc1 -> fc2 (at fc2's forward: h and y). Through a transpose the second
    reshape copies: at its forward h and its copy h2 are both live (h2 in place of y)."""
    plain = replicated_peak(mlp(32, 64, 128))
    assert replicated_peak(mlp_with_views(32, 64, 128)) == plain
    assert replicated_peak(mlp_with_views(32, 64, 128, transposed=True)) == plain + 32 * 128 * 4 - 32 * 64 * 4


def test_keys_stay_ordered_and_delta_exact_past_16384_edges():
    """An RNN unrolled 8,200 steps (each step reads the shared weight over an edge) has more
    edges than the float key of before could order: keys must rise along every dependency, be
    unique, and delta simulation must still give the full timeline."""
    from tests.search.graphs import unrolled
    graph = unrolled(steps=8200, batch=8, width=8)
    cost = CostModel(graph, "v100-2x8", num_devices=2)
    assert len(cost.edges()) > 16384
    data_parallel = Configuration((Level("b", 2),), 0)
    sim = Simulation(cost, {op.name: data_parallel for op in graph.ops})
    sim.run()
    store, live = sim.store, sim.store.live
    assert len(set(store.topo[live].tolist())) == len(live)
    for t in live:
        preds = store.preds_of(int(t))
        assert (store.topo[preds] < store.topo[t]).all()
    late = graph.ops[-2].name                   # its edges are numbered past 16,384
    whole = Configuration((Level(None, 1),), 0)
    changed = sim.change(late, whole)
    fresh = Simulation(cost, {**sim.strategy, late: whole}).run()
    assert changed.iteration_time_s == fresh.iteration_time_s
    assert changed.peak_memory_bytes == fresh.peak_memory_bytes


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(GRAPHS)), st.data())
def test_neighbours_are_the_ops_before_and_after_on_each_device(models, name, data):
    """SimState.neighbours (all of an op's devices at once, as ranges) against previous_on /
    next_on asked device by device, on ops spread over different device subsets."""
    model = models[name]
    strategy = {}
    for op in model.graph.ops:
        size = data.draw(st.sampled_from([1, 2, 4]))
        first = data.draw(st.sampled_from(range(0, 4, size)))
        strategy[op.name] = Configuration(((Level("b", size),) if size > 1 else ()), first)
    state = SimState(model, strategy, {})
    for op in model.graph.ops:
        for step, ask in ((-1, state.previous_on), (+1, state.next_on)):
            pieces = state.neighbours(op.name, step)
            found = {d: other for other, devices in pieces for d in devices}
            assert sum(len(devices) for _, devices in pieces) == len(found)        # no device twice
            expected = {d: ask(op.name, d) for d in strategy[op.name].devices}
            assert found == {d: other for d, other in expected.items() if other is not None}


@pytest.mark.parametrize("state", ["sharded", "offloaded"])
def test_a_weight_is_gathered_again_only_after_its_forward(model, state):
    """The last op has no op after it to wait for: its backward gathers still follow its forward."""
    sim = Simulation(model, {"fc1": Configuration.of(b=2).with_state(state), "act": Configuration.of(d0=2),
                             "fc2": Configuration.of(b=2).with_state(state)})
    sim.run()
    for op in ("fc1", "fc2"):
        tasks = sim.op_tasks[op]
        assert tasks["BG"] and min(sim.store.start[tasks["BG"]]) >= max(sim.store.end[tasks["F"]])


def test_offloaded_weights_move_over_each_devices_host_link_and_leave_the_device(model):
    """"offloaded" against "sharded": a copy in before each gather and out after the reduce-scatter,
    each holding the devices' own host links (resources after the cluster's links) and the devices
    (a rank waits for its copies); the resident shards leave every device's peak."""
    def run(state):
        strategy = {"fc1": Configuration.of(b=2).with_state(state), "act": Configuration.of(d0=2),
                    "fc2": Configuration.of(b=2).with_state(state)}
        sim = Simulation(model, strategy)
        return sim, sim.run()

    (_, sharded), (sim, offloaded) = run("sharded"), run("offloaded")
    links_end = sim.state.tasks.num_devices + len(model.cluster.links)
    copies = [t for t in sim.store.live if sim.state.tasks.meta(int(t)).label.startswith(("fc1", "fc2"))
              and any(r >= links_end for r in sim.store.resources_of(int(t)))]
    assert len(copies) == 2 * 3                                   # per op: in for forward, in for backward, out
    for t in copies:
        held = sim.store.resources_of(int(t)).tolist()
        assert held[:2] == [0, 1] and all(r >= links_end for r in held[2:]) and len(held) == 4
    resident = sum(model.op_cost(op, Configuration.of(b=2).with_state("offloaded")).memory.host_bytes
                   for op in ("fc1", "fc2"))             # the sharded plan's shards, resident on the device
    assert resident > 0
    assert [a - b for a, b in zip(sharded.peak_memory_per_device[:2], offloaded.peak_memory_per_device[:2])] == \
        pytest.approx([resident] * 2, rel=1e-12)
    assert offloaded.iteration_time_s > sharded.iteration_time_s


@pytest.mark.parametrize("representative", [False, True])
def test_many_resources_built_from_arrays_simulate_as_lists(monkeypatch, representative):
    """A task holding many resources (a step's links) goes into the build as an array kept per
    resource tuple: every task, resource, time and peak as when built from lists."""
    import stratagem.sim.taskgraph as taskgraph
    model = CostModel(mlp(64, 256, 512, activation=True), "v100-2x8", num_devices=16)
    configs = {op.name: model.configurations(op.name) for op in model.graph.ops}
    rng = np.random.default_rng(2)
    for _ in range(6):
        strategy = {op: c[rng.integers(len(c))] for op, c in configs.items()}
        built = {}
        for many in (10**9, 0):
            monkeypatch.setattr(taskgraph, "MANY_RESOURCES", many)
            sim = Simulation(model, strategy, representative=representative)
            result = sim.run()
            store = sim.store
            built[many] = (result.iteration_time_s, result.peak_memory_per_device, store.n,
                           [tuple(store.resources_of(t)) for t in range(store.n)])
        assert built[0] == built[10**9]
        assert max(len(r) for r in built[0][3]) > 1


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_what_reports_read_of_each_task_is_its_own_after_edits(models, name):
    """Tasks are described per run added together (sim.taskgraph._Described): per task, its
    category, bytes and device (a compute task's the one resource it holds, else -1) are what
    its own TaskMeta and resources say, after a full build and after delta edits."""
    from stratagem.sim.taskgraph import CATEGORIES, COMPUTE
    model = models[name]
    rng = np.random.default_rng(3)
    configs = {op.name: model.configurations(op.name, WITH_STATES) for op in model.graph.ops}
    sim = Simulation(model, {op: c[rng.integers(len(c))] for op, c in configs.items()})
    sim.run()
    for edits in range(3):
        tasks = sim.state.tasks
        category, device, num_bytes = tasks._described.arrays()
        assert len(category) == sim.store.n
        for t in range(sim.store.n):
            meta = tasks.meta(t)
            assert (category[t], num_bytes[t]) == (CATEGORIES.index(meta.category), meta.num_bytes)
            if category[t] < COMPUTE and sim.store.alive[t]:
                assert [device[t]] == sim.store.resources_of(t).tolist()
        op = list(configs)[rng.integers(len(configs))]
        sim.change(op, configs[op][rng.integers(len(configs[op]))])
