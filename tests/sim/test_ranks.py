"""Representative ranks (sim.ranks): one simulated device per class of devices a strategy treats
alike gives every device's times, peaks and busy time exactly, on random strategies and real plans."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stratagem.cluster import Cluster, load
from stratagem.cost import CostModel
from stratagem.errors import StratagemError
from stratagem.search.context import context, recomputing
from stratagem.search.strategies import (
    data_parallel_strategy, model_parallel_strategy, tensor_parallel_strategy, with_sharded_state,
)
from stratagem.sim.builder import Simulation, simulate
from stratagem.sim.ranks import PartClass, classes_of, every_device
from stratagem.space import Configuration, SpaceOptions
from stratagem.zoo import build
from tests.cost.graphs import conv, mlp, mlp_with_views

GRAPHS = {"mlp": lambda: mlp(32, 64, 128, activation=True), "conv": lambda: conv(8, 8, 34, 3),
          "views": lambda: mlp_with_views(32, 64, 128, transposed=True)}
WITH_STATES = SpaceOptions(state_sharding=True, offload=True)


def test_classes_are_the_pieces_between_the_ends_of_the_ranges():
    classes = classes_of([range(0, 8), range(0, 4), range(4, 8), range(4, 6)], 8)
    assert classes.bounds == (0, 4, 6, 8)
    assert classes.of_range(range(0, 8)) == range(0, 3)
    assert classes.of_range(range(4, 8)) == range(1, 3)
    assert classes.of_devices([0, 1, 2, 3, 6, 7]) == [0, 2]
    assert classes.expand(np.array([1.0, 2.0, 3.0])).tolist() == [1.0] * 4 + [2.0] * 2 + [3.0] * 2
    with pytest.raises(PartClass, match="part of a class"):
        classes.of_devices([0, 1])
    with pytest.raises(PartClass, match="inside a class"):
        classes.of_range(range(2, 8))
    assert classes_of([range(0, 8)], 8).bounds == (0, 8)
    assert every_device(3).of_range(range(1, 3)) == range(1, 3)


def _clusters() -> dict[str, Cluster]:
    waiting = load("v100-2x8")
    return {"waiting": waiting, "overlapping": Cluster(dataclasses.replace(waiting.spec, overlap_compute=True))}


@pytest.fixture(scope="module")
def models():
    return {(g, c): CostModel(build(), cluster, num_devices=8)
            for g, build in GRAPHS.items() for c, cluster in _clusters().items()}


def _compare(model, strategy) -> Simulation:
    """Representative against every device: the result field for field, and each compute task's
    times against those of every device of its class."""
    full, rep = Simulation(model, strategy), Simulation(model, strategy, representative=True)
    a, b = full.run(), rep.run()
    assert dataclasses.replace(b, simulated_tasks=None) == dataclasses.replace(a, simulated_tasks=None)
    assert a.simulated_tasks == a.num_tasks and b.simulated_tasks <= a.num_tasks
    assert rep.peak_breakdown() == full.peak_breakdown()
    bounds = rep.state.classes.bounds
    for op, config in strategy.items():
        for kind in ("F", "B", "U"):
            mine = rep.op_tasks[op][kind]
            if not mine:                                # no update (no weights)
                assert not full.op_tasks[op][kind]
                continue
            for i, c in enumerate(rep.state.devices_of(op)):
                for d in range(bounds[c], bounds[c + 1]):
                    t_full = full.op_tasks[op][kind][d - config.devices.start]
                    assert (full.store.start[t_full], full.store.end[t_full]) == \
                           (rep.store.start[mine[i]], rep.store.end[mine[i]])
    return rep


@pytest.mark.parametrize("seed", range(24))
def test_a_representative_rank_per_class_gives_every_device_exactly(models, seed):
    """Random strategies over every configuration (some ops on part of the devices, weights
    sharded), on clusters where ranks wait for their collectives and where they do not."""
    rng = np.random.default_rng(seed)
    key = sorted(models)[seed % len(models)]
    model = models[key]
    configs = {op.name: model.configurations(op.name, WITH_STATES) for op in model.graph.ops}
    whole = {op: [c for c in cs if c.num_devices == 8] for op, cs in configs.items()}
    pool = whole if seed % 2 else configs           # every op on all devices: one class, or any
    strategy = {op: c[rng.integers(len(c))] for op, c in pool.items()}
    rep = _compare(model, strategy)
    if seed % 2 and rep.representative:                 # (the cluster's other devices idle: a class)
        assert rep.state.classes.bounds == tuple(sorted({0, 8, model.cluster.num_devices}))


def test_most_random_strategies_are_simulated_with_fewer_ranks(models):
    """The comparison above is not vacuous: on all-device strategies the classes are used."""
    used = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        model = models[sorted(models)[seed % len(models)]]
        strategy = {op.name: [c for c in model.configurations(op.name, WITH_STATES) if c.num_devices == 8]
                    for op in model.graph.ops}
        strategy = {op: cs[rng.integers(len(cs))] for op, cs in strategy.items()}
        sim = Simulation(model, strategy, representative=True)
        used += sim.representative
        assert sim.run().simulated_tasks < sim.result().num_tasks or not sim.representative
    assert used >= 8


def test_a_step_holding_part_of_a_class_falls_back_to_every_device(models):
    """Where ranks wait for their collectives, a step on some devices of a class (ops on parts of
    the devices re-scheduled into each other) makes them unalike: the simulation is built over
    every device, and gives what it gives without the option."""
    model = models[("mlp", "waiting")]
    configs = {op.name: model.configurations(op.name, WITH_STATES) for op in model.graph.ops}
    fallen = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        strategy = {op: c[rng.integers(len(c))] for op, c in configs.items()}
        if classes_of((c.devices for c in strategy.values()), 8).count < 8:
            rep = _compare(model, strategy)
            fallen += not rep.representative
    assert fallen >= 3


def test_a_representative_simulation_takes_no_edits_and_gives_no_trace(models):
    model = models[("mlp", "waiting")]
    strategy = {"fc1": Configuration.of(b=8), "act": Configuration.of(d0=8), "fc2": Configuration.of(b=8)}
    sim = Simulation(model, strategy, representative=True)
    sim.run()
    with pytest.raises(StratagemError, match="no delta edits"):
        sim.change("fc1", Configuration.of(b=4))
    with pytest.raises(StratagemError, match="no per-device trace"):
        sim.result(with_trace=True)
    assert len(simulate(model, strategy, with_trace=True).trace_tasks) == simulate(model, strategy).num_tasks


def _settings(ctx):
    dp = data_parallel_strategy(ctx)
    return {"data-parallel": dp, "fsdp": with_sharded_state(ctx, dp),
            "tensor-parallel": with_sharded_state(ctx, tensor_parallel_strategy(ctx, 4)),
            "model-parallel": model_parallel_strategy(ctx)}


@pytest.mark.parametrize("setting", ["data-parallel", "fsdp", "tensor-parallel", "model-parallel"])
def test_real_plans_at_sixteen_devices(setting):
    """gpt-tiny at 16 devices, its blocks kept and recomputed: data parallel, FSDP and tensor
    parallel in one class; layers on blocks of devices (model parallel) as it comes."""
    ctx = context(build("gpt-tiny"), "v100-2x8", 16)
    for c in (ctx, recomputing(ctx)):
        rep = _compare(c.model, _settings(c)[setting])
        if setting != "model-parallel":            # (its sends between blocks may hold part of one)
            assert rep.representative and rep.state.classes.count == 1
