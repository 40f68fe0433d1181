"""FT's product-union-reduce over up to three frontier tables, without its candidate array.

Every FT step is one combine (search.tables): for each output index o,

    result[o] = reduce( union over k of  T_0[i_0(o, k)] (x) T_1[i_1(o, k)] (x) T_2[i_2(o, k)] )

where each term's row is an affine function of (o, k): i_t(o, k) = base_t + sum_d c_t,d * o_d +
c_t,k * k over its table flattened to rows [R_t, W_t] (its index spec: an output dim, k, or a
fixed configuration). Built as an array, the candidates of one output number K * W_0 * W_1 * W_2
(column ((k * W_0 + a) * W_1 + b) * W_2 + e), and reduce_rows keeps their frontier. Here they are
visited instead, into a staircase that is Algorithm 1's survivors of what was visited so far:

    for each o:  ideal_k = sum_t least(T_t[i_t(o, k)])       (least memory, least time; rounding
                                                              is monotone, so every candidate of k
                                                              is no better in either)
        for k by ideal time:   skip k if a step beats ideal_k
            for a in T_0's row: skip a if a step beats a + least(T_1) + least(T_2)
                for b in T_1's row: skip (a, b) if a step beats it with least(T_2) added
                    for e in T_2's row: keep a + b + e unless a step beats it (the step
                                        found by walking on as the sums' memory grows)
            merge what the k's kept into the staircase once MERGE_AT wait, and at the end
                                        (`_merged`: one sort and one sweep; a sum the staircase
                                        would have beaten a little earlier is merged, and drops)
        the staircase, thinned as reduce_rows thins

"Beats": a step with no more memory and strictly less time. What is skipped is strictly
dominated, so it neither survives Algorithm 1 nor changes what does; the staircase keeps
reduce_rows' tie rule (of equal memory the fastest, of equal memory and time the lowest column).
The survivors, their columns and order are thus exactly reduce_rows' over the whole candidate
array, and the sums are made in the same order (term 0, then 1, then 2). Fewer terms are padded
with a zero table of width 1, which changes neither the sums nor the columns.

When T_2's row does not depend on k (the linear DP's N_i[(o0,)]), it is added after the union:
the frontier of {x + e} is the frontier of {x on the frontier of the union over k of T_0 (x) T_1}
+ e, since adding e to both keeps a dominated candidate dominated (rounding is monotone). The
sums are the same ((a + b) + e) and so are the tuples kept; the column is reduce_rows' but where
two sums differed by less than rounding erases once e is added (then the kept column costs
exactly what reduce_rows' does). Candidates per output fall from K * W_0 * W_1 * W_2 to
K * W_0 * W_1 plus the union's frontier times W_2: 4x faster on a 48-layer decoder's DP steps.

The planner uses it for the combines that union over k other than node elimination (leaf
elimination and the linear DP's steps), where it is 1.5-2x faster than building the candidates;
node elimination has its own (frontier.union_of_products). A product of two tables without k
(a leaf folded into its edge, parallel edges merged, a fixed node's edge) is a merge instead
(`product_of_two`): every row of a frontier table is memory ascending, so a + B's row is a sorted
list, and a heap over A's tuples yields all candidates in (memory, column) order, reduce_rows'
order, through Algorithm 1 without a sort (2.5x faster on hf:llama-7b's leaf folds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from stratagem.search.frontier import _beaten, _step_at_most, least_of_rows, sort_indices, write_front

MAX_TERMS = 3
MERGE_AT = 64        # union_of_terms: kept sums merged into the staircase once this many wait (12 % faster
                     # than per k on a 48-layer decoder's DP steps: fewer sweeps of a long staircase)


@dataclass(frozen=True)
class Terms:
    """A combine's terms made ready for `union_of_terms`, padded to three: each term's (mem, time)
    as C-contiguous [R_t, W_t] and its rows' least tuple (`frontier.least_of_rows`); `coefficients`
    [3, D + 1], a term's row step per output dim and per k; `bases` [3], its row at o = 0, k = 0."""
    mems: tuple[np.ndarray, ...]
    times: tuple[np.ndarray, ...]
    leasts: tuple[np.ndarray, ...]
    coefficients: np.ndarray
    bases: np.ndarray


def prepared_terms(tables: list[tuple[np.ndarray, np.ndarray]], coefficients: np.ndarray,
                   bases: np.ndarray) -> Terms:
    """`Terms` of 1 to 3 tables, each (mem, time) [R_t, W_t]."""
    if not 1 <= len(tables) <= MAX_TERMS:
        raise ValueError(f"union_of_terms takes 1 to {MAX_TERMS} terms, got {len(tables)}")
    mems, times, leasts = [], [], []
    for mem, time in tables:
        mems.append(np.ascontiguousarray(mem, dtype=np.float64))
        times.append(np.ascontiguousarray(time, dtype=np.float64))
        leasts.append(least_of_rows(mems[-1], times[-1]))
    coefs = np.zeros((MAX_TERMS, np.shape(coefficients)[1]), dtype=np.int64)
    coefs[:len(tables)] = coefficients
    base = np.zeros(MAX_TERMS, dtype=np.int64)
    base[:len(tables)] = bases
    while len(mems) < MAX_TERMS:          # a zero table of width 1: adds 0.0, column times 1
        mems.append(np.zeros((1, 1)))
        times.append(np.zeros((1, 1)))
        leasts.append(np.zeros((1, 2)))
    return Terms(tuple(mems), tuple(times), tuple(leasts), coefs, base)


def union_of_terms(terms: Terms, box_starts: tuple[int, ...], box_sizes: tuple[int, ...], k_size: int,
                   max_width: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The combine over the output box (`box_starts`, `box_sizes`, rows in row-major order):
    (mem, time, column) [rows, L] as reduce_rows returns them for the whole candidate array."""
    (m0, m1, m2), (t0, t1, t2), (l0, l1, l2) = terms.mems, terms.times, terms.leasts
    kept, mem, time, counts = _union_of_terms(
        m0, t0, l0, m1, t1, l1, m2, t2, l2, terms.coefficients, terms.bases,
        np.asarray(box_starts, dtype=np.int64), np.asarray(box_sizes, dtype=np.int64), int(k_size),
        -1 if max_width is None else int(max_width))
    width = max(1, int(counts.max())) if len(counts) else 1
    return mem[:, :width], time[:, :width], kept[:, :width]


@njit(cache=True, nogil=True)
def _union_of_terms(m0, t0, l0, m1, t1, l1, m2, t2, l2, coefs, bases, starts, sizes, ks,
                    max_width):  # pragma: no cover - compiled
    dims = len(sizes)
    rows = 1
    for d in range(dims):
        rows *= sizes[d]
    w0, w1, w2 = m0.shape[1], m1.shape[1], m2.shape[1]
    n = ks * w0 * w1 * w2
    cap = n if max_width < 0 else min(n, max(max_width, 2))
    kept = np.full((rows, cap), -1, dtype=np.int64)
    out_mem = np.full((rows, cap), np.inf)
    out_time = np.full((rows, cap), np.inf)
    counts = np.zeros(rows, dtype=np.int64)
    last_later = ks > 1 and w2 > 1 and coefs[2, dims] == 0     # T_2 the same for every k: added after
    inner = 1 if last_later else w2                             # T_2's tuples in the union over k
    ideal_mem, ideal_time = np.empty(ks), np.empty(ks)
    order = np.zeros(ks, dtype=np.int64)
    unioned = ks * w0 * w1 * inner                   # candidates of the union over k
    added = n if last_later else w0 * w1 * w2         # of one k, or of T_2 added to the union's
    union_mem, union_time = np.empty(unioned + 1), np.empty(unioned + 1)
    union_col = np.empty(unioned + 1, dtype=np.int64)
    stair_mem, stair_time = np.empty(n + 1 if last_later else 1), np.empty(n + 1 if last_later else 1)
    stair_col = np.empty(n + 1 if last_later else 1, dtype=np.int64)
    merged_mem, merged_time = np.empty(n + 1), np.empty(n + 1)
    merged_col = np.empty(n + 1, dtype=np.int64)
    pending = max(added, unioned)                    # what waits to be merged: up to a row's union
    new_mem, new_time = np.empty(pending), np.empty(pending)
    new_col = np.empty(pending, dtype=np.int64)
    front = np.empty(n + 1, dtype=np.int64)
    sorted_at, scratch = np.empty(max(pending, ks), dtype=np.int64), np.empty(max(pending, ks), dtype=np.int64)
    no_ties = np.empty(0, dtype=np.int64)
    at = np.empty(3, dtype=np.int64)                 # each term's row at k = 0
    for row in range(rows):
        rest = row
        at[:] = bases
        for d in range(dims - 1, -1, -1):
            o = starts[d] + rest % sizes[d]
            rest //= sizes[d]
            for t in range(3):
                at[t] += coefs[t, d] * o
        r2 = at[2]
        l2m, l2t = (0.0, 0.0) if last_later else (l2[r2, 0], l2[r2, 1])
        if ks > 1:
            for k in range(ks):
                r0, r1, r2 = at[0] + coefs[0, dims] * k, at[1] + coefs[1, dims] * k, at[2] + coefs[2, dims] * k
                ideal_mem[k] = l0[r0, 0] + l1[r1, 0] + (0.0 if last_later else l2[r2, 0])
                ideal_time[k] = l0[r0, 1] + l1[r1, 1] + (0.0 if last_later else l2[r2, 1])
            sort_indices(ideal_time, no_ties, 0, ks, order, scratch)
        steps, c = 0, 0
        for k in order:
            r0, r1, r2 = at[0] + coefs[0, dims] * k, at[1] + coefs[1, dims] * k, at[2] + coefs[2, dims] * k
            if not last_later:
                l2m, l2t = l2[r2, 0], l2[r2, 1]
            if ks > 1 and (not (ideal_mem[k] < np.inf and ideal_time[k] < np.inf)
                           or _beaten(union_mem, union_time, steps, ideal_mem[k], ideal_time[k])):
                continue
            for a in range(w0):
                am, at_ = m0[r0, a], t0[r0, a]
                if not (am < np.inf and at_ < np.inf) or (w1 * inner > 1 and _beaten(
                        union_mem, union_time, steps, am + l1[r1, 0] + l2m, at_ + l1[r1, 1] + l2t)):
                    continue
                step, last = -1, np.inf       # a row's first sum: found by bisection, then walked on
                for b in range(w1):
                    bm, bt = am + m1[r1, b], at_ + t1[r1, b]
                    if not (bm < np.inf and bt < np.inf) or (inner > 1 and _beaten(
                            union_mem, union_time, steps, bm + l2m, bt + l2t)):
                        continue
                    for e in range(inner):
                        m, t = (bm, bt) if last_later else (bm + m2[r2, e], bt + t2[r2, e])
                        if not (m < np.inf and t < np.inf):
                            continue
                        step, last = _step_at_most(union_mem, steps, step, last, m), m   # rows: memory ascending
                        if not (step >= 0 and union_time[step] < t):      # not beaten
                            new_mem[c], new_time[c], new_col[c] = m, t, ((k * w0 + a) * w1 + b) * inner + e
                            c += 1
            if c >= MERGE_AT:
                steps = _merged(union_mem, union_time, union_col, steps, new_mem, new_time, new_col, c,
                                merged_mem, merged_time, merged_col, sorted_at, scratch)
                c = 0
        steps = _merged(union_mem, union_time, union_col, steps, new_mem, new_time, new_col, c,
                        merged_mem, merged_time, merged_col, sorted_at, scratch)
        if last_later:             # the union's staircase plus each of T_2's tuples
            c = 0
            for s in range(steps):
                for e in range(w2):
                    m, t = union_mem[s] + m2[r2, e], union_time[s] + t2[r2, e]
                    if m < np.inf and t < np.inf:
                        new_mem[c], new_time[c], new_col[c] = m, t, union_col[s] * w2 + e
                        c += 1
            steps = _merged(stair_mem, stair_time, stair_col, 0, new_mem, new_time, new_col, c,
                            merged_mem, merged_time, merged_col, sorted_at, scratch)
            _write_staircase(kept, out_mem, out_time, counts, row, front, steps, max_width, stair_col, stair_mem,
                           stair_time)
        else:
            _write_staircase(kept, out_mem, out_time, counts, row, front, steps, max_width, union_col, union_mem,
                           union_time)
    return kept, out_mem, out_time, counts


@njit(cache=True, nogil=True)
def _write_staircase(kept, out_mem, out_time, counts, row, front, steps, max_width, col, mem,
                   time):  # pragma: no cover - compiled
    """Row `row` of the outputs: a staircase of `steps` steps, thinned."""
    for i in range(steps):
        front[i] = i
    counts[row] = write_front(kept, out_mem, out_time, row, front, steps, max_width, col, mem, time)


@njit(cache=True, nogil=True)
def _merged(stair_mem, stair_time, stair_col, steps, new_mem, new_time, new_col, count, merged_mem,
            merged_time, merged_col, order, scratch):  # pragma: no cover - compiled
    """The staircase (memory ascending, time strictly descending) of its `steps` steps and `count`
    new candidates, in place: Algorithm 1 with reduce_rows' tie rule (of equal memory the
    fastest, of equal memory and time the lowest column). Its number of steps."""
    if count == 0:
        return steps
    sort_indices(new_mem, new_col, 0, count, order, scratch)     # a group's order is no matter: its best is taken
    i, o, total, least = 0, 0, 0, np.inf
    while i < steps or o < count:
        m = stair_mem[i] if o >= count or (i < steps and stair_mem[i] <= new_mem[order[o]]) else new_mem[order[o]]
        t, col = np.inf, -1                      # the group of memory m: its fastest, lowest column
        if i < steps and stair_mem[i] == m:
            t, col = stair_time[i], stair_col[i]
            i += 1
        while o < count and new_mem[order[o]] == m:
            j = order[o]
            if new_time[j] < t or (new_time[j] == t and new_col[j] < col):
                t, col = new_time[j], new_col[j]
            o += 1
        if t < least:
            least = t
            merged_mem[total], merged_time[total], merged_col[total] = m, t, col
            total += 1
    stair_mem[:total] = merged_mem[:total]
    stair_time[:total] = merged_time[:total]
    stair_col[:total] = merged_col[:total]
    return total


def product_of_two(terms: Terms, box_starts: tuple[int, ...], box_sizes: tuple[int, ...],
                   max_width: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The combine of two terms with no k over the output box, by merging sorted lists: each row
    of a frontier table is memory ascending (time descending), so a + B's row is a list sorted by
    (memory, column), and a heap over A's rows yields every candidate in the order reduce_rows
    sorts them; Algorithm 1 then runs as they come. (mem, time, column) [rows, L] as reduce_rows
    returns them; None if some row read is not memory ascending (the caller builds the
    candidates instead)."""
    (m0, m1, _), (t0, t1, _) = terms.mems, terms.times
    kept, mem, time, counts, sorted_rows = _product_of_two(
        m0, t0, m1, t1, terms.coefficients, terms.bases, np.asarray(box_starts, dtype=np.int64),
        np.asarray(box_sizes, dtype=np.int64), -1 if max_width is None else int(max_width))
    if not sorted_rows:
        return None
    width = max(1, int(counts.max())) if len(counts) else 1
    return mem[:, :width], time[:, :width], kept[:, :width]


@njit(cache=True, nogil=True)
def _finite_length(mem, time, r):  # pragma: no cover - compiled
    """How many tuples lead row r before its +inf padding; -1 if they are not memory ascending."""
    width = mem.shape[1]
    n = 0
    while n < width and mem[r, n] < np.inf and time[r, n] < np.inf:
        if n and not mem[r, n - 1] < mem[r, n]:
            return -1
        n += 1
    for i in range(n, width):
        if mem[r, i] < np.inf and time[r, i] < np.inf:
            return -1
    return n


@njit(cache=True, nogil=True)
def _product_of_two(m0, t0, m1, t1, coefs, bases, starts, sizes, max_width):  # pragma: no cover
    dims = len(sizes)
    rows = 1
    for d in range(dims):
        rows *= sizes[d]
    w0, w1 = m0.shape[1], m1.shape[1]
    cap = w0 * w1 if max_width < 0 else min(w0 * w1, max(max_width, 2))
    kept = np.full((rows, cap), -1, dtype=np.int64)
    out_mem = np.full((rows, cap), np.inf)
    out_time = np.full((rows, cap), np.inf)
    counts = np.zeros(rows, dtype=np.int64)
    heap_mem = np.empty(w0)
    heap_col = np.empty(w0, dtype=np.int64)
    front, ranks = np.empty(w0 * w1 + 1, dtype=np.int64), np.empty(w0 * w1 + 1, dtype=np.int64)
    front_mem, front_time = np.empty(w0 * w1 + 1), np.empty(w0 * w1 + 1)
    for row in range(rows):
        rest, r0, r1 = row, bases[0], bases[1]
        for d in range(dims - 1, -1, -1):
            o = starts[d] + rest % sizes[d]
            rest //= sizes[d]
            r0 += coefs[0, d] * o
            r1 += coefs[1, d] * o
        n0, n1 = _finite_length(m0, t0, r0), _finite_length(m1, t1, r1)
        if n0 < 0 or n1 < 0:
            return kept, out_mem, out_time, counts, False
        size = 0                      # heap of A's rows, each at its next B tuple: (mem, column)
        if n1:
            for a in range(n0):
                size = _push(heap_mem, heap_col, size, m0[r0, a] + m1[r1, 0], a * w1)
        c, best = 0, np.inf
        while size:
            group = heap_mem[0]
            fastest, pick = np.inf, -1
            while size and heap_mem[0] == group:
                col = heap_col[0]
                a, b = col // w1, col % w1
                t = t0[r0, a] + t1[r1, b]
                if t < fastest:
                    fastest, pick = t, col
                size = _pop(heap_mem, heap_col, size)
                if b + 1 < n1:
                    size = _push(heap_mem, heap_col, size, m0[r0, a] + m1[r1, b + 1], col + 1)
            if pick >= 0 and fastest < best:
                front[c], front_mem[c], front_time[c] = pick, group, fastest
                c += 1
            best = min(best, fastest)
        for i in range(c):
            ranks[i] = i
        counts[row] = write_front(kept, out_mem, out_time, row, ranks, c, max_width, front, front_mem, front_time)
    return kept, out_mem, out_time, counts, True


@njit(cache=True, nogil=True)
def _before(mem_a, col_a, mem_b, col_b):  # pragma: no cover - compiled
    return mem_a < mem_b or (mem_a == mem_b and col_a < col_b)


@njit(cache=True, nogil=True)
def _push(heap_mem, heap_col, size, mem, col):  # pragma: no cover - compiled
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _before(mem, col, heap_mem[parent], heap_col[parent]):
            break
        heap_mem[i], heap_col[i] = heap_mem[parent], heap_col[parent]
        i = parent
    heap_mem[i], heap_col[i] = mem, col
    return size + 1


@njit(cache=True, nogil=True)
def _pop(heap_mem, heap_col, size):  # pragma: no cover - compiled
    size -= 1
    mem, col = heap_mem[size], heap_col[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _before(heap_mem[child + 1], heap_col[child + 1], heap_mem[child], heap_col[child]):
            child += 1
        if not _before(heap_mem[child], heap_col[child], mem, col):
            break
        heap_mem[i], heap_col[i] = heap_mem[child], heap_col[child]
        i = child
    heap_mem[i], heap_col[i] = mem, col
    return size


__all__ = ["MAX_TERMS", "Terms", "prepared_terms", "product_of_two", "union_of_terms"]
