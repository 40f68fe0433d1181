"""Search: frontier algebra, frontier tracking, brute force, MCMC, Tofu, baselines, modes.

`stratagem.search(graph, cluster, algorithm=...)` (DESIGN.md's `sg.search`) calls
`stratagem.search.planner.search`: the package is callable and stays importable.
"""

import sys
from types import ModuleType


class _CallableModule(ModuleType):
    def __call__(self, graph, cluster, algorithm: str = "ft", **kwargs):
        from stratagem.search.planner import search
        return search(graph, cluster, algorithm, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
