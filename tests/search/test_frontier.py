import numpy as np
from hypothesis import given, settings, strategies as st

from stratagem.search.frontier import Frontier, is_frontier, memory_buckets, reduce_rows, sort_indices, union_of_products


def dominated(m, t, mem, time):
    return any((mm <= m and tt <= t) and (mm < m or tt < t) for mm, tt in zip(mem, time))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=30))
def test_reduce_keeps_exactly_the_non_dominated(points):
    mem = np.array([p[0] for p in points], dtype=float)
    time = np.array([p[1] for p in points], dtype=float)
    f = Frontier.reduce(mem, time, list(range(len(points))))
    expected = sorted({(m, t) for m, t in points if not dominated(m, t, mem, time)})
    assert f.pairs() == expected
    assert is_frontier(f.mem, f.time)
    assert all(points[i] == pair for i, pair in zip(f.payload, f.pairs()))


def test_rows_are_reduced_independently_and_padded():
    mem = np.array([[1, 2, 3], [3, 3, 3], [np.inf, 1, 0]], dtype=float)
    time = np.array([[3, 2, 1], [5, 4, 6], [0, 2, 9]], dtype=float)
    m, t, src = reduce_rows(mem, time)
    assert m.shape == (3, 3)
    assert list(zip(m[0], t[0])) == [(1, 3), (2, 2), (3, 1)]
    assert list(zip(m[1], t[1]))[0] == (3, 4) and np.isinf(m[1, 1]) and src[1, 1] == -1
    assert list(zip(m[2, :2], t[2, :2])) == [(0, 9), (1, 2)] and list(src[2, :2]) == [2, 1]


def test_resolution_keeps_one_tuple_per_memory_bucket():
    low = np.expm1(465.2 * np.log1p(0.01))           # well inside bucket 465 of 1 % steps
    mem = np.array([[low, low * 1.002, 150.0]])
    assert memory_buckets(mem[:, :2], 0.01)[0, 0] == memory_buckets(mem[:, :2], 0.01)[0, 1]
    time = np.array([[5.0, 4.0, 1.0]])
    exact = reduce_rows(mem, time)[0]
    coarse = reduce_rows(mem, time, resolution=0.01)
    assert np.isfinite(exact).sum() == 3
    assert list(coarse[1][0][np.isfinite(coarse[1][0])]) == [4.0, 1.0]


def _reference(mem, time, resolution=0.0, max_width=None):
    """Algorithm 1 by sorting whole rows (the vectorized form reduce_rows had before it was
    compiled): order by (key, time, column), keep a tuple iff its time is below every earlier one."""
    key = mem if resolution <= 0 else memory_buckets(mem, resolution)
    by_time = np.argsort(time, axis=1, kind="stable")
    order = np.take_along_axis(by_time, np.argsort(np.take_along_axis(key, by_time, axis=1), axis=1,
                                                   kind="stable"), axis=1)
    m_sorted, t_sorted = np.take_along_axis(mem, order, axis=1), np.take_along_axis(time, order, axis=1)
    keep = np.isfinite(t_sorted) & np.isfinite(m_sorted)
    keep[:, 1:] &= t_sorted[:, 1:] < np.minimum.accumulate(t_sorted, axis=1)[:, :-1]
    rows = []
    for r in range(mem.shape[0]):
        columns = list(order[r][keep[r]])
        if max_width is not None and len(columns) > max_width:
            span = max(len(columns) - 1, 1)
            buckets = [(rank * (max_width - 1)) // span for rank in range(len(columns))]
            columns = [c for rank, c in enumerate(columns)
                       if rank == 0 or buckets[rank] != buckets[rank - 1] or rank == len(columns) - 1]
        rows.append(columns)
    return rows


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.integers(1, 300), st.sampled_from([0.0, 0.05, 0.5]),
       st.sampled_from([None, 1, 2, 3, 16]), st.integers(0, 2**31 - 1), st.sampled_from([3, 50, 10**6]))
def test_reduce_rows_keeps_what_sorting_whole_rows_keeps(rows, n, resolution, max_width, seed, values):
    """Columns, order, ties (the lowest column of equal tuples) and thinning as Algorithm 1 over
    whole sorted rows, on rows with many ties (few distinct values) or none, and infinities."""
    rng = np.random.default_rng(seed)
    mem = rng.integers(0, values, (rows, n)).astype(float)
    time = rng.integers(0, values, (rows, n)).astype(float)
    mem[rng.random((rows, n)) < 0.1] = np.inf
    time[rng.random((rows, n)) < 0.1] = np.inf
    m, t, src = reduce_rows(mem, time, resolution, max_width)
    expected = _reference(mem, time, resolution, max_width)
    assert src.shape[1] == max(1, max(len(e) for e in expected))
    for r, columns in enumerate(expected):
        assert list(src[r][src[r] >= 0]) == columns and all(src[r][len(columns):] == -1)
        assert list(m[r][:len(columns)]) == list(mem[r][columns]) and np.all(np.isinf(m[r][len(columns):]))
        assert list(t[r][:len(columns)]) == list(time[r][columns])


def _frontier_table(rng, x, y, width, values):
    """A [x, y, <=width] table of reduced frontiers (+inf padded), some rows empty."""
    mem = rng.integers(0, values, (x * y, 3 * width)).astype(float)
    time = rng.integers(0, values, (x * y, 3 * width)).astype(float)
    mem[rng.random(mem.shape) < 0.2] = np.inf
    m, t, _ = reduce_rows(mem, time, 0.0, width)
    return m.reshape(x, y, -1), t.reshape(x, y, -1)


def _shuffled_rows(rng, mem, time):
    """Each row's tuples in a random order (the same for memory and time)."""
    order = rng.permuted(np.broadcast_to(np.arange(mem.shape[-1]), mem.shape), axis=-1)
    return np.take_along_axis(mem, order, -1), np.take_along_axis(time, order, -1)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 5), st.integers(1, 5), st.integers(1, 5),
       st.sampled_from([None, 1, 2, 3, 6]), st.integers(0, 2**32 - 1), st.sampled_from([4, 40, 1000]),
       st.booleans())
def test_union_of_products_equals_reducing_every_candidate(h, k, j, wa, wb, max_width, seed, values, shuffled):
    """Node elimination without its candidate array keeps what reduce_rows keeps of all of them:
    the same tuples, columns (ties: the lowest) and thinning; few values make many ties. Also when
    the tables' rows are not in memory order (the staircase is then looked up, not walked)."""
    rng = np.random.default_rng(seed)
    a_mem, a_time = _frontier_table(rng, h, k, wa, values)
    b_mem, b_time = _frontier_table(rng, k, j, wb, values)
    if shuffled:
        a_mem, a_time = _shuffled_rows(rng, a_mem, a_time)
        b_mem, b_time = _shuffled_rows(rng, b_mem, b_time)
    mem = a_mem[:, None, :, :, None] + np.moveaxis(b_mem, 1, 0)[None, :, :, None, :]    # [h, j, k, wa, wb]
    time = a_time[:, None, :, :, None] + np.moveaxis(b_time, 1, 0)[None, :, :, None, :]
    expected = reduce_rows(mem.reshape(h * j, -1), time.reshape(h * j, -1), 0.0, max_width)
    found = union_of_products(a_mem, a_time, b_mem, b_time, max_width)
    for e, f in zip(expected, found):
        np.testing.assert_array_equal(e, f)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0, 2.5, 3.0, np.inf]), max_size=90), st.integers(0, 10), st.booleans(),
       st.randoms(use_true_random=False))
def test_indices_sort_as_numpys_stable_argsort_and_by_ties(values, skip, with_ties, random):
    """sort_indices over keys[first:end]: equal to np.argsort(kind="mergesort") + first without
    ties, to np.lexsort((ties, keys)) + first with them (runs of 16 and merges past them)."""
    keys = np.array(values, dtype=float)
    first = min(skip, len(keys))
    ties = np.array(random.sample(range(1000), len(keys)), dtype=np.int64) if with_ties else np.empty(0, np.int64)
    order, scratch = np.full(len(keys) + 1, -7, dtype=np.int64), np.full(len(keys) + 1, -7, dtype=np.int64)
    sort_indices(keys, ties, first, len(keys), order, scratch)
    part = keys[first:]
    expected = (np.lexsort((ties[first:], part)) if with_ties else np.argsort(part, kind="mergesort")) + first
    assert order[:len(part)].tolist() == expected.tolist()
