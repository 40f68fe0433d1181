"""What the memory-saving dimensions buy: FT's frontier with and without weights held sharded
(ZeRO-3 / FSDP, `state_sharding`), in fp32 and in bf16 mixed precision (issue 20's yardstick).

For each model@cluster:devices and precision prints, simulated:
    points        FT's frontier points
    leanest       the least peak memory on the frontier (and its time)
    fastest       the least iteration time on the frontier (and its memory)
    dp / fsdp     data parallel, and data parallel with every weight held sharded (the fsdp baseline)
    sharded ops   ops holding their weights sharded at the leanest point
    wall          the whole `frontier` call
and, per precision, how much less memory the leanest point with state sharding needs than the
leanest without.

Run: PYTHONPATH=. python benchmarks/memory_saving.py [model@cluster:devices ...]
(default: gpt-tiny@a100-1x8:8 and transformer@v100-2x8:16). Wall times need an idle machine.
"""

from __future__ import annotations

import sys
import time
import warnings

import stratagem as sg
from stratagem.search import registry
from stratagem.search.context import context
from stratagem.search.ft_search import FTSearchOptions, frontier

CASES = ("gpt-tiny@a100-1x8:8", "transformer@v100-2x8:16")
PRECISIONS = ("fp32", "bf16-mixed")


def parse(case: str) -> tuple[str, str, int]:
    model, rest = case.split("@")
    cluster, devices = rest.split(":")
    return model, cluster, int(devices)


def mib(num_bytes: float) -> str:
    return f"{num_bytes / 2**20:,.1f} MiB"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def run(case: str) -> None:
    model, cluster, devices = parse(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = sg.zoo.build(model)
    for precision in PRECISIONS:
        leanest = {}
        for sharding in (False, True):
            ctx = context(graph, cluster, devices, precision=precision)
            start = time.perf_counter()
            front = frontier(ctx, FTSearchOptions(state_sharding=sharding))
            wall = time.perf_counter() - start
            lean, fast = front.min_memory, front.min_time
            leanest[sharding] = lean.peak_memory_bytes
            sharded = sum(c.sharded_state for c in lean.strategy.values())
            print(f"{case} {precision:10s} state_sharding={str(sharding):5s}: {len(front):2d} points, "
                  f"leanest {mib(lean.peak_memory_bytes)} at {ms(lean.iteration_time_s)} ({sharded} ops sharded), "
                  f"fastest {ms(fast.iteration_time_s)} at {mib(fast.peak_memory_bytes)}, wall {wall:.1f} s")
        for name in ("data-parallel", "fsdp"):
            plan = registry.run(context(graph, cluster, devices, precision=precision), name, {})
            print(f"{'':{len(case)}} {precision:10s} {name:>20s}: {ms(plan.iteration_time_s)} at "
                  f"{mib(plan.peak_memory_bytes)}")
        print(f"{'':{len(case)}} {precision:10s} leanest with state sharding: "
              f"{100 * (1 - leanest[True] / leanest[False]):.1f} % less memory")


if __name__ == "__main__":
    for case in sys.argv[1:] or CASES:
        run(case)
