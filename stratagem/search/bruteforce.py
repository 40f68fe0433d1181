"""Exhaustive search: every strategy of a CostProblem, reduced to its frontier (the test oracle)."""

from __future__ import annotations

import numpy as np

from stratagem.search.frontier import Frontier
from stratagem.search.problem import CostProblem


def brute_force_frontier(problem: CostProblem, limit: int = 2_000_000) -> Frontier:
    """The exact frontier; payload[i] = (assignment, options). Refuses spaces above `limit`."""
    size = int(np.prod(problem.num_configs, dtype=np.float64) *
               np.prod([e.mem.shape[0] for e in problem.edges], dtype=np.float64))
    if size > limit:
        raise ValueError(f"brute force over {size} strategies exceeds the limit {limit}")
    mems, times, payload = [], [], []
    for assignment, options in problem.all_strategies():
        m, t = problem.evaluate(assignment, options)
        mems.append(m)
        times.append(t)
        payload.append((assignment, options))
    return Frontier.reduce(np.array(mems), np.array(times), payload)
