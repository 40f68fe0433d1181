"""A plan with stages simulated (sim.pipeline): one micro-batch's timeline and the schedule over
it. With one micro-batch and the cuts free it is the task graph's own timeline (its gradient
all-reduces and updates taken out, then added once a step); delta equals full;
memory grows with the micro-batches a stage holds (GPipe: all, 1F1B: p - s)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

import stratagem as sg
from stratagem.cluster.loader import preset_files
from stratagem.cost.recompute import blocks
from stratagem.frontend import zoo
from stratagem.search.context import context, offloading
from stratagem.search.strategies import data_parallel_strategy, tensor_parallel_strategy
from stratagem.sim.pipeline import PipelineSimulation, open_simulation
from stratagem.sim.schedule import run_schedule
from stratagem.space import Configuration, Pipeline, Strategy
from stratagem.space.pipeline import stage_ops, staged

CLUSTER, DEVICES = "a100-2x8", 8


def pipeline_strategy(micro_batches: int, stages: int, schedule: str = "1f1b", tensor: bool = False,
                      offload: bool = False, cluster: str = CLUSTER):
    """`offload`: every block's activations offloaded to host memory (cost.activation_offload)."""
    graph = zoo.build("gpt-tiny-tiny" if stages <= 2 else "gpt-tiny", batch_size=8 // micro_batches)
    found = blocks(graph)
    cuts = tuple(found[len(found) * k // stages].ops[0] for k in range(1, stages))
    pipe = Pipeline(cuts, micro_batches, schedule)
    stage_ctx = context(graph, cluster, DEVICES // stages)
    per_stage = tensor_parallel_strategy(stage_ctx, 2) if tensor else data_parallel_strategy(stage_ctx)
    ctx = context(graph, cluster, DEVICES)
    return offloading(ctx) if offload else ctx, Strategy(staged(graph, pipe, DEVICES, per_stage), pipeline=pipe)


def simulated(micro_batches: int, stages: int, schedule: str = "1f1b", tensor: bool = False, offload: bool = False,
              cluster: str = CLUSTER):
    """pipeline_strategy's plan, and its simulation after a full run."""
    ctx, strategy = pipeline_strategy(micro_batches, stages, schedule, tensor, offload, cluster)
    simulation = PipelineSimulation(ctx.model, strategy)
    simulation.run()
    return ctx, strategy, simulation


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("tensor, offload", [(False, False), (True, False), (False, True), (True, True)])
def test_one_micro_batch_with_free_cuts_is_the_task_graphs_timeline(stages, tensor, offload):
    ctx, strategy, simulation = simulated(1, stages, tensor=tensor, offload=offload)
    times = simulation.stage_times()
    free = [replace(t, send_s=0.0, send_back_s=0.0) for t in times]
    run = run_schedule(free, 1, "1f1b")
    assert max(a.end_s for a in run.actions) == pytest.approx(simulation.inner.store.makespan(), rel=1e-9)
    last_backward = {a.stage: a.end_s for a in run.actions if a.kind == "B"}
    assert run.iteration_time_s == pytest.approx(max(last_backward[s] + t.tail_s for s, t in enumerate(times)))
    assert all(t.tail_s > 0 for t in times)        # every stage's weights are updated
    cuts = simulation.cut_times()
    assert len(cuts) == stages - 1 and all(x > 0 and y > 0 for x, y in cuts)


@pytest.mark.parametrize("offload", [False, True])
def test_delta_simulation_equals_full(offload):
    ctx, strategy, simulation = simulated(2, 2, offload=offload)
    graph = ctx.graph
    second = stage_ops(graph, strategy.pipeline)[1]
    for op in (second[3], second[-2], stage_ops(graph, strategy.pipeline)[0][5]):
        block = strategy[op].devices
        config = Configuration((), block.start)         # the op on one device of its stage
        delta = simulation.change(op, config)
        strategy = Strategy(strategy.with_ops({op: config}).ops, pipeline=strategy.pipeline)
        full = PipelineSimulation(ctx.model, strategy).run()
        assert delta.iteration_time_s == pytest.approx(full.iteration_time_s, rel=1e-9)
        assert delta.peak_memory_per_device == pytest.approx(full.peak_memory_per_device, rel=1e-9)


def test_a_stage_that_offloads_takes_at_least_its_copies_per_micro_batch(tmp_path):
    """A stage's forward per micro-batch ends when its last copy to the host does, its backward
    when its copies back and backward are done: each at least the copies one device of the stage
    makes over its host link (which the next micro-batch's copies wait for). Host links 1,000
    times slower than the preset's make the copies outlast the compute, so a pipeline that left
    them out (or overlapped them with the next micro-batch for free) would be faster than this."""
    spec = yaml.safe_load(next(p for p in preset_files() if p.stem == "a100-Nx8").read_text())
    spec["name"], spec["nodes"] = "a100-slow-host", 1
    spec["host"]["link"]["bandwidth_bytes_per_s"] /= 1000
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump(spec))
    ctx, strategy, simulation = simulated(4, 2, offload=True, cluster=str(tmp_path / "slow.yaml"))
    times = simulation.stage_times()
    for s, ops in enumerate(stage_ops(ctx.graph, strategy.pipeline)):
        out, back, compute = {}, {}, {}
        for op in ops:
            cost = ctx.model.op_cost(op, strategy[op])
            for d in strategy[op].devices:
                out[d] = out.get(d, 0.0) + sum(step.time_s for step in cost.offload)
                back[d] = back.get(d, 0.0) + sum(step.time_s for step in cost.reload)
                compute[d] = compute.get(d, 0.0) + cost.forward_time_s + cost.backward_time_s
        assert max(out.values()) > max(compute.values())            # the copies are the longer
        assert times[s].forward_s >= max(out.values()) * (1 - 1e-12)
        assert times[s].backward_s >= max(back.values()) * (1 - 1e-12)
    first = stage_ops(ctx.graph, strategy.pipeline)[0]
    offloaded = [op for op in first if ctx.model.op_cost(op, strategy[op]).offload]
    for op in (offloaded[-1], offloaded[len(offloaded) // 2]):      # made again after the next stage's
        config = Configuration((), strategy[op].devices.start)
        delta = simulation.change(op, config)
        strategy = Strategy(strategy.with_ops({op: config}).ops, pipeline=strategy.pipeline)
        full = PipelineSimulation(ctx.model, strategy).run()
        assert delta.iteration_time_s == pytest.approx(full.iteration_time_s, rel=1e-9)
        assert delta.peak_memory_per_device == pytest.approx(full.peak_memory_per_device, rel=1e-9)


def test_a_change_may_not_leave_its_stage():
    ctx, strategy, simulation = simulated(2, 2)
    op = stage_ops(ctx.graph, strategy.pipeline)[0][4]
    with pytest.raises(ValueError, match="stage's devices"):
        simulation.change(op, Configuration((), DEVICES - 1))


def test_memory_grows_with_the_micro_batches_a_stage_holds():
    results = {}
    for schedule in ("gpipe", "1f1b"):
        ctx, strategy = pipeline_strategy(4, 2, schedule)
        simulation = PipelineSimulation(ctx.model, strategy)
        results[schedule] = simulation.run()
        one = simulation.inner.result().peak_memory_per_device
        activations = ctx.model.memory_parts(strategy)["activations"]
        held = simulation.schedule_run.in_flight
        assert held == ((4, 4) if schedule == "gpipe" else (2, 1))
        for s, block in enumerate(strategy.pipeline.stage_devices(DEVICES)):
            for d in block:
                assert results[schedule].peak_memory_per_device[d] == pytest.approx(
                    one[d] + (held[s] - 1) * activations[d], rel=1e-12)
    assert results["1f1b"].peak_memory_bytes < results["gpipe"].peak_memory_bytes


def test_more_micro_batches_shrink_the_bubble():
    times = {}
    for m in (2, 8):
        ctx, strategy, simulation = simulated(m, 2)
        times[m] = max(simulation.schedule_run.idle_fraction(s) for s in range(2))
    assert times[8] < times[2]


def test_open_simulation_picks_the_pipeline_only_for_stages():
    ctx, strategy = pipeline_strategy(2, 2)
    assert isinstance(open_simulation(ctx.model, strategy), PipelineSimulation)
    assert not isinstance(open_simulation(ctx.model, dict(strategy.ops)), PipelineSimulation)


def test_each_step_syncs_and_updates_once_whatever_the_micro_batches():
    tails = {}
    for m in (2, 4):
        ctx, strategy, simulation = simulated(m, 2)
        tails[m] = [t.tail_s for t in simulation.stage_times()]
        expected = []
        for block in strategy.pipeline.stage_devices(DEVICES):
            ops = [op for op, c in strategy.items() if c.devices.start in block]
            costs = [ctx.model.op_cost(op, strategy[op]) for op in ops]
            sync = sum(step.time_s for c in costs for step in c.sync)
            update = max(sum(c.update_time_s for op, c in zip(ops, costs) if d in strategy[op].devices) for d in block)
            expected.append(sync + update)
        assert tails[m] == pytest.approx(expected, rel=1e-12)      # once a step: no factor m
        run = simulation.schedule_run
        for s, tail in enumerate(tails[m]):
            last = max(a.end_s for a in run.actions if a.stage == s)
            assert run.stage_end_s[s] == pytest.approx(last + tail, rel=1e-12)


def test_the_public_simulate_runs_the_schedule_of_a_strategy_with_stages():
    ctx, strategy = pipeline_strategy(4, 2)
    result = sg.simulate(ctx.graph, CLUSTER, strategy, devices=DEVICES)
    expected = PipelineSimulation(ctx.model, strategy).run()
    assert result.iteration_time_s == pytest.approx(expected.iteration_time_s, rel=1e-12)
    assert {t.label for t in result.trace_tasks} >= {"F0", "F3", "B0", "B3"}


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("tensor", [False, True])
def test_a_representative_rank_per_class_gives_the_same_pipeline(stages, tensor):
    """The micro-batch's timeline with one rank per class of devices alike (sim.ranks): the
    schedule, its result and stage times as over every device."""
    ctx, strategy = pipeline_strategy(2, stages, "1f1b", tensor)
    full, rep = PipelineSimulation(ctx.model, strategy), PipelineSimulation(ctx.model, strategy, representative=True)
    a, b = full.run(), rep.run()
    assert replace(b, simulated_tasks=None) == replace(a, simulated_tasks=None)
    assert rep.stage_times() == full.stage_times()
    if rep.inner.representative:
        assert b.simulated_tasks < a.simulated_tasks
