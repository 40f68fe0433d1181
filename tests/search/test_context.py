"""search.context: plans priced in forked workers (`plans_shared`) are the plans make_plan gives
here, in order, each with the context's graph; FT's frontier is the same whether its points are
simulated in one process or shared among several."""

from __future__ import annotations

import pytest

from stratagem import forked
from stratagem.search.context import context, make_plan, plans_shared
from stratagem.search.ft_search import frontier
from stratagem.search.strategies import data_parallel_strategy, tensor_parallel_strategy
from tests.search.graphs import fanout


def summary(plan) -> tuple:
    return (plan.algorithm, plan.iteration_time_s, plan.peak_memory_bytes, plan.additive_time_s,
            plan.additive_memory_bytes, dict(plan.strategy), dict(plan.strategy.reuse), plan.details)


def test_plans_shared_are_the_plans_made_here_each_with_the_graph():
    ctx = context(fanout(), "v100-2x8", 4)
    strategies = [data_parallel_strategy(ctx), tensor_parallel_strategy(ctx, 2)] * 2
    arrived = {}
    shared = plans_shared(ctx, lambda s: make_plan(ctx, s, "test"), strategies,
                          lambda i, plan: arrived.__setitem__(i, plan), workers=2)
    here = [make_plan(ctx, s, "test") for s in strategies]
    assert [summary(p) for p in shared] == [summary(p) for p in here]
    assert all(p.graph is ctx.graph for p in [*shared, *arrived.values()]) and sorted(arrived) == [0, 1, 2, 3]


def test_ft_frontier_is_the_same_simulated_in_one_process_or_several(monkeypatch):
    if forked.worker_count(2) < 2:
        pytest.skip("one CPU: no worker to share with")
    shared = frontier(context(fanout(), "v100-2x8", 4))
    monkeypatch.setenv(forked.CHILD_ENV, "1")               # as inside a worker: serial
    serial = frontier(context(fanout(), "v100-2x8", 4))
    assert [summary(p) for p in shared] == [summary(p) for p in serial] and len(serial) > 2
