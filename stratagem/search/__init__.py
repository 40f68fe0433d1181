"""Search: frontier algebra, frontier tracking, brute force, MCMC, Tofu, baselines, modes.

Layers, each importing only those above it in this list:
    problem, frontier, tables, ft, coarsen, space, choices, bounds, evaluators   (the algorithms' parts)
    context        the planning context, make_plan, NothingFits (below every search)
    strategies     the classic strategies as strategies
    ft_search, baselines, expert, mcmc, exhaustive, tofu   the searches: run(ctx, options) -> Plan
    registry       every search by name, with its options
    modes          TensorOpt §4.1's choices for any search
    planner        the public API: frontier, find_strategy, search

`stratagem.search(graph, cluster, algorithm=...)` (DESIGN.md's `sg.search`) calls
`planner.search`: the package is callable and stays importable.
"""

import sys
from types import ModuleType

from stratagem.search.planner import search as _search


class _CallableModule(ModuleType):
    def __call__(self, graph, cluster, algorithm: str = "ft", **kwargs):
        return _search(graph, cluster, algorithm, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
