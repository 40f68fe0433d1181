"""CostProblem's own facts (search.problem); FT over it is checked against brute force in test_ft*."""

import numpy as np
from hypothesis import given, settings, strategies as st

from stratagem.search.problem import CostProblem, EdgeCosts


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_transient_values_are_every_distinct_finite_term_and_zero(seed, shared):
    """Against np.unique over every term: ties across arrays, +inf (a masked option) and arrays
    that several edges share (repeated layers) included."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 5, 4)
    node_transient = tuple(rng.choice([0.5, 2.0, 3.0, np.inf], k) for k in sizes)
    one = rng.choice([0.5, 7.0, np.inf, 1e9], (2, sizes[0], sizes[1]))
    edges = [EdgeCosts(0, 1, np.zeros_like(one), np.zeros_like(one), "a", one)]
    for src, dst in ((1, 2), (2, 3), (0, 3)):
        shape = (1, sizes[src], sizes[dst])
        transient = one if shared and src == 0 else rng.integers(0, 4, shape) * 1.25
        if transient.shape != shape:
            transient = rng.integers(0, 4, shape) * 1.25
        edges.append(EdgeCosts(src, dst, np.zeros(shape), np.zeros(shape), f"{src}{dst}", transient))
    edges.append(EdgeCosts(1, 3, np.zeros((1, sizes[1], sizes[3])), np.zeros((1, sizes[1], sizes[3]))))
    problem = CostProblem(tuple(np.zeros(k) for k in sizes), tuple(np.zeros(k) for k in sizes), tuple(edges),
                          node_transient=node_transient)
    terms = np.concatenate([t.ravel() for t in node_transient]
                           + [e.transient.ravel() for e in edges if e.transient is not None] + [np.zeros(1)])
    expected = np.unique(terms[np.isfinite(terms)])
    found = problem.transient_values()
    assert found.tolist() == expected.tolist()


def test_within_masks_what_lies_above_and_keeps_arrays_it_leaves_alone():
    """Options above the threshold cost +inf memory; an array with nothing above is the same
    array (the peak passes' memo knows it by identity), and one with something above is a copy."""
    low, high = np.array([[[1.0, 2.0]]]), np.array([[[1.0, 5.0]]])
    mem = np.array([[[3.0, 4.0]]])
    edges = (EdgeCosts(0, 1, mem, np.zeros((1, 1, 2)), "low", low),
             EdgeCosts(0, 1, mem, np.zeros((1, 1, 2)), "high", high))
    problem = CostProblem((np.zeros(1), np.zeros(2)), (np.zeros(1), np.zeros(2)), edges,
                          node_transient=(np.zeros(1), np.array([0.0, 9.0])))
    within = problem.within(4.0)
    assert within.edges[0].mem is mem
    assert within.edges[1].mem.tolist() == [[[3.0, np.inf]]] and mem.tolist() == [[[3.0, 4.0]]]
    assert within.node_mem[1].tolist() == [0.0, np.inf] and within.node_mem[0] is problem.node_mem[0]
