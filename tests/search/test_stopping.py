"""Ctrl-C during a search (search.stopping), simulated by a reporter whose advance() call of a chosen
number raises KeyboardInterrupt: each search returns the best it had found, never nothing and never
worse, every plan marked as kept when the search stopped; with nothing found yet, data parallel;
and no further search runs after it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from stratagem import forked
from stratagem.frontend import zoo
from stratagem.search import modes
from stratagem.search.context import context, make_plan
from stratagem.search.evaluators import EVALUATORS
from stratagem.search.ft_search import PLANNER_FT, FTSearchOptions, frontier
from stratagem.search.mcmc import MCMCOptions, _beta, _Limits, build_space, mcmc, run_chain
from stratagem.search.pipeline import PipelineOptions, pipeline_plans
from stratagem.search.stopping import interruption, stopped
from stratagem.search.strategies import data_parallel_strategy
from tests.search.graphs import chain, fanout
from tests.search.recorder import Phase, Recorder, stopped_run


def watched(graph, devices: int, recorder: Recorder | None = None, **given):
    return replace(context(graph, "v100-2x8", devices, **given), progress=recorder or Recorder())


@pytest.fixture(scope="module")
def fanout_run():
    """fanout on 4 devices, FT run whole: (its frontier, the reporter that saw it)."""
    ctx = watched(fanout(), 4)
    return frontier(ctx), ctx.progress


def times(plans) -> list[tuple[float, float]]:
    return sorted((p.iteration_time_s, p.peak_memory_bytes) for p in plans)


def test_ft_stopped_in_its_first_pass_keeps_data_parallel_it_priced_first(fanout_run):
    _, whole = fanout_run
    ctx = watched(fanout(), 4, Recorder(stop_after=whole.calls_before("FT pass 1") + 1))
    front = stopped_run(frontier, ctx)
    assert interruption(front.details).phase == "FT's first pass (eliminations)"
    assert [p.algorithm for p in front] == ["data-parallel"] and all(stopped(p) for p in front)
    baseline = make_plan(ctx, data_parallel_strategy(ctx), "data-parallel")
    assert front.min_time.iteration_time_s == pytest.approx(baseline.iteration_time_s, rel=1e-12)
    assert [p.name for p in ctx.progress.phases()][-1] == "FT pass 1: eliminations"      # nothing ran after


def test_ft_stopped_in_a_later_pass_keeps_the_frontier_of_the_passes_done(fanout_run):
    _, whole = fanout_run
    ctx = watched(fanout(), 4, Recorder(stop_after=whole.calls_before("FT pass 2") + 1))
    front = stopped_run(frontier, ctx)
    first_pass = frontier(watched(fanout(), 4), FTSearchOptions(ft=replace(PLANNER_FT, peak_passes=1)))
    assert interruption(front.details).phase == "FT pass 2 (eliminations)"
    assert times(front) == times(first_pass) and all(stopped(p) for p in [*front, *front.alternatives])
    assert ctx.progress.phases()[-1].name == "simulating frontier points"


def test_ft_stopped_while_simulating_keeps_the_points_simulated_and_mini_time_the_best_of_them(fanout_run,
                                                                                             monkeypatch):
    complete, whole = fanout_run
    monkeypatch.setenv(forked.CHILD_ENV, "1")    # one process: which points a stop finds simulated is
    #                                              then the same in both runs (with two, it is timing)
    ctx = watched(fanout(), 4, Recorder(stop_after=whole.calls_before("simulating") + 2))
    front = stopped_run(frontier, ctx)
    assert len(front) == 2 < len(complete)
    assert set(times(front)) <= set(times(complete))
    ctx = watched(fanout(), 4, Recorder(stop_after=whole.calls_before("simulating") + 2))
    front = stopped_run(frontier, ctx, least_time_under=ctx.memory_cap_bytes)   # as least_time_ft asks
    assert 1 <= len(front) <= 2                                      # (a point ruled out is not simulated)
    ctx = watched(fanout(), 4, Recorder(stop_after=whole.calls_before("simulating") + 2))
    plan = stopped_run(modes.least_time_ft, ctx)
    seen = [*front, *front.alternatives]                             # the points simulated, data parallel
    assert stopped(plan) and plan.iteration_time_s == min(p.iteration_time_s for p in seen)


def test_a_chain_stopped_returns_the_best_strategy_it_had_seen():
    ctx = context(chain(4), "v100-2x8", 4)
    space = build_space(ctx)
    evaluator = EVALUATORS["delta"](ctx.model, space, space.project(data_parallel_strategy(ctx)))
    beta, _ = _beta(ctx, space, MCMCOptions())
    seen: dict = {}
    result = stopped_run(run_chain, "data-parallel", evaluator, ctx.memory_cap_bytes, beta, _Limits(None, 1000),
                         np.random.default_rng(0), seen, Recorder(stop_after=40))
    assert result.interrupted and result.proposals == 40
    fitting = [time_s for time_s, peak in seen.values() if peak <= ctx.memory_cap_bytes]
    assert result.best.time_s == min(fitting) and seen[result.best_assignment][0] == result.best.time_s


def test_mcmc_stopped_in_a_chain_plans_its_best_strategy_so_far():
    whole = watched(chain(4), 4)
    options = MCMCOptions(budget_s=None, max_proposals=40, seed=0)
    mcmc(whole, options)
    first = whole.progress.phases()[0]
    assert first.name.startswith("MCMC chain 1/3")
    ctx = watched(chain(4), 4, Recorder(stop_after=first.calls + 5))
    plan = stopped_run(mcmc, ctx, options)
    chains = plan.details["chains"]
    assert interruption(plan.details).phase == "MCMC's chain 2" and len(chains) == 2
    assert sum(c["proposals"] for c in chains) == first.calls + 5
    best_seen = min(c["best_time_s"] for c in chains)
    assert plan.algorithm == "mcmc" and plan.iteration_time_s == pytest.approx(best_seen, rel=1e-9)
    assert plan.iteration_time_s <= chains[0]["start_time_s"] * (1 + 1e-12)         # never worse than its start


def test_profiling_stopped_keeps_the_device_counts_planned_every_plan_marked():
    one = watched(chain(3), 1)
    modes.plan_at(one)
    recorder = Recorder(stop_after=one.progress.calls + 3)            # in the cost tables at 2 devices
    table = stopped_run(modes.by_device_count, (watched(chain(3), n, recorder) for n in (1, 2, 4)))
    assert sorted(table) == [1, 2] and all(stopped(plan) for plan, _ in table.values())
    assert table[2][0].algorithm == "data-parallel"
    assert interruption(table[1][0].details) == interruption(table[2][0].details)


def test_stopped_with_nothing_fitting_runs_no_search_for_less_memory(fanout_run):
    _, whole = fanout_run
    ctx = watched(fanout(), 4, Recorder(stop_after=whole.calls_before("FT pass 1") + 1), memory_cap_bytes=1e3)
    plan, fits = stopped_run(modes.plan_at, ctx)
    assert not fits and stopped(plan) and plan.algorithm == "data-parallel"
    assert sum(p.name == "cost tables: ops" for p in ctx.progress.phases()) == 1   # no second FT, no FSDP search


@pytest.fixture(scope="module")
def gpt_tiny():
    return zoo.build("gpt-tiny")


def test_the_pipeline_search_counts_stage_and_micro_batch_pairs_and_keeps_those_priced(gpt_tiny):
    ctx = replace(context(gpt_tiny, "a100-2x8", 16), progress=Recorder(stop_after=2))
    plans = stopped_run(pipeline_plans, ctx, PipelineOptions(stages=2, recompute="no"))
    assert ctx.progress.phases() == [Phase("pipeline: stage and micro-batch counts", 3, 2, 2)]
    assert sorted(p.strategy.pipeline.micro_batches for p in plans) == [2, 4]
    assert all(interruption(p.details).phase == "the pipeline search" for p in plans)
