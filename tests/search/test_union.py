"""union.union_of_terms against reduce_rows over every candidate, on the index specs FT's
eliminations use (node, leaf, edge, branch, heuristic fix, LDP), with ties, infinities and
thinning; and tables.combine, which calls it or another path per spec, against the same."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratagem.search.frontier import reduce_rows
from stratagem.search.tables import NodeLeaf, Table, Term, _visited_terms, combine
from stratagem.search import union
from stratagem.search.union import prepared_terms, product_of_two, union_of_terms

O0, O1 = ("o", 0), ("o", 1)
# (the specs of each term, the output dims they read, whether k is unioned away)
SHAPES = {
    "node": [(O0, "k"), ("k", O1)],
    "leaf fold": [(O1,), (O1, O0)],
    "leaf": [(O0,), (O0, "k")],
    "edge": [(O0, O1), (O0, O1)],
    "branch": [(O0,), (O1,), (O0, O1)],
    "fix": [(O0,), (O0, 1)],
    "ldp": [("k",), ("k", O0), (O0,)],
    "isolated": [("k",)],
}


class _Given(Table):
    def __init__(self, mem, time):
        self.mem, self.time = mem, time


def _table(rng, shape, width, values):
    """A [*shape, <=width] table of reduced frontiers (+inf padded, some rows empty)."""
    rows = math.prod(shape)
    mem = rng.integers(0, values, (rows, 3 * width)).astype(float)
    time = rng.integers(0, values, (rows, 3 * width)).astype(float)
    mem[rng.random(mem.shape) < 0.2] = np.inf
    m, t, _ = reduce_rows(mem, time, 0.0, width)
    return _Given(m.reshape(shape + (-1,)), t.reshape(shape + (-1,)))


def _candidates(terms, out_sizes, k):
    """Every candidate [rows, k * W_0 * ... ] in reduce_rows' column order, summed term by term."""
    widths = [t.table.width for t in terms]
    rows = []
    for o in itertools.product(*[range(n) for n in out_sizes]):
        mem_row, time_row = [], []
        for kk in range(k):
            for slots in itertools.product(*[range(w) for w in widths]):
                m = t = 0.0
                for term, s in zip(terms, slots):
                    index = tuple(kk if e == "k" else o[e[1]] if isinstance(e, tuple) else e for e in term.spec)
                    m, t = m + term.table.mem[index + (s,)], t + term.table.time[index + (s,)]
                mem_row.append(m)
                time_row.append(t)
        rows.append((mem_row, time_row))
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def _sizes(spec_list, sizes):
    """Each term's index shape from the dims it reads."""
    def size(entry):
        return sizes["k"] if entry == "k" else sizes[entry] if isinstance(entry, tuple) else 3
    return [tuple(size(e) for e in spec) for spec in spec_list]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(SHAPES)), st.integers(1, 4), st.integers(1, 4), st.integers(1, 5),
       st.integers(1, 4), st.sampled_from([None, 1, 2, 3, 6]), st.integers(0, 2**32 - 1),
       st.sampled_from([3, 40, 1000]))
def test_combine_keeps_what_reducing_every_candidate_keeps(name, n0, n1, k, width, max_width, seed, values):
    """The same tuples, columns (ties: the lowest), order and thinning as reduce_rows over the
    whole candidate array; few values make many ties."""
    rng = np.random.default_rng(seed)
    specs = SHAPES[name]
    reads_k = any("k" in spec for spec in specs)
    dims = sorted({e[1] for spec in specs for e in spec if isinstance(e, tuple)})
    out_sizes = tuple((n0, n1)[d] for d in dims)
    sizes = {O0: n0, O1: n1, "k": k}
    terms = [Term(_table(rng, shape, width, values), spec) for shape, spec in zip(_sizes(specs, sizes), specs)]
    k_size = k if reads_k else None
    mem, time = _candidates(terms, out_sizes, k if reads_k else 1)
    expected = reduce_rows(mem, time, 0.0, max_width)
    direct = union_of_terms(_visited_terms(terms, max(1, len(out_sizes))), (0,) * max(1, len(out_sizes)),
                            out_sizes or (1,), k if reads_k else 1, max_width)
    for d, e in zip(direct, expected):
        np.testing.assert_array_equal(d, e)
    found = combine(terms, out_sizes, k_size, max_width=max_width)
    width_found = found.mem.shape[-1]
    np.testing.assert_array_equal(found.mem.reshape(-1, width_found), expected[0])
    np.testing.assert_array_equal(found.time.reshape(-1, width_found), expected[1])
    widths = [t.table.width for t in terms]
    columns = np.where(expected[2] >= 0, expected[2], 0)
    coords = np.unravel_index(columns, ((k if reads_k else 1),) + tuple(widths))
    for term_slots, coord in zip(found.slots, coords[1:]):
        np.testing.assert_array_equal(term_slots.reshape(-1, width_found), np.where(expected[2] >= 0, coord, -1))
    if reads_k:
        np.testing.assert_array_equal(found.k_choice.reshape(-1, width_found), np.where(expected[2] >= 0, coords[0], -1))


def test_a_box_of_the_output_is_its_rows_of_the_whole():
    """union_of_terms over a box equals the same rows of the whole output: the row arithmetic
    (box starts, row-major order) reads each term at the right index."""
    rng = np.random.default_rng(7)
    a, b = _table(rng, (5, 4), 3, 50), _table(rng, (4, 6), 3, 50)
    terms = prepared_terms([(a.mem.reshape(20, -1), a.time.reshape(20, -1)), (b.mem.reshape(24, -1), b.time.reshape(24, -1))],
                           np.array([[4, 0, 1], [0, 1, 6]]), np.array([0, 0]))
    whole = union_of_terms(terms, (0, 0), (5, 6), 4, None)
    part = union_of_terms(terms, (2, 3), (2, 2), 4, None)
    rows = [i * 6 + j for i in (2, 3) for j in (3, 4)]
    for w, p in zip(whole, part):
        width = p.shape[1]
        np.testing.assert_array_equal(w[rows][:, :width], p)
        assert np.all(w[rows][:, width:] == (np.inf if w.dtype == float else -1))


def test_node_leaves_combine_as_their_sums():
    """A node's table of single tuples and an edge: the union over k keeps the least-time and
    least-memory sums (a hand-made case)."""
    node = NodeLeaf(0, np.array([1.0, 3.0]), np.array([5.0, 1.0]))
    edge = _Given(np.array([[[0.0]], [[0.0]]]), np.array([[[0.0]], [[2.0]]]))
    found = combine([Term(node, ("k",)), Term(edge, ("k", O0))], (1,), 2)
    assert found.mem[0].tolist() == [1.0, 3.0] and found.time[0].tolist() == [5.0, 3.0]
    assert found.k_choice[0].tolist() == [0, 1]


def test_an_equal_time_at_more_memory_leaves_the_step_as_it_was():
    """Configuration 1 is visited first (its least time is lower) and keeps (1, 5) from column 2;
    configuration 0's (2, 5), column 0, has as little time but more memory: Algorithm 1 drops it,
    and the step keeps its own column."""
    mem = np.array([[2.0, 9.0], [1.0, 8.0]])
    time = np.array([[5.0, 6.0], [5.0, 1.0]])
    terms = prepared_terms([(mem, time)], np.array([[1]]), np.array([0]))
    m, t, column = union_of_terms(terms, (), (), 2, None)
    assert m[0].tolist() == [1.0, 8.0] and t[0].tolist() == [5.0, 1.0] and column[0].tolist() == [2, 3]


def test_a_row_not_memory_ascending_is_left_to_the_candidate_array():
    """product_of_two reads rows as sorted lists: given one that is not, it declines (None), and
    combine's answer is still reduce_rows' over every candidate."""
    a = _Given(np.array([[3.0, 1.0]]), np.array([[1.0, 4.0]]))            # not memory ascending
    b = _Given(np.array([[[0.0, 2.0]]]), np.array([[[5.0, 0.0]]]))
    terms = [Term(a, (O0,)), Term(b, (O0, O1))]
    visited = _visited_terms(terms, 2)
    assert product_of_two(visited, (0, 0), (1, 1), None) is None
    mem, time = _candidates(terms, (1, 1), 1)
    expected = reduce_rows(mem, time)
    found = combine(terms, (1, 1))
    np.testing.assert_array_equal(found.mem.reshape(1, -1), expected[0])
    np.testing.assert_array_equal(found.time.reshape(1, -1), expected[1])


def test_equal_sums_from_two_lists_keep_the_lowest_column():
    """a0 + b1 and a1 + b0 are both (1, 3): reduce_rows keeps column 1 (a0, b1), not 2."""
    a = _Given(np.array([[0.0, 1.0]]), np.array([[2.0, 1.0]]))
    b = _Given(np.array([[[0.0, 1.0]]]), np.array([[[2.0, 1.0]]]))
    merged = product_of_two(_visited_terms([Term(a, (O0,)), Term(b, (O0, O1))], 2), (0, 0), (1, 1), None)
    mem, time, column = merged
    assert mem[0].tolist() == [0.0, 1.0, 2.0] and time[0].tolist() == [4.0, 3.0, 2.0]
    assert column[0].tolist() == [0, 1, 3]


def test_a_large_box_one_wide_unrolls_to_the_configurations_reduced():
    """Node elimination over many outputs whose frontiers are one tuple wide: each output's k is
    the one whose sum it kept (np.unravel_index alone gets [N, 1] arrays of more than 8,192 entries
    wrong past its buffer on NumPy 2.4, numpy/numpy#31980)."""
    rng = np.random.default_rng(3)
    h, k, j = 90, 7, 100
    a_mem, b_mem = rng.random((h, k, 1)), rng.random((k, j, 1))
    a, b = _Given(a_mem, a_mem), _Given(b_mem, b_mem)       # time = memory: one tuple survives
    found = combine([Term(a, (O0, "k")), Term(b, ("k", O1))], (h, j), k)
    chosen = found.k_choice[..., 0]
    mem = a.mem[np.arange(h)[:, None], chosen, 0] + b.mem[chosen, np.arange(j)[None, :], 0]
    np.testing.assert_array_equal(mem, found.mem[..., 0])


def test_a_last_term_added_after_the_union_keeps_every_tuple_and_a_column_of_its_cost():
    """The linear DP's spec (N[(o0,)] read for every k: added after the union over k) on sums
    that round: tuples and thinning exactly reduce_rows'; each kept column a candidate whose sums
    are the tuple kept (where rounding makes two sums equal, either column costs the same)."""
    specs = SHAPES["ldp"]
    for seed in range(200):
        rng = np.random.default_rng(seed)
        n0, k, width = int(rng.integers(1, 4)), int(rng.integers(2, 5)), int(rng.integers(2, 5))
        terms = []
        for shape, spec in zip(_sizes(specs, {O0: n0, O1: 1, "k": k}), specs):
            rows = math.prod(shape)
            step = 2.0 ** -50 * 10.0 ** int(rng.integers(0, 12))
            mem = rng.integers(0, 6, (rows, 3 * width)) * 2.0 ** 40 + rng.integers(0, 3, (rows, 3 * width)) * step
            time = rng.integers(0, 6, (rows, 3 * width)) / 7.0 + rng.integers(0, 3, (rows, 3 * width)) * 1e-16
            m, t, _ = reduce_rows(mem, time, 0.0, width)
            terms.append(Term(_Given(m.reshape(shape + (-1,)), t.reshape(shape + (-1,))), spec))
        mem, time = _candidates(terms, (n0,), k)
        for max_width in (None, 2):
            expected = reduce_rows(mem, time, 0.0, max_width)
            found = union_of_terms(_visited_terms(terms, 1), (0,), (n0,), k, max_width)
            np.testing.assert_array_equal(found[0], expected[0])
            np.testing.assert_array_equal(found[1], expected[1])
            rows = np.arange(n0)[:, None].repeat(found[2].shape[1], 1)
            kept = found[2] >= 0
            np.testing.assert_array_equal(kept, expected[2] >= 0)
            np.testing.assert_array_equal(mem[rows[kept], found[2][kept]], found[0][kept])
            np.testing.assert_array_equal(time[rows[kept], found[2][kept]], found[1][kept])



@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([None, 3]), st.sampled_from([1, 3]), st.sampled_from([1, 2, 5]),
       st.sampled_from([3, 40, 1000]))
def test_sums_merged_in_batches_keep_what_reducing_every_candidate_keeps(seed, max_width, node_width, merge_at,
                                                                           values):
    """The kept sums wait until union.MERGE_AT of them are there before they are merged into the
    staircase (the linear DP's step here, 12 configurations): with batches of 1, 2 and 5 (the
    kernel's Python source, whose MERGE_AT is read when it runs) the result is reduce_rows' over
    every candidate, and the compiled kernel's (batches of 64) is too."""
    rng = np.random.default_rng(seed)
    k, o = 12, 2
    terms = [Term(_table(rng, (k,), 6, values), ("k",)), Term(_table(rng, (k, o), 5, values), ("k", O0)),
             Term(_table(rng, (o,), node_width, values), (O0,))]
    expected = reduce_rows(*_candidates(terms, (o,), k), 0.0, max_width)
    compiled = union_of_terms(_visited_terms(terms, 1), (0,), (o,), k, max_width)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(union, "MERGE_AT", merge_at)
        patch.setattr(union, "_union_of_terms", union._union_of_terms.py_func)
        batched = union_of_terms(_visited_terms(terms, 1), (0,), (o,), k, max_width)
    for found in (compiled, batched):
        for f, e in zip(found, expected):
            np.testing.assert_array_equal(f, e[:, :f.shape[1]])
            assert np.all(e[:, f.shape[1]:] == (np.inf if e.dtype.kind == "f" else -1))
