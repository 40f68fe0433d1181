"""What spatial splits buy (issue 17's "papers' whole space"): FT's frontier with window ops split
along image positions (halo exchanges: space.halo, runtime.halo) and without
(`SpaceOptions(allow_irregular=False)`), both in the runtime's space (every plan runs).

For each model@cluster:devices prints, simulated:
    points     FT's frontier points
    fastest    the least iteration time on the frontier (and its memory)
    leanest    the least peak memory on the frontier (and its time)
    spatial    ops split along positions (h, w, l, d of a window op) in the fastest plan
    dp         data parallel (split samples only as far as the batch goes, replicated beyond)
    wall       the whole `frontier` call (a first call on 2 devices compiles the kernels first)

Run: PYTHONPATH=. python benchmarks/spatial_splits.py [model@cluster:devices ...]
(default: unet@v100-2x8:8, unet@v100-2x8:16 and wideresnet@v100-2x8:16, where batch splits
suffice and spatial splits only cost planning time). Wall times need an idle machine.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import replace

import stratagem as sg
from stratagem.search import registry
from stratagem.search.context import context
from stratagem.search.space import FT_SPACE
from stratagem.space.runnable import WINDOW_OPS

CASES = ("unet@v100-2x8:8", "unet@v100-2x8:16", "wideresnet@v100-2x8:16")


def parse(case: str) -> tuple[str, str, int]:
    model, rest = case.split("@")
    cluster, devices = rest.split(":")
    return model, cluster, int(devices)


def spatial_ops(plan) -> int:
    return sum(1 for op in plan.graph.ops
               if set(plan.strategy[op.name].degrees) & set(WINDOW_OPS.get(op.kind, ())))


def describe(plan) -> str:
    return f"{plan.iteration_time_s * 1e3:,.2f} ms at {plan.peak_memory_bytes / 2**20:,.0f} MiB"


def run(case: str) -> None:
    model, cluster, devices = parse(case)
    graph = sg.zoo.build(model)
    sg.frontier(graph, cluster, devices=2, pipeline="no")          # kernels compiled, caches warm
    dp = registry.run(context(graph, cluster, devices), "data-parallel", {})
    for label, space in (("without", replace(FT_SPACE, allow_irregular=False)), ("with", FT_SPACE)):
        start = time.perf_counter()
        points = list(sg.frontier(graph, cluster, devices=devices, space=space, pipeline="no"))
        wall = time.perf_counter() - start
        fastest, leanest = points[-1], points[0]
        print(f"| {case} | {label} | {len(points)} | {describe(fastest)} | {describe(leanest)} | "
              f"{spatial_ops(fastest)} | {describe(dp)} | {wall:.1f} s |", flush=True)


def main(cases: list[str]) -> None:
    warnings.filterwarnings("ignore")
    print("| case | spatial splits | points | fastest | leanest | spatial ops (fastest) | data parallel | wall |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        run(case)


if __name__ == "__main__":
    main(sys.argv[1:] or list(CASES))
