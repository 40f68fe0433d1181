"""The pipeline search (search.pipeline): its stage cuts are the linear-partition optimum (checked
against every cut), never split a weight's readers, and every plan it returns is a valid pipeline,
simulated; the modes weigh such plans across nodes."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest

from stratagem.errors import ConfigError, StratagemError
from stratagem.frontend import zoo
from stratagem.plan import Plan
from stratagem.report.stages import stage_lines
from stratagem.search import registry
from stratagem.search.context import context, make_plan, offloading, recomputing
from stratagem.search.modes import staged_plans
from stratagem.search.pipeline import PipelineOptions, _partition, pipeline_plans, save_stages_over
from stratagem.cost.recompute import blocks
from stratagem.space import check_pipeline, stage_ops


def brute_force(items, parts, allowed):
    best = None
    for cuts in itertools.combinations(sorted(allowed), parts - 1):
        bounds = (0, *cuts, len(items))
        cost = max(sum(items[a:b]) for a, b in zip(bounds, bounds[1:]))
        best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_cuts_are_the_least_largest_run_over_every_allowed_cut(seed):
    rng = random.Random(seed)
    n, parts = rng.randint(2, 9), rng.randint(2, 4)
    items = [rng.uniform(0.1, 3.0) for _ in range(n)]
    allowed = {i for i in range(1, n) if rng.random() < 0.7}
    chosen = _partition(items, parts, allowed)
    expected = brute_force(items, parts, allowed)
    if expected is None:
        assert chosen is None
        return
    assert set(chosen) <= allowed and len(chosen) == parts - 1
    bounds = (0, *chosen, n)
    assert max(sum(items[a:b]) for a, b in zip(bounds, bounds[1:])) == pytest.approx(expected, rel=1e-12)


@pytest.fixture(scope="module")
def gpt_plans():
    ctx = context(zoo.build("gpt-tiny"), "a100-2x8", 16)
    return ctx, pipeline_plans(ctx, PipelineOptions(recompute="no"))


def test_every_plan_is_a_valid_simulated_pipeline(gpt_plans):
    ctx, plans = gpt_plans
    assert {(p.strategy.pipeline.num_stages, p.strategy.pipeline.micro_batches) for p in plans} == {
        (2, 2), (2, 4), (2, 8), (4, 4), (4, 8)}
    for plan in plans:
        check_pipeline(plan.graph, plan.strategy, plan.strategy.pipeline, 16)
        assert f"{plan.details['stage_plan']} in every stage" in "\n".join(stage_lines(plan))
        batch = plan.graph.tensors["tokens"].shape[0]
        assert batch * plan.strategy.pipeline.micro_batches == ctx.graph.tensors["tokens"].shape[0]
        assert plan.iteration_time_s > 0 and plan.peak_memory_bytes > 0
        assert Plan.from_dict(plan.to_dict()).strategy == plan.strategy


def test_the_registered_search_returns_the_fastest_that_fits(gpt_plans):
    ctx, plans = gpt_plans
    chosen = registry.run(ctx, "pipeline", {"recompute": "no"})
    assert chosen.iteration_time_s == pytest.approx(min(p.iteration_time_s for p in plans), rel=1e-12)


def test_a_weight_shared_by_the_first_and_last_block_leaves_no_cut():
    ctx = context(zoo.build("transformer-tiny"), "cpu-1x2", 2)
    with pytest.raises(StratagemError, match="no pipeline plan"):
        pipeline_plans(ctx)


@pytest.mark.parametrize("options,match", [
    (dict(stages=3), "stage count is not valid"),
    (dict(micro_batches=3), "does not divide the batch"),
    (dict(schedule="zero-bubble"), "unknown pipeline schedule"),
    (dict(inner="ddp"), "unknown stage plan"),
])
def test_bad_options_are_refused(options, match):
    ctx = context(zoo.build("gpt-tiny-tiny"), "a100-1x8", 8)
    with pytest.raises(ConfigError, match=match):
        pipeline_plans(ctx, PipelineOptions(**options))


def test_the_modes_weigh_stages_only_across_nodes_unless_asked():
    one_node = context(zoo.build("gpt-tiny-tiny"), "a100-1x8", 8)
    assert staged_plans(one_node, "auto") == []
    assert staged_plans(one_node, "yes")
    assert staged_plans(context(zoo.build("gpt-tiny-tiny"), "a100-2x8", 16), "auto")
    with pytest.raises(ConfigError, match="pipeline choice"):
        staged_plans(one_node, "maybe")


def test_a_frontier_with_stages_keeps_exactly_the_undominated_points():
    from stratagem.plan import Frontier
    from stratagem.search.modes import _dominates, frontier_with_stages
    ctx = context(zoo.build("gpt-tiny-tiny"), "a100-2x8", 16)
    front = Frontier([registry.run(ctx, name, {}) for name in ("data-parallel", "fsdp", "fsdp-tp")])
    merged = frontier_with_stages(ctx, front, "yes")
    staged = staged_plans(ctx, "yes")
    everything = [*front, *staged]
    assert any(p.strategy.pipeline is not None for p in merged)
    assert all(not any(_dominates(q, p) for q in everything) for p in merged)
    assert all(any(_dominates(q, p) for q in everything) for p in everything
               if not any(p.strategy == k.strategy and p.graph is k.graph for k in merged))
    assert merged.min_time.iteration_time_s == min(p.iteration_time_s for p in everything)
    assert frontier_with_stages(ctx, front, "no") is front


def test_a_frontier_file_keeps_each_plans_own_graph(tmp_path):
    from stratagem.plan import Frontier
    ctx = context(zoo.build("gpt-tiny-tiny"), "a100-2x8", 16)
    plans = [registry.run(ctx, "fsdp-tp", {}), *staged_plans(ctx, "yes")]
    Frontier(plans).save(tmp_path / "f.json")
    loaded = Frontier.load(tmp_path / "f.json")
    for before, after in zip(Frontier(plans), loaded):
        assert after.strategy == before.strategy
        assert after.graph.tensors["tokens"].shape == before.graph.tensors["tokens"].shape
    assert {p.graph.tensors["tokens"].shape[0] for p in loaded} == {2, 1}


def test_a_model_micro_batches_would_train_differently_gets_no_stages():
    ctx = context(zoo.build("resnet-101-tiny"), "a100-2x8", 16)
    with pytest.raises(ConfigError, match="mixes the samples of a batch"):
        pipeline_plans(ctx)
    assert staged_plans(ctx, "auto") == []


@pytest.mark.parametrize("seed", range(40))
def test_cuts_under_a_memory_bound_are_the_least_largest_run_that_fits(seed):
    rng = random.Random(100 + seed)
    n, parts = rng.randint(3, 9), rng.randint(2, 4)
    items = [rng.uniform(0.1, 3.0) for _ in range(n)]
    memory = [rng.uniform(0.5, 2.0) for _ in range(n)]
    cap = rng.uniform(2.0, 6.0)

    def fits(i, j, s):
        return sum(memory[i:j]) * (parts - s) <= cap          # stage s holds parts - s micro-batches

    allowed = set(range(1, n))
    best = None
    for cuts in itertools.combinations(range(1, n), parts - 1):
        bounds = (0, *cuts, n)
        if all(fits(a, b, s) for s, (a, b) in enumerate(zip(bounds, bounds[1:]))):
            cost = max(sum(items[a:b]) for a, b in zip(bounds, bounds[1:]))
            best = cost if best is None else min(best, cost)
    chosen = _partition(items, parts, allowed, fits)
    if best is None:
        assert chosen is None
        return
    bounds = (0, *chosen, n)
    assert all(fits(a, b, s) for s, (a, b) in enumerate(zip(bounds, bounds[1:])))
    assert max(sum(items[a:b]) for a, b in zip(bounds, bounds[1:])) == pytest.approx(best, rel=1e-12)


def brute_force_runs(n, parts, allowed, run_cost):
    """The least largest run cost over every allowed cut, each run taking its best choice."""
    best = None
    for cuts in itertools.combinations(sorted(allowed), parts - 1):
        bounds = (0, *cuts, n)
        cost = max(run_cost(a, b, k)[0] for k, (a, b) in enumerate(zip(bounds, bounds[1:])))
        if cost != float("inf"):
            best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_each_stage_takes_its_own_choice_and_the_cuts_are_the_least_largest_run(seed):
    """Stages choosing among several plans (time and memory per item under each), the stage of
    more micro-batches in flight held to leaner ones: the DP's cuts and choices give the least
    largest stage time over every cut and every choice per stage, and each chosen run fits."""
    from stratagem.search.pipeline import StageItems, _partition_runs, _stage_cost
    rng = random.Random(300 + seed)
    n, parts, choices = rng.randint(3, 8), rng.randint(2, 4), rng.randint(1, 4)
    items = [StageItems(tuple(rng.uniform(0.1, 3.0) for _ in range(n)), tuple(rng.uniform(0.0, 1.0) for _ in range(n)),
                        tuple(rng.uniform(0.1, 1.5) for _ in range(n))) for _ in range(choices)]
    cap = rng.uniform(2.0, 8.0)
    allowed = {i for i in range(1, n) if rng.random() < 0.8}
    run_cost = _stage_cost(items, lambda s: parts - s, cap, memory_bound=True)

    def every_choice(i, j, k):
        fitting = [(sum(it.time_s[i:j]), q) for q, it in enumerate(items)
                   if sum(it.held_bytes[i:j]) + (parts - k) * sum(it.kept_bytes[i:j]) <= cap]
        return min(fitting, default=(float("inf"), -1))
    expected = brute_force_runs(n, parts, allowed, every_choice)
    found = _partition_runs(n, parts, allowed, run_cost)
    if expected is None:
        assert found is None
        return
    cuts, chosen = found
    assert set(cuts) <= allowed and len(cuts) == parts - 1 and len(chosen) == parts
    bounds = (0, *cuts, n)
    for k, ((a, b), q) in enumerate(zip(zip(bounds, bounds[1:]), chosen)):
        it = items[q]
        assert sum(it.held_bytes[a:b]) + (parts - k) * sum(it.kept_bytes[a:b]) <= cap
    largest = max(sum(items[q].time_s[a:b]) for (a, b), q in zip(zip(bounds, bounds[1:]), chosen))
    assert largest == pytest.approx(expected, rel=1e-12)


def test_each_stage_takes_its_own_point_of_fts_frontier():
    """inner=ft: every stage's ops take the configurations of one point of FT's frontier of the
    micro-batch on a stage's devices (or an alternative it priced), the points and cuts being the
    stage DP's optimum over every cut and every point per stage (by the items' costs). Under a cap
    that the last stage's fastest point just fits with its one micro-batch in flight, the first
    stage, holding two under 1F1B, takes another."""
    from stratagem.search.pipeline import _allowed_cuts, _block_starts, inner_strategies, stage_items
    whole = zoo.build("gpt-tiny-tiny")
    micro_graph = zoo.build("gpt-tiny-tiny", batch_size=next(iter(whole.batch_sizes)) // 2)
    stage = context(micro_graph, "a100-2x8", 8)
    choices = inner_strategies(stage, "ft")
    starts = _block_starts(micro_graph)
    items = [stage_items(stage, choice, starts) for choice in choices]
    assert len(choices) > 2 and len(starts) - 1 == 2          # two blocks: one a stage
    last = min(range(len(items)), key=lambda q: (items[q].time_s[1], q))
    cap = items[last].held_bytes[1] + items[last].kept_bytes[1]
    assert items[last].held_bytes[0] + 2 * items[last].kept_bytes[0] > cap      # too much for stage 0

    ctx = context(whole, "a100-2x8", 16, memory_cap_bytes=cap)
    (plan,) = pipeline_plans(ctx, PipelineOptions(stages=2, micro_batches=2, inner="ft", recompute="no"))
    check_pipeline(plan.graph, plan.strategy, plan.strategy.pipeline, 16)
    assert plan.graph == micro_graph
    assert plan.details["stage_plan"] == "ft" and plan.details["stage_points"]["of"] == len(choices)
    chosen = plan.details["stage_points"]["chosen"]
    assert chosen[1] == last and chosen[0] != last
    for s, ops in enumerate(stage_ops(plan.graph, plan.strategy.pipeline)):
        assert all(plan.strategy[op].levels == choices[chosen[s]][op].levels for op in ops)
    assert f"ft: points {chosen[0]}, {chosen[1]} of {len(choices)}" in "\n".join(stage_lines(plan))

    def every_point(i, j, k):
        in_flight = 2 - k                                       # 1F1B, 2 micro-batches, 2 stages
        fitting = [(sum(it.time_s[i:j]), q) for q, it in enumerate(items)
                   if sum(it.held_bytes[i:j]) + in_flight * sum(it.kept_bytes[i:j]) <= cap]
        return min(fitting, default=(float("inf"), -1))
    expected = brute_force_runs(len(starts) - 1, 2, _allowed_cuts(micro_graph, starts), every_point)
    largest = max(sum(items[q].time_s[a:b]) for (a, b), q in zip(((0, 1), (1, 2)), chosen))
    assert largest == pytest.approx(expected, rel=1e-12)


def test_only_the_stages_over_the_cap_recompute_first():
    ctx = context(zoo.build("gpt-tiny"), "a100-2x8", 16, memory_cap_bytes="36MiB")
    plain, partly, _, fully = pipeline_plans(ctx, PipelineOptions(stages=4, micro_batches=8))
    stage = {op: s for s, ops in enumerate(stage_ops(plain.graph, plain.strategy.pipeline)) for op in ops}
    peaks = plain.details["peak_memory_per_device"]
    over = {stage[op] for op in plain.strategy for d in plain.strategy[op].devices if peaks[d] > ctx.memory_cap_bytes}
    found = {b.name: b for b in blocks(plain.graph)}
    assert not plain.recompute and len(fully.recompute) == len(found)
    assert partly.recompute and {stage[found[name].ops[0]] for name in partly.recompute} == over
    assert partly.strategy == plain.strategy
    assert plain.iteration_time_s < partly.iteration_time_s < fully.iteration_time_s
    assert partly.peak_memory_bytes < plain.peak_memory_bytes


def test_stages_over_the_cap_may_offload_their_blocks_instead():
    """Where the cluster has host memory, the blocks of the stages over the cap are offloaded as an
    alternative to recomputing them: the same stage plan, device memory lower, and the host holding
    each offloaded op's activations once per micro-batch its stage holds at once."""
    ctx = context(zoo.build("gpt-tiny"), "a100-2x8", 16, memory_cap_bytes="36MiB")
    plain, recomputed, offloaded, fully = pipeline_plans(ctx, PipelineOptions(stages=4, micro_batches=8))
    assert offloaded.offload_activations and not offloaded.recompute and "+ offload" in offloaded.details["label"]
    assert offloaded.strategy == plain.strategy and offloaded.peak_memory_bytes < plain.peak_memory_bytes
    stage = {op: s for s, ops in enumerate(stage_ops(plain.graph, plain.strategy.pipeline)) for op in ops}
    found = {b.name: b for b in blocks(plain.graph)}
    peaks = plain.details["peak_memory_per_device"]
    over = {stage[op] for op in plain.strategy for d in plain.strategy[op].devices if peaks[d] > ctx.memory_cap_bytes}
    assert {stage[found[name].ops[0]] for name in offloaded.offload_activations} <= over

    model = offloading(context(plain.graph, "a100-2x8", 16), offloaded.offload_activations).model
    held = offloaded.details["pipeline"]["in_flight"]
    per_device = [0.0] * 16
    for name in offloaded.offload_activations:
        for op in found[name].ops:
            config = offloaded.strategy[op]
            for d in config.devices:
                per_device[d] += held[stage[op]] * model.op_cost(op, config).memory.offloaded_bytes
    assert max(held) > 1 and offloaded.details["host_memory"]["per_node_bytes"] == pytest.approx(
        max(sum(per_device[:8]), sum(per_device[8:])), rel=1e-12)
    assert [p.details["label"] for p in pipeline_plans(ctx, PipelineOptions(stages=4, micro_batches=8,
                                                                           offload="no"))] == \
        [p.details["label"] for p in (plain, recomputed, fully)]


def test_micro_batch_graphs_derived_from_one_capture_plan_as_their_captures():
    """The zoo's micro-batch graphs (frontend.rebatch: derived from the capture at the batch where
    exact) give the plans that capturing at each micro-batch size gives: same graphs, strategies
    and figures."""
    ctx = context(zoo.build("gpt-tiny", batch_size=16), "a100-2x8", 16)
    options = PipelineOptions(recompute="no", inner="data-parallel")
    derived = pipeline_plans(ctx, options)
    captured = pipeline_plans(ctx, options, graph_at=lambda b: zoo.Zoo().build("gpt-tiny", batch_size=b))
    assert len(derived) == len(captured) > 0
    for ours, theirs in zip(derived, captured):
        assert ours.graph == theirs.graph and ours.strategy == theirs.strategy
        assert (ours.iteration_time_s, ours.peak_memory_bytes, ours.additive_time_s, ours.additive_memory_bytes) == \
            (theirs.iteration_time_s, theirs.peak_memory_bytes, theirs.additive_time_s, theirs.additive_memory_bytes)
        assert ours.details == theirs.details


def _plan_summary(plan) -> tuple:
    return (plan.algorithm, plan.iteration_time_s, plan.peak_memory_bytes, dict(plan.strategy),
            plan.strategy.pipeline, plan.graph.tensors["tokens"].shape)


def test_the_pipeline_search_in_a_worker_while_ft_runs_gives_the_frontier_found_in_one_process():
    from stratagem import forked
    from stratagem.search.ft_search import frontier
    from stratagem.search.modes import frontier_and_stages, frontier_with_stages
    from tests.search.recorder import Recorder
    if forked.worker_count(2) < 2:
        pytest.skip("one CPU: no worker")
    ctx = replace(context(zoo.build("gpt-tiny-tiny"), "a100-2x8", 16), progress=Recorder())
    shared = frontier_and_stages(ctx, None, "yes")
    phases = [p for p in ctx.progress.phases() if p.name.startswith("pipeline")]
    assert len(phases) == 1 and phases[0].total >= 1 and phases[0].units == phases[0].total   # replayed whole
    serial = frontier_with_stages(ctx, frontier(ctx), "yes")
    assert [_plan_summary(p) for p in shared] == [_plan_summary(p) for p in serial]
    assert shared.details["stages"] == serial.details["stages"] and shared.details["stages"]["weighed"] > 0


def test_a_failed_pipeline_worker_is_made_good_here_with_a_warning(monkeypatch):
    import os

    from stratagem import forked
    from stratagem.search import modes
    if forked.worker_count(2) < 2:
        pytest.skip("one CPU: no worker")
    parent, searched = os.getpid(), modes.pipeline_plans

    def failing_in_the_worker(ctx):
        if os.getpid() != parent:
            raise RuntimeError("the worker's own trouble")
        return searched(ctx)
    monkeypatch.setattr(modes, "pipeline_plans", failing_in_the_worker)
    ctx = context(zoo.build("gpt-tiny-tiny"), "a100-2x8", 16)
    with pytest.warns(RuntimeWarning, match="the worker's own trouble"):
        front = modes.frontier_and_stages(ctx, None, "yes")
    assert front.details["stages"]["weighed"] == len(searched(ctx)) > 0


@pytest.mark.parametrize("saving", ["recompute", "offload"])
def test_each_stage_over_the_cap_saves_the_fewest_of_its_blocks_that_fit(saving):
    """Two stages of two blocks each: at caps between the peaks, each stage over the cap recomputes
    (or offloads) the fewest of its leading blocks with which it fits, as trying every count per
    stage finds."""
    ctx = context(zoo.build("gpt-tiny"), "a100-2x8", 16)
    (plain,) = pipeline_plans(ctx, PipelineOptions(stages=2, micro_batches=4, inner="data-parallel", recompute="no"))
    micro = context(plain.graph, "a100-2x8", 16)
    devices = plain.strategy.pipeline.stage_devices(16)
    stage = {op: s for s, ops in enumerate(stage_ops(plain.graph, plain.strategy.pipeline)) for op in ops}
    by_stage = [[b.name for b in blocks(plain.graph) if stage[b.ops[0]] == s] for s in range(2)]
    assert [len(names) for names in by_stage] == [2, 2]

    def stage_peaks(counts):
        names = tuple(n for s, k in enumerate(counts) for n in by_stage[s][:k])
        made = make_plan((recomputing if saving == "recompute" else offloading)(micro, names), plain.strategy,
                         "pipeline")
        return [max(made.details["peak_memory_per_device"][d] for d in devices[s]) for s in range(2)]
    peaks = {counts: stage_peaks(counts) for counts in itertools.product(range(3), repeat=2)}
    levels = sorted({p for ps in peaks.values() for p in ps})
    for cap in [(a + b) / 2 for a, b in zip(levels, levels[1:])]:
        fitting = [c for c, ps in peaks.items() if max(ps) <= cap]
        capped = replace(micro, memory_cap_bytes=cap)
        found = save_stages_over(capped, plain, saving)
        if max(peaks[0, 0]) <= cap:
            assert found is None
            continue
        if not fitting:
            assert found.peak_memory_bytes > cap
            continue
        least = min(fitting, key=sum)
        assert all(sum(c) > sum(least) or c == least for c in fitting)      # one least vector
        saved = found.recompute if saving == "recompute" else found.offload_activations
        assert saved == tuple(n for s, k in enumerate(least) for n in by_stage[s][:k])
        assert found.peak_memory_bytes <= cap and found.strategy == plain.strategy
