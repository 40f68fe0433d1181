"""FT on peak memory (additive memory plus the largest transient term) against brute force."""

import numpy as np
from hypothesis import given, settings, strategies as st

from stratagem.search.bruteforce import brute_force_frontier
from stratagem.search.ft import FTOptions
from stratagem.search.ft_peak import peak_frontier_tracking
from stratagem.search.problem import CostProblem, EdgeCosts
from stratagem.search.tables import Memo, content_key
from tests.search.test_ft import problems


@st.composite
def problems_with_transients(draw, max_nodes=7, max_configs=4):
    base = draw(problems(max_nodes=max_nodes, max_configs=max_configs))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([1, 5, 40]))      # transients small, comparable, or dominant
    node = tuple(rng.integers(0, scale + 1, len(m)).astype(float) for m in base.node_mem)
    edges = tuple(EdgeCosts(e.src, e.dst, e.mem, e.time, e.name,
                            rng.integers(0, scale + 1, e.mem.shape).astype(float)) for e in base.edges)
    return CostProblem(base.node_mem, base.node_time, edges, base.names, node)


@settings(max_examples=150, deadline=None)
@given(problems_with_transients())
def test_peak_frontier_equals_brute_force(problem):
    result = peak_frontier_tracking(problem, FTOptions(workers=1))
    assert not result.heuristic_fixes
    assert result.pairs == brute_force_frontier(problem).pairs()


@settings(max_examples=80, deadline=None)
@given(problems_with_transients())
def test_every_point_is_its_strategys_peak_and_time(problem):
    for point in peak_frontier_tracking(problem, FTOptions(workers=1)).points:
        assert problem.evaluate(point.assignment, point.options) == (point.mem, point.time)


def test_a_large_transient_moves_the_lean_end():
    """Two nodes: configuration 0 is leanest by additive memory but makes a large transient on
    the edge; the peak frontier prefers configuration 1, which the additive frontier never shows."""
    node_mem = (np.array([1.0, 3.0]), np.array([1.0, 1.0]))
    node_time = (np.array([5.0, 5.0]), np.array([1.0, 1.0]))
    transient = np.array([[[10.0, 10.0], [0.0, 0.0]]])
    edge = EdgeCosts(0, 1, np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), "e", transient)
    problem = CostProblem(node_mem, node_time, (edge,), ("a", "b"))
    result = peak_frontier_tracking(problem, FTOptions(workers=1))
    assert result.pairs == [(4.0, 6.0)]
    assert result.points[0].assignment[0] == 1
    additive = CostProblem(node_mem, node_time, (EdgeCosts(0, 1, edge.mem, edge.time, "e"),), ("a", "b"))
    assert peak_frontier_tracking(additive, FTOptions(workers=1)).points[0].assignment[0] == 0


def test_passes_are_the_levels_along_the_frontier_not_every_term():
    """Six distinct terms: one large level on node 0's leanest configuration, and small ones no
    strategy can avoid (each node's is the same in every configuration). The top pass meets the
    large level; one pass below it finds only the unavoidable ones, and the loop stops."""
    rng = np.random.default_rng(3)
    n = 6
    node_mem = (np.array([0.0, 50.0, 60.0]),) + tuple(rng.integers(1, 9, 3).astype(float) for _ in range(n - 1))
    node_time = tuple(rng.integers(1, 9, 3).astype(float) for _ in range(n))
    node_transient = (np.array([100.0, 0.5, 0.5]),) + tuple(np.full(3, 0.1 * i) for i in range(1, n))
    problem = CostProblem(node_mem, node_time, (), tuple(f"n{i}" for i in range(n)), node_transient)
    result = peak_frontier_tracking(problem, FTOptions(workers=1))
    assert len(problem.transient_values()) == 7       # 0 and six terms
    assert result.stats["passes"] == 2
    assert result.pairs == brute_force_frontier(problem).pairs()


def test_a_pass_cap_says_the_frontier_is_not_exact():
    problem = CostProblem((np.array([0.0, 10.0, 12.0]),), (np.array([1.0, 5.0, 9.0]),), (), ("a",),
                          (np.array([100.0, 50.0, 1.0]),))
    full = peak_frontier_tracking(problem, FTOptions(workers=1))
    capped = peak_frontier_tracking(problem, FTOptions(workers=1, peak_passes=1))
    assert full.pairs == brute_force_frontier(problem).pairs() and full.stats["exact"]
    assert capped.pairs == [(100.0, 1.0)]
    assert capped.stats["peak_thresholds_left"] == 2 and not capped.stats["exact"]


class _RecordingMemo(Memo):
    """A memo that remembers what its passes forgot and what was asked of it after."""

    def __init__(self):
        super().__init__()
        self.forgotten: set = set()
        self.asked_after_forgotten: list = []

    def get(self, key):
        if key in self.forgotten:
            self.asked_after_forgotten.append(key)
        return super().get(key)

    def edge_options(self, mem, time):
        key = content_key(mem, time)
        if key in self.forgotten:
            self.asked_after_forgotten.append(key)
        return super().edge_options(mem, time)

    def settle(self, keep):
        held = set(self.results) | set(self.edges)
        super().settle(keep)
        self.forgotten |= held - set(self.results) - set(self.edges)


@settings(max_examples=120, deadline=None)
@given(problems_with_transients())
def test_a_pass_forgets_only_what_no_later_pass_asks_for(problem):
    """Each pass masks at least what the one before masked: what a pass did not use is never
    asked for again, and the top pass's results all serve a second run at the top (the planner's
    run with hubs fixed as data parallel has them)."""
    memo = _RecordingMemo()
    result = peak_frontier_tracking(problem, FTOptions(workers=1), memo=memo)
    assert result.pairs == brute_force_frontier(problem).pairs()
    assert memo.asked_after_forgotten == []
    computed = memo.computed
    again = peak_frontier_tracking(problem, FTOptions(workers=1, peak_passes=1), memo=memo)
    assert memo.computed == computed and memo.asked_after_forgotten == []
    assert again.pairs == peak_frontier_tracking(problem, FTOptions(workers=1, peak_passes=1)).pairs


def test_settle_keeps_the_top_pass_and_what_a_later_pass_used():
    memo = Memo()
    top, used, unused, new = (bytes([i]) * 16 for i in range(4))
    memo.put(top, ("top",))
    memo.settle(keep=True)
    memo.put(used, ("used",))
    memo.put(unused, ("unused",))
    memo.settle(keep=False)
    assert set(memo.results) == {top, used, unused}
    assert memo.get(used) == ("used",)
    memo.put(new, ("new",))
    memo.settle(keep=False)
    assert set(memo.results) == {top, used, new}
    memo.settle(keep=False)
    assert set(memo.results) == {top}
