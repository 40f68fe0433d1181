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

Algorithm 1 per row, vectorized: order the candidates by (memory, time); a candidate survives iff
its time is strictly below the running minimum of the times before it (`np.minimum.accumulate`);
survivors are compacted to the front of the row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    least-memory and the least-time ends: also an approximation, None is exact.
    """
    mem = np.asarray(mem, dtype=np.float64)
    time = np.asarray(time, dtype=np.float64)
    if mem.ndim != 2:
        raise ValueError(f"reduce_rows needs 2-D arrays, got shape {mem.shape}")
    if mem.shape[1] == 0:
        return (np.full((mem.shape[0], 1), INF), np.full((mem.shape[0], 1), INF),
                np.full((mem.shape[0], 1), -1, dtype=np.int64))
    key = mem if resolution <= 0 else memory_buckets(mem, resolution)
    by_time = np.argsort(time, axis=1, kind="stable")
    by_mem = np.argsort(np.take_along_axis(key, by_time, axis=1), axis=1, kind="stable")
    order = np.take_along_axis(by_time, by_mem, axis=1)
    m_sorted = np.take_along_axis(mem, order, axis=1)
    t_sorted = np.take_along_axis(time, order, axis=1)
    best_before = np.minimum.accumulate(t_sorted, axis=1)
    keep = np.isfinite(t_sorted) & np.isfinite(m_sorted)
    keep[:, 1:] &= t_sorted[:, 1:] < best_before[:, :-1]
    if max_width is not None and keep.sum(axis=1).max() > max_width:
        keep = _thin(keep, max_width)
    width = max(1, int(keep.sum(axis=1).max()))
    front = np.argsort(~keep, axis=1, kind="stable")[:, :width]
    kept = np.take_along_axis(keep, front, axis=1)
    out_m = np.where(kept, np.take_along_axis(m_sorted, front, axis=1), INF)
    out_t = np.where(kept, np.take_along_axis(t_sorted, front, axis=1), INF)
    out_src = np.where(kept, np.take_along_axis(order, front, axis=1), -1)
    return out_m, out_t, out_src


def _thin(keep: np.ndarray, width: int) -> np.ndarray:
    """Per row, keep the first survivor of each of `width` - 1 equal rank buckets, and the last."""
    count = keep.sum(axis=1, keepdims=True)
    rank = np.cumsum(keep, axis=1) - 1
    span = np.maximum(count - 1, 1)
    bucket = (rank * (width - 1)) // span
    previous = np.concatenate([np.full((keep.shape[0], 1), -1), bucket[:, :-1]], axis=1)
    first_in_bucket = keep & ((bucket != previous) | (rank == 0))
    last = keep & (rank == count - 1)
    thinned = first_in_bucket | last
    return np.where(count > width, thinned, keep)


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
