"""The certified lower bound (search.ft_bound) against brute force, and FT's gap to it."""

import warnings
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import stratagem as sg
from stratagem.search.bruteforce import brute_force_frontier
from stratagem.search.context import context
from stratagem.search.frontier import reduce_rows
from stratagem.search.ft import FTOptions, frontier_tracking
from stratagem.search.ft_bound import frontier_gap, lower_bound
from stratagem.search.ft_peak import peak_frontier_tracking
from stratagem.search.ft_search import PLANNER_FT, FTSearchOptions
from stratagem.search.problem import CostProblem, EdgeCosts
from stratagem.search.space import build_search_space
from stratagem.search.tables import lowered_rows
from tests.search.test_ft import problems
from tests.search.test_ft_peak import problems_with_transients

FORCED = FTOptions(branch_limit=1, workers=1)       # no branch elimination: every cycle needs Eq. 7


def no_worse_point(bound, mem, time) -> bool:
    return any(m <= mem and t <= time for m, t in bound)


@settings(max_examples=150, deadline=None)
@given(problems(max_nodes=7), st.booleans(), st.sampled_from([None, 2, 3]))
def test_the_bound_has_a_point_no_worse_than_every_strategy_on_the_exact_frontier(problem, hubs, width):
    bound = lower_bound(problem, FTOptions(branch_limit=1, workers=1, hub_span=1 if hubs else None, max_width=width))
    for mem, time in brute_force_frontier(problem).pairs():
        assert no_worse_point(bound.pairs, mem, time)


@settings(max_examples=150, deadline=None)
@given(problems_with_transients(max_nodes=6), st.sampled_from([1, 2, None]), st.sampled_from([None, 2]),
       st.booleans())
def test_the_peak_bound_holds_with_its_passes_capped(problem, max_passes, width, targeted):
    """Whichever intervals are refined (all, or where FT's own points leave room), the bound holds."""
    against = peak_frontier_tracking(problem, FORCED).pairs if targeted else ()
    bound = lower_bound(problem, replace(FORCED, max_width=width), max_passes=max_passes, against=against)
    for mem, time in brute_force_frontier(problem).pairs():
        assert no_worse_point(bound.pairs, mem, time)


@settings(max_examples=100, deadline=None)
@given(problems_with_transients())
def test_one_term_per_interval_is_the_exact_peak_frontier(problem):
    """Nothing relaxed and every interval refined to one term: each interval's points are real
    strategies' (their largest term at most the interval's), so the bound is the frontier."""
    bound = lower_bound(problem, FTOptions(workers=1), max_passes=None)
    assert bound.splits == 0
    assert list(bound.pairs) == brute_force_frontier(problem).pairs()


def test_fixing_misses_points_that_splitting_bounds():
    """Eq. 7 as FT runs it loses optimal points on such problems (so the bound above is no
    restatement of FT's own points): a relaxation is needed, not the fixed run."""
    missed = 0
    for seed in range(40):
        problem = _dense_problem(seed)
        exact = brute_force_frontier(problem).pairs()
        fixed = frontier_tracking(problem, FORCED)
        assert fixed.heuristic_fixes
        missed += any(not no_worse_point(fixed.pairs, m, t) for m, t in exact)
        bound = lower_bound(problem, FORCED)
        assert all(no_worse_point(bound.pairs, m, t) for m, t in exact)
    assert missed > 0


@settings(max_examples=100, deadline=None)
@given(problems())
def test_the_bound_is_the_exact_frontier_when_nothing_is_relaxed(problem):
    bound = lower_bound(problem, FTOptions(workers=1))    # no thinning, and FT needs no Eq. 7 here
    assert bound.splits == 0
    assert list(bound.pairs) == brute_force_frontier(problem).pairs()


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6))
def test_frontiers_thinned_from_below_bound_every_tuple(seed, width):
    rng = np.random.default_rng(seed)
    rows, full = 5, 12
    mem, time = rng.integers(0, 40, (rows, full)).astype(float), rng.integers(0, 40, (rows, full)).astype(float)
    mem[rng.random((rows, full)) < 0.2] = np.inf
    m, t, src = reduce_rows(mem, time)
    k_choice, slots = src.copy(), [src.copy()]
    low_m, low_t, low_k, low_slots = lowered_rows(m, t, k_choice, slots, width)
    assert low_m.shape[-1] <= max(width, m.shape[-1])
    for r in range(rows):
        kept = [(a, b) for a, b in zip(low_m[r], low_t[r]) if np.isfinite(a)]
        front = [(a, b) for a, b in zip(m[r], t[r]) if np.isfinite(a)]
        assert len(kept) == min(len(front), width)
        assert all(no_worse_point(kept, a, b) for a, b in front)
        assert [a for a, _ in kept] == sorted({a for a, _ in kept})             # still a frontier
        assert [b for _, b in kept] == sorted({b for _, b in kept}, reverse=True)
        assert all(mem_of in [a for a, _ in front] for mem_of, _ in kept)       # each a group's first memory
        firsts = [int(c) for c, a in zip(low_k[r], low_m[r]) if np.isfinite(a)]
        assert [m[r][list(src[r]).index(c)] for c in firsts] == [a for a, _ in kept]   # unrolls as that first


def test_the_gap_is_read_at_every_memory_from_the_frontiers_leanest_point():
    gap = frontier_gap([(2.0, 10.0), (4.0, 6.0)], [(1.0, 9.0), (3.0, 5.0), (4.0, 5.0)])
    assert gap.largest == pytest.approx(1.0)       # at 3: 10 against 5
    assert gap.at_memory == 3.0
    assert gap.uncovered_memory == (1.0, 2.0)
    assert frontier_gap([(1.0, 5.0)], [(1.0, 5.0)]).largest == 0.0


def test_an_empty_bound_is_refused_with_what_to_check():
    with pytest.raises(ValueError, match="no point"):
        frontier_gap([(1.0, 5.0)], [])


def test_on_a_real_model_every_point_the_planner_finds_is_bounded():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = sg.zoo.build("gpt-tiny-tiny")
    ctx = context(graph, "a100-1x8", 4)
    problem = build_search_space(ctx.model, FTSearchOptions().searched_space).problem
    found = peak_frontier_tracking(problem, PLANNER_FT)
    bound = lower_bound(problem, max_passes=6, against=found.pairs)
    assert all(no_worse_point(bound.pairs, m, t) for m, t in found.pairs)
    gap = frontier_gap(found.pairs, list(bound.pairs))
    assert 0.0 <= gap.largest < np.inf


def _dense_problem(seed: int):
    """A complete graph of 5 nodes with 3 configurations each and random costs."""
    rng = np.random.default_rng(seed)
    n, k = 5, 3
    node_mem = tuple(rng.integers(0, 20, k).astype(float) for _ in range(n))
    node_time = tuple(rng.integers(0, 20, k).astype(float) for _ in range(n))
    edges = tuple(EdgeCosts(i, j, rng.integers(0, 6, (1, k, k)).astype(float),
                            rng.integers(0, 10, (1, k, k)).astype(float))
                  for j in range(n) for i in range(j))
    return CostProblem(node_mem, node_time, edges)
