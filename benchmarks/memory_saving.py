"""What the memory-saving dimensions buy: FT's frontier with and without weights held sharded
(ZeRO-3 / FSDP, `state_sharding`), and with their shards offloaded to host memory as a choice too
(`offload`, where the cluster has hosts), in fp32 and in bf16 mixed precision (issue 20's yardstick).

For each model@cluster:devices and precision prints, simulated:
    points        FT's frontier points
    leanest       the least peak memory on the frontier (and its time)
    fastest       the least iteration time on the frontier (and its memory)
    dp / fsdp     data parallel, data parallel with every weight held sharded (the fsdp baseline),
                  and fsdp offloading every shard (offload=true)
    sharded ops   ops holding their weights sharded (offloaded) at the leanest point
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
SPACES = ((False, False), (True, False), (True, True))                 # (state_sharding, offload)
BASELINES = (("data-parallel", {}), ("fsdp", {}), ("fsdp", {"offload": True}))


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
        hosts = context(graph, cluster, devices).model.cluster.spec.host is not None
        for sharding, offload in SPACES[:3 if hosts else 2]:
            ctx = context(graph, cluster, devices, precision=precision)
            start = time.perf_counter()
            front = frontier(ctx, FTSearchOptions(state_sharding=sharding, offload=offload))
            wall = time.perf_counter() - start
            lean, fast = front.min_memory, front.min_time
            leanest[sharding, offload] = lean.peak_memory_bytes
            sharded = sum(c.sharded_state for c in lean.strategy.values())
            offloaded = sum(c.offloaded for c in lean.strategy.values())
            print(f"{case} {precision:10s} state_sharding={str(sharding):5s} offload={str(offload):5s}: "
                  f"{len(front):2d} points, leanest {mib(lean.peak_memory_bytes)} at {ms(lean.iteration_time_s)} "
                  f"({sharded} ops sharded, {offloaded} offloaded), fastest {ms(fast.iteration_time_s)} at "
                  f"{mib(fast.peak_memory_bytes)}, wall {wall:.1f} s")
        for name, options in BASELINES[:3 if hosts else 2]:
            plan = registry.run(context(graph, cluster, devices, precision=precision), name, options)
            label = name + (" offload" if options else "")
            print(f"{'':{len(case)}} {precision:10s} {label:>20s}: {ms(plan.iteration_time_s)} at "
                  f"{mib(plan.peak_memory_bytes)}")
        for space in SPACES[1:3 if hosts else 2]:
            print(f"{'':{len(case)}} {precision:10s} leanest with state sharding{' and offload' if space[1] else ''}: "
                  f"{100 * (1 - leanest[space] / leanest[False, False]):.1f} % less memory")


if __name__ == "__main__":
    for case in sys.argv[1:] or CASES:
        run(case)
