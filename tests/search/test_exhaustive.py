"""Exhaustive branch and bound (FlexFlow §8.3) against plain enumeration; its bounds are bounds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from stratagem.search.exhaustive import BranchAndBound, ExhaustiveTooLarge, exhaustive_search
from stratagem.search.mcmc import build_space
from stratagem.search.context import context
from stratagem.search.planner import search
from stratagem.sim.builder import Simulation
from tests.search.graphs import chain, unrolled
from tests.search.oracle import best_time, enumerate_times


@pytest.fixture(scope="module")
def small():
    ctx = context(chain(2), "p100-4x4", devices=4)
    space = build_space(ctx)
    return ctx, space, enumerate_times(ctx.model, space)


def test_equals_enumeration_over_the_whole_soap_space(small):
    ctx, space, times = small
    result = exhaustive_search(ctx, space, incumbent_proposals=0)
    assert result.time_s == pytest.approx(best_time(times), rel=1e-12)
    assert times[result.assignment][0] == pytest.approx(result.time_s, rel=1e-12)
    assert result.leaves < len(times) / 4                      # the bounds prune most of the space


def test_excludes_strategies_over_the_memory_cap(small):
    ctx, space, times = small
    fastest = min(times.values())
    cap = fastest[1] * 0.999
    result = exhaustive_search(replace(ctx, memory_cap_bytes=cap), space, incumbent_proposals=0)
    assert result.time_s == pytest.approx(best_time(times, cap), rel=1e-12) and result.time_s > fastest[0]
    assert result.peak_memory_bytes <= cap


def test_equals_enumeration_over_coarsened_groups():
    ctx = context(unrolled(2), "p100-4x4", devices=4)
    space = build_space(ctx, coarsen=True)
    assert len(space.variables) == 2                           # the timesteps share one variable
    times = enumerate_times(ctx.model, space)
    assert exhaustive_search(ctx, space).time_s == pytest.approx(best_time(times), rel=1e-12)


def test_every_bound_is_below_every_completion(small):
    """Walk random paths; each child's bound (cheap, then full) must not exceed the simulated
    time of any of its completions."""
    ctx, space, times = small
    search_ = BranchAndBound(ctx, space, float("inf"), (0, 0), float("inf"))
    first, second = search_.order
    rng = np.random.default_rng(0)
    for _ in range(40):
        search_.reset()
        busy, resident = search_.start()
        kids = search_.children(0, busy, resident, float("inf"))
        node = kids[int(rng.integers(len(kids)))]
        search_.enter(0, node)
        assert search_.admit(node, float("inf"))
        completions = [t for a, (t, _) in times.items() if a[first] == node.choice]
        assert node.lb <= min(completions) * (1 + 1e-12)
        for leaf in search_.children(1, node.busy, node.resident, float("inf")):
            search_.enter(1, leaf)
            search_.admit(leaf, float("inf"))
            search_.leave(1, leaf)
            assignment = [0, 0]
            assignment[first], assignment[second] = node.choice, leaf.choice
            assert leaf.lb <= times[tuple(assignment)][0] * (1 + 1e-12)
        search_.leave(0, node)


def test_refuses_a_hopeless_space_at_once_with_an_estimate():
    ctx = context(chain(12), "p100-4x4", devices=4)
    with pytest.raises(ExhaustiveTooLarge, match=r"(about|at least) .* s .*Knuth's estimate") as error:
        exhaustive_search(ctx, build_space(ctx), max_time_s=1.0, probes=3, incumbent_proposals=20)
    assert "algorithm='mcmc'" in str(error.value)


def test_gives_up_at_max_time_with_the_share_done(small):
    ctx, space, _ = small
    with pytest.raises(ExhaustiveTooLarge, match=r"of the pruned tree in 1e-06 s, so about"):
        exhaustive_search(ctx, space, max_time_s=1e-6, probes=0, incumbent_proposals=0)


def test_search_dispatches_exhaustive(small):
    ctx, space, times = small
    plan = search(chain(2), "p100-4x4", algorithm="exhaustive", devices=4)
    assert plan.algorithm == "exhaustive"
    assert plan.iteration_time_s == pytest.approx(best_time(times), rel=1e-12)
    assert Simulation(ctx.model, plan.strategy).run().iteration_time_s == pytest.approx(plan.iteration_time_s)
