"""FT's frontier against what practitioners configure by hand (issue 20's comparison).

The practitioners' baseline is `fsdp-tp` (torchtitan's setting: tensor parallel in a node, FSDP
over the nodes, every block recomputed, the model's precision). FT's own points are the union of
its frontiers over the memory-saving dimensions: the operator splits alone, with weights held
sharded as a choice (`state_sharding`), and with every block recomputed as well (`recompute`);
the baseline itself is not among them. Everything is simulated. Prints:

    baseline        the baseline's time and peak memory
    frontiers       per option set, its points and the whole `frontier` call's wall time
    under baseline  FT's fastest point whose peak memory is at most the baseline's, and whether it is
                    at least as fast (issue 20: it must be)
    fastest fitting the least time of any plan here under the memory cap (FT's points and the
                    baseline), and its memory
    lean and quick  FT's leanest point within 1.5x of that time, and its memory over the fastest
                    fitting plan's (issue 20: some point at most a quarter)

Run: PYTHONPATH=. python benchmarks/practitioners_baseline.py [model@cluster:devices]
(default gpt-7b@a100-8x8:64). Wall times need an idle machine.
"""

from __future__ import annotations

import sys
import time
import warnings

from stratagem.report.planning import build_graph, zoo_precision
from stratagem.search import registry
from stratagem.search.context import context
from stratagem.search.ft_search import FTSearchOptions, frontier

OPTION_SETS = {"operator splits": FTSearchOptions(),
               "+ sharded states": FTSearchOptions(state_sharding=True),
               "+ sharded states + recompute": FTSearchOptions(state_sharding=True, recompute=True)}
WITHIN = 1.5            # issue 20: a point within 1.5x of the fastest fitting time ...
QUARTER = 0.25          # ... using at most a quarter of its memory


def gib(num_bytes: float) -> str:
    return f"{num_bytes / 2**30:.2f} GiB"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def main(case: str) -> None:
    model, rest = case.split("@")
    cluster, devices = rest.split(":")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = context(build_graph(model), cluster, int(devices), precision=zoo_precision(model))
    baseline = registry.run(ctx, "fsdp-tp", {})
    print(f"{case}, {ctx.precision}, memory cap {gib(ctx.memory_cap_bytes)}")
    print(f"baseline (fsdp-tp): {ms(baseline.iteration_time_s)} at {gib(baseline.peak_memory_bytes)}")
    points = []
    for name, options in OPTION_SETS.items():
        start = time.perf_counter()
        front = list(frontier(ctx, options))
        wall = time.perf_counter() - start
        leanest = min(front, key=lambda p: p.peak_memory_bytes)
        print(f"frontier, {name}: {len(front)} points, leanest {gib(leanest.peak_memory_bytes)} at "
              f"{ms(leanest.iteration_time_s)}, fastest {ms(min(p.iteration_time_s for p in front))}; "
              f"{wall:.1f} s")
        points += front
    under = [p for p in points if p.peak_memory_bytes <= baseline.peak_memory_bytes]
    if under:
        best = min(under, key=lambda p: p.iteration_time_s)
        verdict = "as fast or faster" if best.iteration_time_s <= baseline.iteration_time_s else "SLOWER"
        print(f"under the baseline's memory: FT's fastest {ms(best.iteration_time_s)} at "
              f"{gib(best.peak_memory_bytes)}: {verdict} than the baseline "
              f"({baseline.iteration_time_s / best.iteration_time_s:.3f}x)")
    else:
        print("under the baseline's memory: no FT point")
    fitting = [p for p in [*points, baseline] if p.peak_memory_bytes <= ctx.memory_cap_bytes]
    fastest = min(fitting, key=lambda p: p.iteration_time_s)
    print(f"fastest fitting: {ms(fastest.iteration_time_s)} at {gib(fastest.peak_memory_bytes)}"
          + (" (the baseline)" if fastest is baseline else ""))
    quick = [p for p in points if p.iteration_time_s <= WITHIN * fastest.iteration_time_s]
    lean = min(quick, key=lambda p: p.peak_memory_bytes)
    share = lean.peak_memory_bytes / fastest.peak_memory_bytes
    print(f"FT's leanest within {WITHIN}x of it: {gib(lean.peak_memory_bytes)} at {ms(lean.iteration_time_s)}, "
          f"{share:.1%} of its memory ({'at most' if share <= QUARTER else 'MORE than'} a quarter)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "gpt-7b@a100-8x8:64")
