"""Per-op transient terms in FT's problem (search.levels): an op holds all its inputs while it
runs; FT's least over level digits is the cost model's exact peak, against brute force and the
simulator."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stratagem.cost import CostModel
from stratagem.cost.transient import input_transient_bytes, op_transient_bytes, plan_transient
from stratagem.search.levels import LEVEL_TOLERANCE, Known, _largest, _level_values, fold
from stratagem.search.problem import EdgeCosts
from stratagem.search.space import build_search_space
from stratagem.sim.builder import simulate
from stratagem.space import Configuration, Edge
from tests.search.graphs import residual
from tests.sim.shared_copies import shared_copies_bytes
from tests.search.oracle import (
    assert_ft_finds_the_exact_frontier, bounded_strategies, build_uncapped_space, checked_strategies,
    space_assignments,
)

B, W = 64, 256


@pytest.fixture(scope="module")
def model():
    return CostModel(residual(B, W), "v100-2x8", num_devices=2)


@pytest.fixture(scope="module")
def space(model):
    """Digits enough for every distinct (L, H, P) of the add's second input: exact."""
    return build_uncapped_space(model, coarsening=False)


@pytest.fixture(scope="module")
def capped(model):
    """The default caps: fewer digits than distinct triples, runs merged upward."""
    return build_search_space(model, coarsening=False)


def test_the_add_holds_both_summands_and_the_sum_and_so_does_the_simulator(model):
    """Data parallel: while the add runs, a, b and s are live (no op keeps a or b, s is kept by
    fcc): the add's term is the two summands, more than either one (what a per-edge maximum saw)."""
    from stratagem.cost.transient import op_term
    dp = {op.name: Configuration.of(b=2) for op in model.graph.ops} | {"add": Configuration.of(d0=2)}
    half = B // 2 * W * 4
    edges = [Edge("a", "fca", "add"), Edge("b", "fcb", "add")]
    parts = [input_transient_bytes(model, e, dp[e.src_op], dp["add"]) for e in edges]
    assert parts == [(half, half, half)] * 2 and op_transient_bytes(model, "add", dp["add"]) == 0
    assert op_term(0.0, parts) == 2 * half
    assert plan_transient(model, dp) == (2 * half, "add")
    assert model.plan_cost(dp).memory_bytes == simulate(model, dp).peak_memory_bytes


def test_re_scheduled_summands_are_counted_as_the_simulator_holds_them(model):
    """a and b produced split by features, the add by batch: both are re-scheduled before it
    runs; a source is released once read into its copy, so the largest moment is an input's move
    (one source and copy, and the other input): three halves, as simulated. s, which fcc saves,
    does not exist yet then (made_q: the add makes it), so the cost model's peak is the
    simulated one; without that discount it would add s to the move (what it did before). (Both
    fca and fcb read x replicated and keep it: the simulator holds that copy once, as the
    runtime moves it once; the cost model charges each reader its own: cost.shared_moves.)"""
    features, batch = Configuration.of(j=2), Configuration.of(b=2)
    strategy = {"fca": features, "fcb": features, "add": Configuration.of(d0=2), "fcc": batch}
    assert all(model.edge_cost_in(Edge(t, p, "add"), strategy).forward_steps for t, p in (("a", "fca"), ("b", "fcb")))
    half = B // 2 * W * 4
    assert model.op_made("add", strategy["add"]) == half and model.later_kept["add"] == 0.0
    assert plan_transient(model, strategy) == (3 * half - half, "add")
    assert shared_copies_bytes(model, strategy) == B * W * 4
    assert model.plan_cost(strategy).memory_bytes == simulate(model, strategy).peak_memory_bytes + B * W * 4


def test_the_adds_second_input_gets_levels(space):
    g = next(g for g, group in enumerate(space.groups) if group.anchor == "add")
    assert space.levels[g] and space.num_flags(g) > 1
    carriers = {level.carrier for level in space.levels[g]}
    assert all(space.problem.edges[level.edge].transient is None for level in space.levels[g])
    assert all(space.problem.edges[c].transient is not None for c in carriers)


def test_the_least_over_levels_is_the_exact_peak_of_every_strategy(model, space):
    """For every strategy: min over flag and level values of the problem's (memory, time) is
    the cost model's (memory, time), and index_of finds a value that is exact."""
    checked = varied = 0
    for strategy, memories in checked_strategies(model, space):
        assert space.problem.evaluate(space.index_of(model, strategy))[0] == pytest.approx(min(memories), rel=1e-12)
        varied += len(set(memories)) > 1
        checked += 1
    assert checked > 100 and varied > 0


def test_ft_finds_the_exact_peak_frontier(model, space):
    """FT over the problem with levels gives the frontier of every strategy's exact peak and time."""
    assert_ft_finds_the_exact_frontier(model, space, (base for base, _ in space_assignments(space)))


def test_past_the_caps_ft_overcharges_never_undercharges():
    """Merged level runs stand for their largest triple, so FT may overcharge a strategy's peak,
    never undercharge it (bounded_strategies checks every ninth strategy). On 4 devices some
    re-schedulings need scratch, so an input's move, not the add's run, is its largest moment and
    the merged runs show; on 2 the run dominates every strategy once the add's kept sum is
    discounted from the move (made_q), and FT's peak is exact there."""
    model = CostModel(residual(B, W), "v100-2x8", num_devices=4)
    space, capped = build_uncapped_space(model, coarsening=False), build_search_space(model, coarsening=False)
    g = next(g for g, group in enumerate(capped.groups) if group.anchor == "add")
    assert capped.num_flags(g) < space.num_flags(g)
    over = 0
    for strategy, least, exact in itertools.islice(bounded_strategies(model, capped), 0, None, 9):
        assert capped.problem.evaluate(capped.index_of(model, strategy))[0] == pytest.approx(least, rel=1e-12)
        over += least > exact * (1 + 1e-12)
    assert over > 0


def test_inputs_that_share_a_table_share_its_digits_and_others_get_their_own():
    """fold finds an input's digit values once per phases table (twins' edges share theirs): two
    ops reading the same table get equal digits, and a third reading an equal-shaped table of
    other values gets that table's, not the shared one's."""
    rng = np.random.default_rng(0)
    r, ks, kd = 1, 3, 2

    def table(scale):
        return np.stack([rng.uniform(1, 2, (r, ks, kd)) * scale, rng.uniform(2, 3, (r, ks, kd)) * scale,
                         rng.uniform(3, 4, (r, ks, kd)) * scale])

    shared, other, carried = table(1e6), table(3e6), table(1e7)
    no_cost = np.zeros((r, ks, kd))
    ops = ("q0", "q1", "q2")
    edges, phases, crossing = [], {}, {}
    for g, (q, bounded) in enumerate(zip(ops, (shared, shared, other))):
        for t in (carried, bounded):
            crossing.setdefault(q, []).append(len(edges))
            phases[len(edges)] = t
            edges.append(EdgeCosts(3, g, no_cost, no_cost))
    known = {q: Known(np.zeros(kd)) for q in ops}
    levels, _ = fold(edges, phases, crossing, known, {q: g for g, q in enumerate(ops)}, 4,
                     {q: 0.0 for q in ops})
    values = [found[0].values for found in levels[:3]]
    assert values[0].shape[1] > 1
    assert np.array_equal(values[0], values[1])
    assert np.array_equal(values[2], _level_values(other, values[2].shape[1], LEVEL_TOLERANCE * _largest(carried[2])))
    assert not np.array_equal(values[2], values[0])
