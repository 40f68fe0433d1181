"""FT running time at 16 devices on v100-2x8 (TensorOpt Table 3: RNN 0.28 s, Transformer 201 s,
WideResNet 1,292 s on a 48-core machine; targets here on 2 cores: 0.1 s, 20 s, 120 s).

For each model prints: the FT algorithm alone on the built cost tables (what Table 3 times),
building those tables from the cost model, and the whole `sg.frontier` (build + FT + simulating
every frontier point). Run: PYTHONPATH=. python benchmarks/ft_speed.py [model ...]
"""

from __future__ import annotations

import sys
import time
import warnings

import stratagem as sg
from stratagem.search.ft import frontier_tracking
from stratagem.search.context import context
from stratagem.search.ft_search import PLANNER_FT, FTSearchOptions, frontier
from stratagem.search.space import build_search_space

MODELS = ("rnn", "transformer", "wideresnet")


def measure(name: str, cluster: str = "v100-2x8", devices: int = 16) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = sg.zoo.build(name)
    ctx = context(graph, cluster, devices)
    start = time.perf_counter()
    space = build_search_space(ctx.model)
    build_s = time.perf_counter() - start
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        result = frontier_tracking(space.problem, PLANNER_FT)
        runs.append(time.perf_counter() - start)
    start = time.perf_counter()
    front = frontier(context(graph, cluster, devices), FTSearchOptions(runnable=False))
    total_s = time.perf_counter() - start
    return {"model": name, "ops": len(graph.ops), "groups": len(space.groups),
            "ft_s": min(runs), "build_s": build_s, "frontier_s": total_s, "points": len(front),
            "heuristic": len(result.heuristic_fixes)}


def main(names: list[str]) -> None:
    print(f"{'model':12s} {'ops':>5s} {'groups':>6s} {'FT (s)':>8s} {'tables (s)':>10s} "
          f"{'frontier (s)':>12s} {'points':>6s} {'fixed':>5s}")
    for name in names:
        row = measure(name)
        print(f"{row['model']:12s} {row['ops']:5d} {row['groups']:6d} {row['ft_s']:8.2f} "
              f"{row['build_s']:10.1f} {row['frontier_s']:12.1f} {row['points']:6d} {row['heuristic']:5d}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(MODELS))
