"""Is FT's frontier a frontier once simulated? (issue 17's yardstick)

For each model prints, on FT's own points (before any merge with baselines or filtering):
    points      how many FT returned
    dominated   how many another FT point beats in simulated terms (no more time and no more
                peak memory, one of them strictly less)
    mem err     the largest |FT memory - simulated peak| / simulated peak over the points
    time err    the largest |FT time - simulated time| / simulated time
    dp          whether data parallel (simulated) is dominated by one of FT's points
    wall        the whole `frontier` call (space, FT, simulating every point), the bound's time apart
    gap         FT's largest time gap to a certified lower bound (search.ft_bound) at any memory from
                its leanest point, in FT's own cost terms; with --no-bound, not found
and, under a row, by how much FT's memory falls below the simulated peak at most (an under-count
risks a plan that does not fit), and the plan's own account of its largest memory gap (search.agreement).

Run: PYTHONPATH=. python benchmarks/frontier_agreement.py [--no-bound] [model@cluster:devices ...]
(defaults: the issue's models). Wall times depend on the machine being idle.
"""

from __future__ import annotations

import sys
import time
import warnings

import stratagem as sg
from stratagem.search.context import context
from stratagem.search.ft_search import FTSearchOptions, frontier
from stratagem.search.strategies import data_parallel_strategy
from stratagem.search.context import make_plan

CASES = ("transformer@v100-2x8:16", "wideresnet@v100-2x8:16", "rnn@v100-2x8:16",
         "gpt-tiny@v100-2x8:8", "gpt-7b@a100-8x8:64")


def dominates(a, b) -> bool:
    """a beats b in simulated terms."""
    no_worse = a.iteration_time_s <= b.iteration_time_s and a.peak_memory_bytes <= b.peak_memory_bytes
    better = a.iteration_time_s < b.iteration_time_s or a.peak_memory_bytes < b.peak_memory_bytes
    return no_worse and better


def relative_error(predicted: float, simulated: float) -> float:
    return abs(predicted - simulated) / simulated if simulated else 0.0


def measure(case: str, bound: bool = True) -> dict:
    model, rest = case.split("@")
    cluster, devices = rest.split(":")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = sg.zoo.build(model)
    ctx = context(graph, cluster, int(devices))
    start = time.perf_counter()
    front = frontier(ctx, FTSearchOptions(bound=bound))
    found = front.details.get("lower_bound", {})
    bound_s = found.get("seconds", 0.0)
    wall_s = time.perf_counter() - start - bound_s
    points = list(front)
    dp = make_plan(ctx, data_parallel_strategy(ctx), "data-parallel")
    return {"case": case, "points": len(points),
            "dominated": sum(any(dominates(q, p) for q in points) for p in points),
            "mem_err": max(relative_error(p.additive_memory_bytes, p.peak_memory_bytes) for p in points),
            "mem_under": max(0.0, max((p.peak_memory_bytes - p.additive_memory_bytes) / p.peak_memory_bytes
                                      for p in points)),
            "time_err": max(relative_error(p.additive_time_s, p.iteration_time_s) for p in points),
            "dp_dominated": any(dominates(p, dp) for p in points),
            "exact": front.details["stats"].get("exact"), "wall_s": wall_s, "bound": found, "bound_s": bound_s,
            "worst_note": max(points, key=lambda p: relative_error(p.additive_memory_bytes, p.peak_memory_bytes)
                              ).details.get("memory_gap")}


def main(args: list[str]) -> None:
    bound = "--no-bound" not in args
    cases = [a for a in args if a != "--no-bound"] or list(CASES)
    print(f"{'case':28s} {'points':>6s} {'dominated':>9s} {'mem err':>8s} {'time err':>8s} "
          f"{'dp dominated':>12s} {'exact':>5s} {'wall (s)':>8s} {'gap':>7s} {'bound (s)':>9s}")
    for case in cases:
        r = measure(case, bound)
        gap = r["bound"].get("largest_time_gap")
        print(f"{r['case']:28s} {r['points']:6d} {r['dominated']:9d} {r['mem_err']:8.1%} "
              f"{r['time_err']:8.1%} {str(r['dp_dominated']):>12s} {str(r['exact']):>5s} "
              f"{r['wall_s']:8.1f} {'-' if gap is None else f'{gap:.1%}':>7s} {r['bound_s']:9.1f}", flush=True)
        if "bound_leaner_from_bytes" in r["bound"]:
            print(f"    no strategy is leaner than {r['bound']['bound_leaner_from_bytes'] / 2**20:,.1f} MiB; FT's "
                  f"leanest point: {r['bound']['frontier_leanest_bytes'] / 2**20:,.1f} MiB (FT's terms)", flush=True)
        print(f"    FT's memory below the simulated peak by at most {r['mem_under']:.1%}", flush=True)
        if r["worst_note"]:
            print(f"    largest memory gap: {r['worst_note']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
