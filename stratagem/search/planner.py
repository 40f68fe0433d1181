"""The public face of the search package (DESIGN: sg.frontier, sg.find_strategy, sg.search).

    frontier(graph, cluster)      FT over the coarsened space; every point unrolled, simulated;
                                  plans with stages merged in across nodes
    find_strategy(..., mode)      TensorOpt §4.1 over FT's frontier: mini_time | mini_parallelism
                                  | profiling (search.modes)
    search(..., algorithm)        one plan by any registered search (search.registry)

A Ctrl-C during any of them stops the search and returns the best found so far, saying so in its
details["interrupted"] (search.stopping).
"""

from __future__ import annotations

from typing import Any

from stratagem import values
from stratagem.cluster import Cluster, load
from stratagem.ir import Graph
from stratagem.plan import Frontier, Plan
from stratagem.search import modes, registry
from stratagem.search.context import NothingFits, context
from stratagem.search.ft import FTOptions
from stratagem.search.ft_search import PLANNER_FT, FTSearchOptions
from stratagem.search.space import FT_SPACE
from stratagem.space import SpaceOptions


def frontier(graph: Graph, cluster: Cluster | str, devices: int | None = None, optimizer: str = "adam",
             space: SpaceOptions = FT_SPACE, options: FTOptions = PLANNER_FT, runnable: bool = True,
             state_sharding: bool = False, precision: str = "fp32", pipeline: str = "auto",
             bound: bool = False) -> Frontier:
    """The (peak memory, iteration time) frontier by Frontier Tracking (TensorOpt §3);
    `state_sharding`: weights held sharded (ZeRO-3 / FSDP) are choices on it too; `precision`:
    fp32 or bf16-mixed (ir.precision); `pipeline`: plans with stages merged in (search.pipeline):
    yes | no | auto (when the devices span more than one node); `bound`: FT's largest time gap to
    a certified lower bound in `details["lower_bound"]` (search.ft_bound)."""
    ctx = context(graph, cluster, devices, optimizer, precision=precision)
    return modes.frontier_and_stages(ctx, FTSearchOptions(space, options, runnable, state_sharding, bound=bound),
                                     pipeline)


def find_strategy(graph: Graph, cluster: Cluster | str, mode: str = "mini_time",
                  memory_cap_bytes: float | str | None = None, devices: int | None = None,
                  optimizer: str = "adam", device_range: tuple[int, int] | None = None,
                  space: SpaceOptions = FT_SPACE, options: FTOptions = PLANNER_FT, runnable: bool = True,
                  state_sharding: bool = False, precision: str = "fp32"):
    """mini_time: least time under the cap on `devices`; mini_parallelism: fewest devices that
    fit; profiling: {device count: least-time plan or None} over `device_range`. Where no plan
    fits, each mode searches again with weights held sharded as a choice (`state_sharding`
    searches with it from the start)."""
    mode = values.one_of(mode.replace("-", "_") if isinstance(mode, str) else mode, "mode", modes.MODES)
    ft_options = FTSearchOptions(space, options, runnable, state_sharding)
    if mode == "mini_time":
        ctx = context(graph, cluster, devices, optimizer, memory_cap_bytes, precision=precision)
        return modes.least_time_ft(ctx, ft_options)
    loaded = cluster if isinstance(cluster, Cluster) else load(cluster)
    contexts = (context(graph, cluster, n, optimizer, memory_cap_bytes, precision=precision)
                for n in modes.device_counts(loaded, *_device_range(loaded, device_range, devices)))
    if mode == "profiling":
        return {n: plan if fits else None for n, (plan, fits) in modes.by_device_count(contexts, "ft", ft_options).items()}
    plan, fits = modes.fewest_devices(contexts, "ft", ft_options)
    if not fits:
        raise NothingFits(f"no device count up to {plan.num_devices} fits",
                          got=f"the least memory at {plan.num_devices} devices is {plan.peak_memory_bytes / 2**30:.2f} GiB",
                          hint="Use a larger cluster or a smaller batch")
    return plan


def _device_range(cluster: Cluster, device_range: tuple[int, int] | None, devices: int | None
                  ) -> tuple[int, int]:
    """(fewest, most) devices to try: `device_range`, else 1 to `devices` (all when None)."""
    if device_range is None:
        return 1, cluster.device_count(devices)
    if not isinstance(device_range, (tuple, list)) or len(device_range) != 2:
        raise values.invalid("device_range", "(fewest, most) devices", device_range)
    lo, hi = (cluster.device_count(n) for n in device_range)
    if lo > hi:
        raise values.invalid("device_range", "fewest <= most", device_range)
    return lo, hi


def search(graph: Graph, cluster: Cluster | str, algorithm: str = "ft", devices: int | None = None,
           optimizer: str = "adam", memory_cap_bytes: float | str | None = None, options: Any = None,
           precision: str = "fp32", **given: Any) -> Plan:
    """One plan by `algorithm` (search.registry), its options as an options instance or by name:
    search(g, c, "mcmc", budget_s=30). The searches keep to configurations the runtime executes
    unless given runnable=False; the baselines are the papers' strategies (`stratagem run`
    refuses, before launch, one that cannot run)."""
    chosen = registry.make_options(algorithm, options if options is not None else given)
    return registry.run(context(graph, cluster, devices, optimizer, memory_cap_bytes, precision=precision),
                        algorithm, chosen)


__all__ = ["find_strategy", "frontier", "search"]
