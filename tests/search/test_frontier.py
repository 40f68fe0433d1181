import numpy as np
from hypothesis import given, settings, strategies as st

from stratagem.search.frontier import Frontier, is_frontier, memory_buckets, reduce_rows


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
