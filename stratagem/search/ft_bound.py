"""A certified lower bound on the (peak memory, time) frontier of a cost problem, and FT's gap to it
(issue 17: "exact, or a certified gap").

FT (search.ft, search.ft_peak) is exact only without its heuristics: frontiers thinned
(`max_width`), heuristic elimination (TensorOpt Eq. 7: a node's configuration fixed), hubs fixed
first, peak passes capped. The bound replaces each by a relaxation whose frontier has, for every
strategy S, a point no worse than S in both peak memory and time:

    thinning               from below (tables.lowered_rows): a frontier's tuples in `max_width`
                           groups of consecutive ranks, each stood for by (its first tuple's
                           memory, its last tuple's time), no worse than any tuple of the group
    heuristic elimination  weighted mini-bucket split (Dechter and Rish 2003): each of the node's C
                           edges gets its own copy of it, free to take its own configuration and
                           carrying 1/C of its costs (`FTOptions.relax`). Every strategy is one
                           of the split problem's, every copy alike, at the same cost, so the
                           split problem's exact frontier R bounds it.
    peak thresholds        intervals. Cut the terms (search.ft_peak's thresholds, the least the
                           floor: no strategy's largest term is lower) into intervals (a, b]. A
                           strategy S whose largest transient term T(S) lies in (a, b] is within
                           b and has T(S) >= v, the least term above a. With R(b) the relaxed
                           frontier of the problem within b (additive memory P):
                               LB = reduce U_(a, b] { (P(q) + v, time(q)) : q in R(b) }
                           holds a point no worse than (P(S) + T(S), time(S)) for every S.
                           The intervals start as one and are halved where their points could
                           show as a gap (`lower_bound`); one term per interval is exact in T.

The gap at memory m:  (T_ft(m) - T_lb(m)) / T_lb(m),  with T(m) the least time of a point of
memory <= m; it changes only where either frontier has a point, so those memories are tried. Below
FT's leanest point the bound may hold points FT has none for: that memory range is reported apart.

What this bounds is the cost problem FT is handed (search.space): approximations made in building it
(search.levels merging level digits upward) are the cost model's, outside it.
"""

from __future__ import annotations

import time as _time
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from stratagem.search.frontier import reduce_rows
from stratagem.search.ft import FTOptions, Memo, frontier_tracking
from stratagem.search.ft_peak import transient_thresholds
from stratagem.search.problem import CostProblem

# hubs split first, as the planner fixes them; frontiers thinned from below to 128 tuples; at most
# 32 passes over the transient terms' intervals
BOUND_FT = FTOptions(hub_span=24, max_width=128, relax=True)
BOUND_PASSES = 32
# a split node's shares add up to 1 - 1e-9 of its costs (search.ft._State._split): a bound leaner
# than the frontier by less than this is the same memory
SHARE_ROUNDING = 1e-6


@dataclass(frozen=True)
class LowerBound:
    pairs: tuple[tuple[float, float], ...]      # (peak memory, time), memory ascending
    passes: int
    splits: int                                 # nodes split (relaxed heuristic eliminations) per pass, at most
    seconds: float


@dataclass(frozen=True)
class FrontierGap:
    largest: float                  # max over memories >= the frontier's leanest of (T_ft - T_lb) / T_lb
    at_memory: float                # where that largest gap is (bytes)
    uncovered_memory: tuple[float, float] | None   # [bound's leanest, frontier's leanest) when the bound reaches lower

    def as_dict(self) -> dict:
        found = {"largest_time_gap": self.largest, "at_memory_bytes": self.at_memory}
        if self.uncovered_memory is not None:
            found["bound_leaner_from_bytes"], found["frontier_leanest_bytes"] = self.uncovered_memory
        return found


def lower_bound(problem: CostProblem, options: FTOptions = BOUND_FT, max_passes: int | None = BOUND_PASSES,
                against: list[tuple[float, float]] | tuple = ()) -> LowerBound:
    """Points such that every strategy of `problem` has one no worse in (peak memory, time).

    The intervals of transient terms are refined by halving, widest first (each half needs one
    pass, its upper end's relaxed frontier), where their points are not dominated by a point of
    `against` (the frontier the bound is for: elsewhere a coarser interval cannot show as a gap),
    until an interval holds one term, or after `max_passes` passes (None: no limit)."""
    start = _time.perf_counter()
    options = replace(options, relax=True, memory_resolution=0.0, peak_passes=None)
    memo = Memo()
    if not problem.has_transient:
        found = frontier_tracking(problem, options, memo=memo)
        return LowerBound(tuple(found.pairs), 1, found.stats["split"], _time.perf_counter() - start)
    thresholds = transient_thresholds(problem)
    relaxed: dict[int, list[tuple[float, float]]] = {}
    splits = 0

    def within(top: int) -> list[tuple[float, float]]:
        nonlocal splits
        if top not in relaxed:
            last = top == len(thresholds) - 1
            found = frontier_tracking(problem if last else problem.within(float(thresholds[top])), options, memo=memo)
            memo.settle(keep=not relaxed)
            relaxed[top], splits = found.pairs, max(splits, found.stats["split"])
        return relaxed[top]

    kept: list[tuple[float, float]] = []
    intervals = deque([(-1, len(thresholds) - 1)])   # terms in (thresholds[low], thresholds[top]]; -1: the floor up
    while intervals:
        low, top = intervals.popleft()
        level = float(thresholds[low + 1])       # the least term in the interval
        points = [(mem + level, time) for mem, time in within(top)]
        room = max_passes is None or len(relaxed) < max_passes
        if points and top - low > 1 and room and not all(_dominated(p, against) for p in points):
            middle = (low + top) // 2
            intervals += [(low, middle), (middle, top)]
        else:
            kept += points
    return LowerBound(_reduced(*_columns(kept)), len(relaxed), splits, _time.perf_counter() - start)


def _dominated(point: tuple[float, float], frontier) -> bool:
    return any(m <= point[0] and t <= point[1] for m, t in frontier)


def frontier_gap(frontier: list[tuple[float, float]], bound: list[tuple[float, float]]) -> FrontierGap:
    """FT's time against the bound's at every memory from FT's leanest point up (see the module)."""
    front, low = _reduced(*_columns(frontier)), _reduced(*_columns(bound))
    if not low:
        raise ValueError("the lower bound has no point: no strategy fits, or it was computed for another problem")
    leanest = front[0][0]
    largest, at = 0.0, leanest
    for memory in sorted({m for m, _ in front + low if m >= leanest}):
        least = _time_at(low, memory)
        gap = (_time_at(front, memory) - least) / least
        if gap > largest:
            largest, at = gap, memory
    uncovered = (low[0][0], leanest) if low[0][0] < leanest * (1 - SHARE_ROUNDING) else None
    return FrontierGap(largest, at, uncovered)


def _time_at(pairs: tuple[tuple[float, float], ...], memory: float) -> float:
    """The least time of a point with memory <= `memory` (pairs: a frontier, memory ascending,
    time descending), by bisection."""
    at = bisect_right(pairs, memory, key=lambda pair: pair[0])
    return pairs[at - 1][1] if at else float("inf")


def _columns(pairs: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    return [m for m, _ in pairs], [t for _, t in pairs]


def _reduced(mems, times) -> tuple[tuple[float, float], ...]:
    if not len(mems):
        return ()
    mem, time, src = reduce_rows(np.asarray(mems, dtype=float)[None, :], np.asarray(times, dtype=float)[None, :])
    return tuple((float(m), float(t)) for m, t, s in zip(mem[0], time[0], src[0]) if s >= 0)


__all__ = ["BOUND_FT", "BOUND_PASSES", "FrontierGap", "LowerBound", "frontier_gap", "lower_bound"]
