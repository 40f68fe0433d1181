"""Frontier Tracking on peak memory: the (peak, time) frontier when a strategy's peak memory is its
additive memory plus its largest transient term (search.problem, cost.transient).

TensorOpt's FT (§3.2, search.ft) needs costs that add along the graph; the largest transient term
is a maximum. FT therefore runs once per threshold on it, from the top down:

    F(tau)  = FT(problem within tau)   the (P, time) frontier of the strategies whose every
                                       transient term is <= tau (others cost +inf memory)
    tau_0   = +inf (no threshold)
    tau_j+1 = the largest transient term strictly below max { T(p) : p in F(tau_j) }
    stop when no strategy meets tau (below the largest of the nodes' and edges' least terms)
    frontier = reduce( union over j of { (P(p) + T(p), time(p)) : p in F(tau_j) } )

Exact (when each FT pass is): for every tau between max T(F(tau_j)) and tau_j, every point of
F(tau_j) lies within tau, so F(tau) = F(tau_j); between tau_j+1 and that maximum lies no term, so
F(tau) = F(tau_j+1). Every threshold is thus covered, and a strategy S with largest term
T(S) = tau has a point p of F(tau) no worse in (P, time) with T(p) <= tau: reported at
P(p) + T(p) <= P(S) + T(S). Each pass drops the largest transient level still on the frontier, so
the passes are the distinct levels along the frontiers, not the distinct terms.

`FTOptions.peak_passes` caps the passes (the planner's setting); the frontier is then exact only
if no threshold was left, which the stats say (`peak_thresholds_left`). A Ctrl-C after the first
pass stops the passes there: the union so far is a frontier of real strategies, not the whole one
(`stats["interrupted"]`, search.stopping).
"""

from __future__ import annotations

import time as _time

import numpy as np

from stratagem.search.ft import FTOptions, FTPoint, FTResult, Memo, frontier_tracking, merged
from stratagem.search.problem import CostProblem
from stratagem.search.progress import SILENT, Progress


def peak_frontier_tracking(problem: CostProblem, options: FTOptions = FTOptions(),
                           prefer: tuple[int, ...] | None = None, progress: Progress = SILENT,
                           label: str = "FT", memo: Memo | None = None) -> FTResult:
    """The (peak memory, time) frontier of `problem`: FT itself when it has no transient terms.
    Each pass is a phase of `progress` ("FT pass 2: eliminations"). A Ctrl-C after the first pass
    keeps the passes done (stats["interrupted"] names the pass); during the first, it is raised.
    The passes share one memo (tables.Memo): a pass reduces again only what its threshold masked,
    and what a pass after the first did not use is forgotten (Memo.settle)."""
    memo = Memo() if memo is None else memo
    if not problem.has_transient:
        return frontier_tracking(problem, options, prefer, progress, f"{label}: eliminations", memo)
    start = _time.perf_counter()
    thresholds = transient_thresholds(problem)
    result = FTResult(())
    tau, passes, left, exact, stopped = float("inf"), 0, 0, True, ""
    while True:
        name = f"{label} pass {passes + 1}"
        try:
            found = frontier_tracking(problem if tau == float("inf") else problem.within(tau), options, prefer,
                                      progress, f"{name}: eliminations", memo)
        except KeyboardInterrupt:
            if not result.points:
                raise
            stopped = name
            break
        passes += 1
        memo.settle(keep=passes == 1)
        exact = exact and bool(found.stats.get("exact"))
        if not found.points:
            break
        peaks = [problem.transient_of(p.assignment, p.options) for p in found.points]
        result = merged(result, FTResult(tuple(FTPoint(p.mem + t, p.time, p.assignment, p.options)
                                               for p, t in zip(found.points, peaks)), found.heuristic_fixes))
        below = thresholds[thresholds < max(peaks)]
        if not below.size:
            break
        if options.peak_passes is not None and passes >= options.peak_passes:
            left = int(below.size)
            break
        tau = float(below[-1])
    stats = dict(found.stats, passes=passes, thresholds=len(thresholds), peak_thresholds_left=left,
                 reused=memo.reused, computed=memo.computed,
                 exact=exact and not left and not stopped, seconds=_time.perf_counter() - start)
    if stopped:
        stats["interrupted"] = stopped
    return FTResult(result.points, tuple(dict.fromkeys(result.heuristic_fixes)), stats)


def transient_thresholds(problem: CostProblem) -> np.ndarray:
    """The distinct transient terms no lower than the least largest term of any strategy."""
    floor = max([float(t.min()) for t in problem.node_transient]
                + [float(e.transient.min(axis=0).min()) for e in problem.edges if e.transient is not None]
                + [0.0])
    values = problem.transient_values()
    return values[values >= floor]


__all__ = ["peak_frontier_tracking", "transient_thresholds"]
