"""FT against brute force on random DAGs small enough to enumerate (TensorOpt Algorithm 2 is exact
when no heuristic elimination is needed)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stratagem.search.bruteforce import brute_force_frontier
from stratagem.search.ft import FTOptions, _State, frontier_tracking, merged
from stratagem.search.problem import CostProblem, EdgeCosts


@st.composite
def problems(draw, max_nodes=8, max_configs=4, max_options=2):
    n = draw(st.integers(1, max_nodes))
    sizes = [draw(st.integers(1, max_configs)) for _ in range(n)]
    seed = draw(st.integers(0, 2**32 - 1))
    density = draw(st.floats(0.0, 0.7))
    rng = np.random.default_rng(seed)
    node_mem = tuple(rng.integers(0, 20, k).astype(float) for k in sizes)
    node_time = tuple(rng.integers(0, 20, k).astype(float) for k in sizes)
    edges = []
    for j in range(1, n):
        sources = [i for i in range(j) if rng.random() < density] or [int(rng.integers(0, j))]
        for i in sources:
            r = int(rng.integers(1, max_options + 1)) if rng.random() < 0.3 else 1
            shape = (r, sizes[i], sizes[j])
            edges.append(EdgeCosts(i, j, rng.integers(0, 6, shape).astype(float),
                                   rng.integers(0, 10, shape).astype(float)))
    return CostProblem(node_mem, node_time, tuple(edges))


@settings(max_examples=150, deadline=None)
@given(problems())
def test_ft_frontier_equals_brute_force(problem):
    result = frontier_tracking(problem, FTOptions(workers=1))
    assert not result.heuristic_fixes
    assert result.pairs == brute_force_frontier(problem).pairs()


@settings(max_examples=100, deadline=None)
@given(problems())
def test_every_point_unrolls_to_a_strategy_with_its_cost(problem):
    for point in frontier_tracking(problem, FTOptions(workers=1)).points:
        assert problem.evaluate(point.assignment, point.options) == (point.mem, point.time)


@settings(max_examples=60, deadline=None)
@given(problems(max_nodes=8, max_configs=3))
def test_heuristic_elimination_records_its_choices_and_stays_consistent(problem):
    result = frontier_tracking(problem, FTOptions(workers=1, branch_limit=0))
    for point in result.points:
        assert problem.evaluate(point.assignment, point.options) == (point.mem, point.time)
        for fix in result.heuristic_fixes:
            assert point.assignment[fix.node] == fix.config
    times = [p.time for p in result.points]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)


@settings(max_examples=60, deadline=None)
@given(problems(max_nodes=8, max_configs=3), st.integers(0, 2**32 - 1))
def test_a_preferred_pass_keeps_the_preferred_assignment_on_or_under_the_frontier(problem, seed):
    """The planner's second pass fixes hubs as data parallel has them: the union's frontier then
    has a point at most as costly as data parallel in both memory and time."""
    rng = np.random.default_rng(seed)
    prefer = tuple(int(rng.integers(len(m))) for m in problem.node_mem)
    options = FTOptions(workers=1, branch_limit=0)
    first = frontier_tracking(problem, options)
    union = merged(first, frontier_tracking(problem, options, prefer=prefer))
    mem, time = problem.evaluate(prefer, (0,) * len(problem.edges))
    assert any(p.mem <= mem and p.time <= time for p in union.points)
    assert len(union.points) >= 1 and all(
        problem.evaluate(p.assignment, p.options) == (p.mem, p.time) for p in union.points)
    times = [p.time for p in union.points]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)


def test_threads_give_the_same_frontier():
    rng = np.random.default_rng(7)
    k = 12
    nodes = 10
    problem = CostProblem(tuple(rng.random(k) for _ in range(nodes)), tuple(rng.random(k) for _ in range(nodes)),
                          tuple(EdgeCosts(i, i + 1, rng.random((1, k, k)), rng.random((1, k, k)))
                                for i in range(nodes - 1)) +
                          (EdgeCosts(0, 5, rng.random((1, k, k)), rng.random((1, k, k))),))
    single = frontier_tracking(problem, FTOptions(workers=1))
    threaded = frontier_tracking(problem, FTOptions(workers=2))
    assert single.pairs == threaded.pairs


def test_malformed_problem_is_rejected():
    with pytest.raises(Exception, match="malformed"):
        CostProblem((np.ones(2),), (np.ones(2),), (EdgeCosts(0, 0, np.ones((1, 2, 2)), np.ones((1, 2, 2))),))


def tiled(size: int, copies: int, seed: int) -> CostProblem:
    """A block of `size` nodes with random costs, tiled `copies` times: each copy's first node reads
    the previous copy's last node and, residual-like, its first node (same costs in every copy)."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 4))
    node_mem = tuple(rng.integers(0, 20, k).astype(float) for _ in range(size))
    node_time = tuple(rng.integers(0, 20, k).astype(float) for _ in range(size))
    inner = [(i, j) for j in range(1, size) for i in range(j) if i == j - 1 or rng.random() < 0.5]
    inner_costs = [(rng.integers(0, 6, (1, k, k)).astype(float), rng.integers(0, 10, (1, k, k)).astype(float))
                   for _ in inner]
    link = [(rng.integers(0, 6, (1, k, k)).astype(float), rng.integers(0, 10, (1, k, k)).astype(float))
            for _ in range(2)]
    edges = []
    for c in range(copies):
        base = c * size
        edges += [EdgeCosts(base + i, base + j, m, t) for (i, j), (m, t) in zip(inner, inner_costs)]
        if c:
            edges += [EdgeCosts(base - 1, base, *link[0]), EdgeCosts(base - size, base, *link[1])]
    return CostProblem(node_mem * copies, node_time * copies, tuple(edges))


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 3), st.integers(2, 3), st.integers(0, 2**32 - 1))
def test_repeated_blocks_stay_exact_with_reused_reductions(size, copies, seed):
    problem = tiled(size, copies, seed)
    result = frontier_tracking(problem, FTOptions(workers=1))
    assert result.pairs == brute_force_frontier(problem).pairs()
    for point in result.points:        # every copy unrolls to its own nodes
        assert problem.evaluate(point.assignment, point.options) == (point.mem, point.time)


def test_identical_blocks_are_reduced_once():
    """Three copies of a three-node block: each copy's middle node is eliminated on the same tables, so
    every copy after the first reuses the first one's arrays, and the frontier stays exact."""
    for seed in range(5):
        problem = tiled(3, 3, seed)
        result = frontier_tracking(problem, FTOptions(workers=1))
        assert result.stats["reused"] >= 2
        assert result.pairs == brute_force_frontier(problem).pairs()


def test_a_deeper_stack_of_identical_blocks_computes_one_more_combine_per_block():
    """Beyond the first blocks, each block's eliminations are reused and only the linear DP over
    the stack computes anew: one combine per block, where a block takes six."""
    computed = {}
    for copies in (6, 12, 24):
        stats = frontier_tracking(tiled(3, copies, 1), FTOptions(workers=1)).stats
        computed[copies] = stats["computed"]
        assert stats["reused"] >= 5 * (copies - 3)
    assert computed[12] - computed[6] <= 6 and computed[24] - computed[12] <= 12


def test_of_a_triangle_the_node_whose_edges_are_narrower_goes_first():
    """Around a triangle 0-1-2, eliminating 0 multiplies the widths of its two wide edges (four
    reuse options each); eliminating 1 or 2 multiplies one wide edge by the narrow 1-2. FT picks
    the cheaper, and the frontier stays brute force's."""
    rng = np.random.default_rng(3)

    def edge(i, j, options):      # each option trades memory for time: none dominates another
        trade = np.arange(options, dtype=float)[:, None, None]
        return EdgeCosts(i, j, rng.integers(0, 6, (1, 3, 3)) + trade, rng.integers(0, 10, (1, 3, 3)) + 10 * (options - trade))

    problem = CostProblem(tuple(rng.integers(0, 20, 3).astype(float) for _ in range(3)),
                          tuple(rng.integers(0, 20, 3).astype(float) for _ in range(3)),
                          (edge(0, 1, 4), edge(0, 2, 4), edge(1, 2, 1)))
    state = _State(problem, FTOptions(workers=1), None)
    assert state._candidates(0) == 4 * state._candidates(1) == 4 * state._candidates(2)
    assert state._cheapest_near(0, set()) == 1
    assert frontier_tracking(problem, FTOptions(workers=1)).pairs == brute_force_frontier(problem).pairs()
