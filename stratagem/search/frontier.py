"""Frontier algebra (TensorOpt §3.1, Algorithm 1), vectorized.

A frontier is a set of (memory, time) tuples none of which dominates another. TensorOpt's three
operations on sets of strategy tuples:

    product  F (x) F' = {(m + m', t + t') : (m, t) in F, (m', t') in F'}
    union    F  u  F' = F  +  F'
    reduce   keep a tuple iff its time is below every tuple of smaller memory (Algorithm 1)

FT applies them to *tables* of frontiers, one per combination of configurations (a node's table is
indexed by its configuration k, an edge's by the pair (k, p)), so every operation here works on
whole batches at once: `reduce_rows` reduces each row of a 2-D candidate array independently, and
`product` builds the candidates of a product by broadcasting. Empty slots hold +inf.

Algorithm 1 per row, compiled (numba, no GIL: FT's threads reduce rows side by side): order the
candidates by memory; of each group of equal memory the fastest survives iff its time is strictly
below every earlier group's; survivors are compacted to the front of the row.

Node elimination's product-union-reduce, reduce_k A[h, k] (x) B[k, j], has K * W_a * W_b
candidates per output; `union_of_products` finds the same survivors without building them,
skipping what the candidates kept so far strictly dominate (whole configurations k, whole rows
of A's tuples), which can neither survive nor change what does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

INF = np.inf


def memory_buckets(mem: np.ndarray, resolution: float) -> np.ndarray:
    """Relative buckets: memories within a factor (1 + resolution) of each other share one."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(mem), np.floor(np.log1p(mem) / np.log1p(resolution)), np.inf)


def reduce_rows(mem: np.ndarray, time: np.ndarray, resolution: float = 0.0,
                max_width: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pareto-reduce each row of (mem, time) [G, C]; return (mem, time, source column) [G, L].

    Rows come back sorted by memory ascending (time descending), padded with +inf and column -1,
    with L the largest frontier over all rows (at least 1). With `resolution` > 0, memories in
    the same relative bucket (`memory_buckets`) count as equal, so each bucket keeps only its
    fastest tuple: an approximation that bounds frontier sizes; 0 is exact. With `max_width`, a
    row with more survivors keeps `max_width` of them spread evenly along it (`_thin`), always the
    least-memory and the least-time ends: also an approximation, None is exact. Ties keep the
    lowest column: of equal (memory, time) tuples, the first.
    """
    mem = np.ascontiguousarray(mem, dtype=np.float64)
    time = np.ascontiguousarray(time, dtype=np.float64)
    if mem.ndim != 2:
        raise ValueError(f"reduce_rows needs 2-D arrays, got shape {mem.shape}")
    if mem.shape[1] == 0:
        return (np.full((mem.shape[0], 1), INF), np.full((mem.shape[0], 1), INF),
                np.full((mem.shape[0], 1), -1, dtype=np.int64))
    key = mem if resolution <= 0 else np.ascontiguousarray(memory_buckets(mem, resolution))
    kept, counts = _survivors(key, mem, time, -1 if max_width is None else int(max_width))
    width = max(1, int(counts.max()))
    src = kept[:, :width]
    valid = src >= 0
    rows = np.arange(mem.shape[0])[:, None]
    safe = np.where(valid, src, 0)
    return (np.where(valid, mem[rows, safe], INF), np.where(valid, time[rows, safe], INF),
            np.where(valid, src, -1))


@njit(cache=True, nogil=True)
def _survivors(key, mem, time, max_width):  # pragma: no cover - compiled
    """Per row, the columns of its frontier in key order, thinned to max_width (-1: no limit),
    padded with -1; and each row's count. Algorithm 1 by groups of equal key: a group's fastest
    tuple (lowest column on a tie) survives iff its time is below every earlier group's, and both
    its memory and time are finite. Only the row's candidates are sorted: columns no sample
    column beats (`_candidates`)."""
    rows, n = key.shape
    kept = np.full((rows, n if max_width < 0 else min(n, max(max_width, 2))), -1, dtype=np.int64)
    counts = np.zeros(rows, dtype=np.int64)
    front = np.empty(n, dtype=np.int64)
    for r in range(rows):
        candidates = _candidates(mem[r], time[r])
        order = candidates[np.argsort(key[r][candidates], kind="mergesort")]
        best, c, i, m = np.inf, 0, 0, len(order)
        while i < m:
            group = key[r, order[i]]
            fastest, column = np.inf, -1
            while i < m and key[r, order[i]] == group:
                if time[r, order[i]] < fastest:
                    fastest, column = time[r, order[i]], order[i]
                i += 1
            if column >= 0 and fastest < best and np.isfinite(mem[r, column]):
                front[c] = column
                c += 1
            best = min(best, fastest)
            if not group < np.inf:        # +inf (or nan) keys sort last: nothing after survives
                break
        c = _thin(front, c, max_width)
        kept[r, :c] = front[:c]
        counts[r] = c
    return kept, counts


@njit(cache=True, nogil=True)
def _candidates(mem, time):  # pragma: no cover - compiled
    """The columns, in order, that no sample column beats: column j is dropped when some sampled
    s has mem[s] <= mem[j] and time[s] < time[j]. Exact for any tie rule and any memory buckets
    monotone in memory: s, or a faster tuple of s's group, comes first and is faster than j. The
    sample is every (n / 64)-th column and the fastest one, as a staircase (its frontier, memory
    ascending); most columns lie at or above the fastest sample's memory and take one comparison."""
    n = len(mem)
    step = max(1, n // 64)
    sample = np.empty(n // step + 2, dtype=np.int64)
    k = 0
    for j in range(0, n, step):
        sample[k] = j
        k += 1
    sample[k] = np.argmin(time)
    k += 1
    sample = sample[:k]
    sample = sample[np.argsort(mem[sample])]
    stair_mem = np.empty(k)
    stair_time = np.empty(k)
    steps, least = 0, np.inf
    for i in range(k):                       # the sample's staircase: its own frontier
        if time[sample[i]] < least:
            least = time[sample[i]]
            stair_mem[steps], stair_time[steps] = mem[sample[i]], least
            steps += 1
    out = np.empty(n, dtype=np.int64)
    c = 0
    for j in range(n):
        if steps and mem[j] >= stair_mem[steps - 1]:         # at or above the fastest sample
            if stair_time[steps - 1] < time[j]:
                continue
        else:
            at = np.searchsorted(stair_mem[:steps], mem[j], side="right") - 1
            if at >= 0 and stair_time[at] < time[j]:
                continue
        out[c] = j
        c += 1
    return out[:c]


@njit(cache=True, nogil=True)
def _thin(row, count, width):  # pragma: no cover - compiled
    """Keep, of `count` survivors at the front of `row`, the first of each of `width` - 1 equal
    rank buckets and the last (when there are more than `width`); compact them; their number."""
    if width < 0 or count <= width:
        return count
    span = max(count - 1, 1)
    c, previous = 0, -1
    for rank in range(count):
        bucket = (rank * (width - 1)) // span
        if rank == 0 or bucket != previous or rank == count - 1:
            row[c] = row[rank]
            c += 1
        previous = bucket
    row[c:count] = -1
    return c


def union_of_products(a_mem: np.ndarray, a_time: np.ndarray, b_mem: np.ndarray, b_time: np.ndarray,
                      max_width: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """reduce over k of A[h, k] (x) B[k, j], for every (h, j): node elimination's product-union-
    reduce without building its K * W_a * W_b candidates per row. A [H, K, W_a] and B [K, J, W_b]
    are frontier tables (+inf padded); returns (mem, time, column) [H * J, L] exactly as
    `reduce_rows` returns them for the candidate array whose column k * W_a * W_b + a * W_b + b
    holds A[h, k, a] + B[k, j, b] (exact, resolution 0), thinned to `max_width` alike.

    Per (h, j), configurations k are visited fastest ideal point first (A's least memory plus B's,
    A's least time plus B's); a k whose ideal point the candidates kept so far beat (one with no
    more memory and less time) is skipped whole, then each tuple a of A[h, k] whose sum with B's
    ideal point they beat, then every sum they beat (walking the staircase along B's row, memory
    ascending). What is skipped is strictly dominated, so it neither survives reduce_rows nor
    changes what does. The staircase takes a configuration's sums at once: its tuples a seldom
    beat each other (A[h, k] is a frontier), and merging per tuple took 2.4x the time where W_b
    is 1. Rows are visited with the larger table's index outermost, so its slice stays in cache."""
    kept, mem, time, counts = _union_of_products(
        np.ascontiguousarray(a_mem, dtype=np.float64), np.ascontiguousarray(a_time, dtype=np.float64),
        np.ascontiguousarray(b_mem, dtype=np.float64), np.ascontiguousarray(b_time, dtype=np.float64),
        -1 if max_width is None else int(max_width))
    width = max(1, int(counts.max())) if len(counts) else 1
    return mem[:, :width], time[:, :width], kept[:, :width]


@njit(cache=True, nogil=True)
def _union_of_products(a_mem, a_time, b_mem, b_time, max_width):  # pragma: no cover - compiled
    rows_a, ks, wa = a_mem.shape
    cols_b, wb = b_mem.shape[1], b_mem.shape[2]
    n = ks * wa * wb
    cap = n if max_width < 0 else min(n, max(max_width, 2))
    kept = np.full((rows_a * cols_b, cap), -1, dtype=np.int64)
    out_mem = np.full((rows_a * cols_b, cap), np.inf)
    out_time = np.full((rows_a * cols_b, cap), np.inf)
    counts = np.zeros(rows_a * cols_b, dtype=np.int64)
    a_least = _least(a_mem, a_time)
    b_least = _least(b_mem, b_time)
    ideal_mem, ideal_time = np.empty(ks), np.empty(ks)
    cand_mem, cand_time = np.empty(n), np.empty(n)
    cand_col = np.empty(n, dtype=np.int64)
    stair_mem, stair_time = np.empty(n + 1), np.empty(n + 1)
    merged_mem, merged_time = np.empty(n + 1), np.empty(n + 1)
    front = np.empty(n, dtype=np.int64)
    order, scratch = np.empty(max(n, ks), dtype=np.int64), np.empty(max(n, ks), dtype=np.int64)
    by_ideal = np.empty(ks, dtype=np.int64)
    no_ties = np.empty(0, dtype=np.int64)
    b_outer = cols_b * wb > rows_a * wa        # sweep the larger table once, the smaller per row
    for outer in range(cols_b if b_outer else rows_a):
        for inner in range(rows_a if b_outer else cols_b):
            h, j = (inner, outer) if b_outer else (outer, inner)
            for k in range(ks):
                ideal_mem[k] = a_least[h, k, 0] + b_least[k, j, 0]
                ideal_time[k] = a_least[h, k, 1] + b_least[k, j, 1]
            sort_indices(ideal_time, no_ties, 0, ks, by_ideal, scratch)
            c, steps = 0, 0
            for k in by_ideal:
                if not (np.isfinite(ideal_mem[k]) and np.isfinite(ideal_time[k])):
                    continue
                if _beaten(stair_mem, stair_time, steps, ideal_mem[k], ideal_time[k]):
                    continue
                first = c
                for a in range(wa):
                    am, at = a_mem[h, k, a], a_time[h, k, a]
                    if not (am < np.inf and at < np.inf) or _beaten(
                            stair_mem, stair_time, steps, am + b_least[k, j, 0], at + b_least[k, j, 1]):
                        continue
                    at_most, previous = -1, -np.inf
                    for b in range(wb):
                        m, t = am + b_mem[k, j, b], at + b_time[k, j, b]
                        if not (m < np.inf and t < np.inf):
                            continue
                        at_most, previous = _step_at_most(stair_mem, steps, at_most, previous, m), m
                        if at_most >= 0 and stair_time[at_most] < t:
                            continue
                        cand_mem[c], cand_time[c], cand_col[c] = m, t, (k * wa + a) * wb + b
                        c += 1
                if c > first:       # one k's sums: the staircase grows once per configuration
                    steps = _merge_stair(stair_mem, stair_time, steps, cand_mem, cand_time, cand_col, first, c,
                                         merged_mem, merged_time, order, scratch)
            row = h * cols_b + j
            count = _exact_front(cand_mem, cand_time, cand_col, c, front, order, scratch)
            counts[row] = write_front(kept, out_mem, out_time, row, front, count, max_width, cand_col, cand_mem,
                                      cand_time)
    return kept, out_mem, out_time, counts


@njit(cache=True, nogil=True)
def write_front(kept, out_mem, out_time, row, front, count, max_width, col, mem, time):  # pragma: no cover
    """Row `row` of the outputs: the `count` survivors `front` indexes in (col, mem, time), thinned
    to `max_width` (`_thin`); their number."""
    count = _thin(front, count, max_width)
    for i in range(count):
        kept[row, i] = col[front[i]]
        out_mem[row, i] = mem[front[i]]
        out_time[row, i] = time[front[i]]
    return count


@njit(cache=True, nogil=True)
def _least(mem, time):  # pragma: no cover - compiled
    """Per row of a [X, Y, W] table, (least finite memory, least finite time); +inf when empty."""
    x, y, w = mem.shape
    return least_of_rows(mem.reshape(x * y, w), time.reshape(x * y, w)).reshape(x, y, 2)


@njit(cache=True, nogil=True)
def least_of_rows(mem, time):  # pragma: no cover - compiled
    """Per row of [R, W], (least finite memory, least finite time) over its tuples with both
    finite; +inf when it has none."""
    rows, width = mem.shape
    out = np.full((rows, 2), np.inf)
    for r in range(rows):
        for a in range(width):
            if mem[r, a] < np.inf and time[r, a] < np.inf:
                out[r, 0] = min(out[r, 0], mem[r, a])
                out[r, 1] = min(out[r, 1], time[r, a])
    return out


@njit(cache=True, nogil=True)
def _last_at_most(stair_mem, steps, m):  # pragma: no cover - compiled
    """The last step with memory <= m (-1: none), by bisection."""
    lo, hi = 0, steps
    while lo < hi:
        mid = (lo + hi) // 2
        if stair_mem[mid] <= m:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@njit(cache=True, nogil=True)
def _step_at_most(stair_mem, steps, at, previous, m):  # pragma: no cover - compiled
    """The last step with memory <= m, given `at`, the last at most `previous`: walked on from there
    where m >= previous (a row's sums in memory order), else found by bisection."""
    if m < previous:
        return _last_at_most(stair_mem, steps, m)
    while at + 1 < steps and stair_mem[at + 1] <= m:
        at += 1
    return at


@njit(cache=True, nogil=True)
def _beaten(stair_mem, stair_time, steps, m, t):  # pragma: no cover - compiled
    """Whether a kept candidate has memory <= m and time < t (the staircase: memory ascending,
    each step the least time of every candidate up to its memory): every candidate at (m, t) or
    above is strictly dominated."""
    at = _last_at_most(stair_mem, steps, m)
    return at >= 0 and stair_time[at] < t


@njit(cache=True, nogil=True)
def _merge_stair(stair_mem, stair_time, steps, cand_mem, cand_time, cand_col, first, end, merged_mem, merged_time,
                 order, scratch):  # pragma: no cover - compiled
    """The staircase of the old steps and the candidates first..end-1; its number of steps.
    `order`, `scratch`: room for sorting them (nothing is allocated per call); of equal memory
    the least time is kept, whatever their order (by column)."""
    sort_indices(cand_mem, cand_col, first, end, order, scratch)
    count = end - first
    i, o, total, least = 0, 0, 0, np.inf
    while i < steps or o < count:
        if o >= count or (i < steps and stair_mem[i] <= cand_mem[order[o]]):
            m, t = stair_mem[i], stair_time[i]
            i += 1
        else:
            m, t = cand_mem[order[o]], cand_time[order[o]]
            o += 1
        if t < least:
            least = t
            if total and merged_mem[total - 1] == m:
                merged_time[total - 1] = t
            else:
                merged_mem[total], merged_time[total] = m, t
                total += 1
    stair_mem[:total] = merged_mem[:total]
    stair_time[:total] = merged_time[:total]
    return total


@njit(cache=True, nogil=True)
def sort_indices(keys, ties, first, end, order, scratch):  # pragma: no cover - compiled
    """order[:end - first] = the indices first..end-1 sorted by keys ascending, equal keys by
    `ties` (or by index where `ties` is empty: np.argsort(keys[first:end], kind="mergesort") +
    first), without allocating: insertion sort on runs of 16, then merges between `order` and
    `scratch` (each at least end - first long). The kernels sort per row of output, millions of
    times a plan; NumPy's argsort allocates each time."""
    n = end - first
    for i in range(n):
        order[i] = first + i
    run = 16
    for lo in range(0, n, run):
        hi = min(lo + run, n)
        for i in range(lo + 1, hi):
            x = order[i]
            j = i - 1
            while j >= lo and _after(keys, ties, order[j], x):
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = x
    width, in_order = run, True
    while width < n:
        src, dst = (order, scratch) if in_order else (scratch, order)
        for lo in range(0, n, 2 * width):
            mid, hi = min(lo + width, n), min(lo + 2 * width, n)
            i, j, o = lo, mid, lo
            while i < mid and j < hi:
                if _after(keys, ties, src[i], src[j]):
                    dst[o] = src[j]
                    j += 1
                else:
                    dst[o] = src[i]
                    i += 1
                o += 1
            while i < mid:
                dst[o] = src[i]
                i += 1
                o += 1
            while j < hi:
                dst[o] = src[j]
                j += 1
                o += 1
        in_order = not in_order
        width *= 2
    if not in_order:
        order[:n] = scratch[:n]


@njit(cache=True, nogil=True)
def _after(keys, ties, a, b):  # pragma: no cover - compiled
    """Whether index a sorts after index b: a larger key, or an equal key and a larger tie (index)."""
    if keys[a] != keys[b]:
        return keys[a] > keys[b]
    return ties[a] > ties[b] if len(ties) else a > b


@njit(cache=True, nogil=True)
def _exact_front(mem, time, col, count, front, order, scratch):  # pragma: no cover - compiled
    """Algorithm 1 on the first `count` candidates with reduce_rows' tie rule (groups of equal
    memory in column order; a group's fastest, lowest column on a tie, survives iff its time is
    below every earlier group's): their indices, memory ascending, in `front`; their number.
    `order`, `scratch`: room for sorting them."""
    sort_indices(mem, col, 0, count, order, scratch)
    best, c, i = np.inf, 0, 0
    while i < count:
        group = mem[order[i]]
        fastest, pick = np.inf, -1
        while i < count and mem[order[i]] == group:
            if time[order[i]] < fastest:
                fastest, pick = time[order[i]], order[i]
            i += 1
        if pick >= 0 and fastest < best:
            front[c] = pick
            c += 1
        best = min(best, fastest)
    return c


@dataclass(frozen=True)
class Frontier:
    """A reduced set of (memory, time) tuples, memory ascending; `payload[i]` unrolls tuple i."""

    mem: np.ndarray
    time: np.ndarray
    payload: tuple = ()

    def __len__(self) -> int:
        return len(self.mem)

    @staticmethod
    def reduce(mem: np.ndarray, time: np.ndarray, payload: list | tuple = ()) -> "Frontier":
        m, t, src = reduce_rows(np.asarray(mem, dtype=float)[None, :], np.asarray(time, dtype=float)[None, :])
        keep = src[0] >= 0
        chosen = src[0][keep]
        return Frontier(m[0][keep], t[0][keep], tuple(payload[i] for i in chosen) if len(payload) else ())

    def pairs(self) -> list[tuple[float, float]]:
        return list(zip(self.mem.tolist(), self.time.tolist()))


def is_frontier(mem: np.ndarray, time: np.ndarray) -> bool:
    """Memory strictly ascending and time strictly descending: no tuple dominates another."""
    return bool(np.all(np.diff(mem) > 0) and np.all(np.diff(time) < 0))
