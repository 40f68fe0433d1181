"""The busy bound of a complete strategy (search.bounds.busy_bound) against the simulator: never
above the simulated time, and equal to it where ranks wait for their collectives and every op is
on every device (then a device runs everything one task after another)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stratagem.cluster import Cluster, load
from stratagem.cost import CostModel
from stratagem.search.bounds import busy_bound, busy_resources
from stratagem.search.ft_search import ROUNDING
from stratagem.sim.builder import Simulation
from stratagem.space import Configuration, SpaceOptions, Strategy
from tests.cost.graphs import conv, fanout, mlp, mlp_with_views

GRAPHS = {"mlp": lambda: mlp(32, 64, 128, activation=True), "conv": lambda: conv(8, 8, 34, 3),
          "views": lambda: mlp_with_views(32, 64, 128, transposed=True), "fanout": lambda: fanout(32, 64, 128)}
WITH_STATES = SpaceOptions(state_sharding=True, offload=True)


def _cluster(overlap: bool) -> Cluster:
    base = load("v100-2x8")
    return Cluster(dataclasses.replace(base.spec, overlap_compute=overlap))


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_busy_bound_is_below_the_simulated_time(name, overlap):
    model = CostModel(GRAPHS[name](), _cluster(overlap), num_devices=8)
    configs = {op.name: model.configurations(op.name, WITH_STATES) for op in model.graph.ops}
    rng = np.random.default_rng(len(name) + overlap)
    for _ in range(15):
        strategy = {op: c[rng.integers(len(c))] for op, c in configs.items()}
        strategy = Strategy(strategy, _some_reuse(model, strategy, rng))
        simulated = Simulation(model, strategy).run().iteration_time_s
        assert busy_bound(model, strategy) <= simulated * (1 + ROUNDING)


def _some_reuse(model, strategy, rng) -> dict:
    """A tensor-reuse option drawn for each edge that has several (their backward steps count)."""
    chosen = {}
    for edge in model.edges():
        names = [option.name for option in model.edge_cost_in(edge, strategy).reuse]
        if len(names) > 1:
            chosen[edge] = names[rng.integers(len(names))]
    return chosen


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_busy_bound_is_the_simulated_time_when_every_rank_waits_and_runs_every_op(name):
    model = CostModel(GRAPHS[name](), _cluster(False), num_devices=8)
    everywhere = {op.name: [c for c in model.configurations(op.name, WITH_STATES) if c.num_devices == 8]
                  for op in model.graph.ops}
    rng = np.random.default_rng(len(name))
    for _ in range(15):
        strategy = {op: c[rng.integers(len(c))] for op, c in everywhere.items()}
        strategy = Strategy(strategy, _some_reuse(model, strategy, rng))
        simulated = Simulation(model, strategy).run().iteration_time_s
        assert busy_bound(model, strategy) == pytest.approx(simulated, rel=ROUNDING)


def test_resources_shared_across_strategies_give_each_its_own_bound():
    """One `busy_resources` graph for many strategies (as the planner bounds its frontier points)
    bounds each as a fresh one does: the steps' resources it remembers are the same for all."""
    model = CostModel(GRAPHS["mlp"](), _cluster(False), num_devices=8)
    configs = {op.name: model.configurations(op.name, WITH_STATES) for op in model.graph.ops}
    rng = np.random.default_rng(7)
    shared = busy_resources(model)
    bounds = []
    for _ in range(10):
        strategy = Strategy({op: c[rng.integers(len(c))] for op, c in configs.items()})
        bounds.append(busy_bound(model, strategy))
        assert busy_bound(model, strategy, shared) == bounds[-1]
    assert len(set(bounds)) > 1


def test_a_tensor_two_readers_read_in_one_layout_is_counted_as_moved_once():
    """fanout's h, split by features, read split by batch by fc2a and fc2b: the simulator moves
    it once (cost.shared_moves), and the busy bound, the simulated time where every rank waits
    for each collective, counts that one move; with fc2b reading it whole, both moves."""
    model = CostModel(fanout(32, 64, 128), _cluster(False), num_devices=8)
    column, batch, whole = (Configuration.of(**axes) for axes in ({"j": 8}, {"b": 8}, {"rep": 8}))
    for fc2b in (batch, whole):
        strategy = {"fc1": column, "fc2a": batch, "fc2b": fc2b, "sum": Configuration.of(d0=8)}
        simulated = Simulation(model, strategy).run().iteration_time_s
        assert busy_bound(model, strategy) == pytest.approx(simulated, rel=ROUNDING)
