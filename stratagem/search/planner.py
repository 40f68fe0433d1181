"""From a graph and a cluster to plans: the frontier, the modes, and every search by name.

    frontier(graph, cluster)      FT over the coarsened space; every point unrolled, simulated
    find_strategy(..., mode)      TensorOpt §4.1: mini_time | mini_parallelism | profiling
    search(..., algorithm)        "ft" (min-time end), the baselines, and the randomized and
                                  recursive searches, each returning one Plan

Modes choose by the simulated time and peak memory, which are what a plan will do; the additive
(Eq. 3) costs stay on each plan beside them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from stratagem import values
from stratagem.cluster import Cluster, load
from stratagem.cost import CostModel
from stratagem.errors import ConfigError, StratagemError
from stratagem.ir import Graph
from stratagem.plan import Frontier, Plan
from stratagem.search.ft import FTOptions, frontier_tracking, merged
from stratagem.search.space import FT_SPACE, SearchSpace, additive_cost, build_search_space
from stratagem.sim.builder import Simulation
from stratagem.space import Configuration, SpaceOptions

MEMORY_SAFETY = 1.1       # TensorOpt §5.2: a 16 GB device plans for 16 / 1.1 = 14.5 GB
# FT as the planner runs it: frontiers thinned to 16 tuples (both ends kept exactly), and nodes with
# edges across more than 24 groups fixed first (TensorOpt's heuristic elimination, for tied
# embeddings and encoder outputs). FTOptions() is exact; the frontier records which it used.
PLANNER_FT = FTOptions(max_width=16, hub_span=24)
MODES = ("mini_time", "mini_parallelism", "profiling")        # TensorOpt §4.1


class NothingFits(StratagemError):
    """No plan fits the memory cap."""


@dataclass(frozen=True)
class PlanningContext:
    graph: Graph
    cluster: Cluster
    cluster_name: str
    model: CostModel
    optimizer: str
    zoo_name: str = ""

    @property
    def num_devices(self) -> int:
        return self.model.num_devices


def context(graph: Graph, cluster: Cluster | str, devices: int | None = None, optimizer: str = "adam",
            model_options: Mapping[str, Any] | None = None) -> PlanningContext:
    check_graph(graph)
    loaded = cluster if isinstance(cluster, Cluster) else load(cluster)
    model = CostModel(graph, loaded, optimizer=optimizer, num_devices=devices, **dict(model_options or {}))
    name = cluster if isinstance(cluster, str) else loaded.name
    return PlanningContext(graph, loaded, name, model, optimizer, graph.meta.get("zoo", ""))


def check_graph(graph: Any) -> None:
    if not isinstance(graph, Graph):
        raise ConfigError("not a graph", expected="a Graph from sg.zoo.build(name) or sg.capture(module, inputs)",
                          got=type(graph).__name__)


def make_plan(ctx: PlanningContext, strategy: Mapping[str, Configuration], algorithm: str,
              reuse: Mapping[int, str] | None = None, details: Mapping[str, Any] | None = None) -> Plan:
    """A simulated plan with both its additive and its simulated costs."""
    reuse = dict(reuse or {})
    mem, time = additive_cost(ctx.model, strategy, reuse)
    edges = ctx.model.edges()
    named_reuse = {f"{edges[k].tensor}:{edges[k].src_op}->{edges[k].dst_op}": option
                   for k, option in reuse.items()}
    sim_reuse = {(edges[k].tensor, edges[k].src_op, edges[k].dst_op): option for k, option in reuse.items()}
    result = Simulation(ctx.model, strategy, sim_reuse).run()
    plan = Plan(ctx.graph, ctx.cluster_name, ctx.num_devices, dict(strategy), additive_time_s=time,
                additive_memory_bytes=mem, algorithm=algorithm, optimizer=ctx.optimizer,
                reuse=named_reuse, model=ctx.zoo_name, details=dict(details or {}))
    return plan.with_simulation(result)


def memory_cap(cluster: Cluster, devices: int, cap_bytes: float | str | None = None) -> float:
    """The memory each device's plan must fit in: `cap_bytes` (bytes, or text such as 16GB), at
    most the devices' memory; None: the least device memory / 1.1 (TensorOpt §5.2)."""
    memory = min(cluster.device(d).spec.memory_bytes for d in range(devices))
    if cap_bytes is None:
        return memory / MEMORY_SAFETY
    cap = values.size_bytes(cap_bytes, "memory cap")
    if cap > memory:
        raise ConfigError("memory cap is above the devices' memory",
                          expected=f"at most {memory / 2**30:.2f} GiB (a {cluster.device(0).spec.kind} of cluster "
                                   f"{cluster.name!r})", got=f"{cap / 2**30:.2f} GiB",
                          hint="The cap is per device; to plan for devices with more memory, give a cluster "
                               "file whose device.memory_bytes is larger")
    return cap


def device_memory_cap(ctx: PlanningContext) -> float:
    return memory_cap(ctx.cluster, ctx.num_devices)


# ---- frontier tracking ---------------------------------------------------------------------------

def runnable_space(space: SpaceOptions, runnable: bool) -> SpaceOptions:
    """`space`, kept to what stratagem.runtime executes when `runnable` (the planner's default:
    a plan it returns runs; runnable=False searches the papers' whole spaces)."""
    return replace(space, runnable=True) if runnable else space


def frontier(graph: Graph, cluster: Cluster | str, devices: int | None = None, optimizer: str = "adam",
             space: SpaceOptions = FT_SPACE, options: FTOptions = PLANNER_FT,
             ctx: PlanningContext | None = None, runnable: bool = True) -> Frontier:
    """The (peak memory, iteration time) frontier by Frontier Tracking (TensorOpt §3)."""
    ctx = ctx or context(graph, cluster, devices, optimizer)
    search_space = build_search_space(ctx.model, runnable_space(space, runnable))
    from stratagem.search.baselines import data_parallel_strategy
    data_parallel = data_parallel_strategy(ctx)
    result = frontier_tracking(search_space.problem, options)
    baseline = search_space.index_of(data_parallel) if result.heuristic_fixes else None
    if baseline is not None:        # a second pass that fixes hubs as data parallel has them
        result = merged(result, frontier_tracking(search_space.problem, options, prefer=baseline))
    fixes = [{"op": search_space.groups[f.node].anchor, "config": str(search_space.configs[f.node][f.config]),
              "reason": f.reason} for f in result.heuristic_fixes]
    plans = []
    for point in result.points:
        strategy, reuse = search_space.strategy(point.assignment, point.options)
        plans.append(make_plan(ctx, strategy, "ft", _non_default(ctx, strategy, reuse),
                               {"heuristic_fixes": fixes} if fixes else None))
    stats = dict(result.stats, groups=len(search_space.groups),
                 configs_per_group=max(len(c) for c in search_space.configs), exact=options.exact and not fixes,
                 max_width=options.max_width, hub_span=options.hub_span)
    return Frontier(plans, {"algorithm": "ft", "stats": stats, "heuristic_fixes": fixes},
                    _alternatives(ctx, search_space, data_parallel))


def _alternatives(ctx: PlanningContext, search_space: SearchSpace, strategy: Mapping[str, Configuration]
                  ) -> list[Plan]:
    """Data parallel, simulated, when every op's configuration is in the searched space: FT picks
    by additive (Eq. 3) costs, which add communication to compute where the simulator overlaps
    them, so its min-time end can be slower than data parallel once simulated."""
    member = {op: set(configs) for group_members in search_space.members
              for op, configs in group_members.items()}
    if any(strategy[op] not in member.get(op, ()) for op in strategy):
        return []
    return [make_plan(ctx, strategy, "data-parallel")]


def _non_default(ctx: PlanningContext, strategy, reuse: Mapping[int, str]) -> dict[int, str]:
    edges = ctx.model.edges()
    out = {}
    for k, option in reuse.items():
        e = edges[k]
        src = strategy[e.src_op] if e.src_op else None
        cost = ctx.model.edge_cost(e.tensor, e.src_op, src, e.dst_op, strategy[e.dst_op])
        if option and option != cost.default_reuse:
            out[k] = option
    return out


# ---- modes (TensorOpt §4.1) ----------------------------------------------------------------------

def mini_time(front: Frontier, memory_cap_bytes: float) -> Plan:
    """The least simulated time under the cap, over the frontier and its alternatives."""
    candidates = [*front, *getattr(front, "alternatives", ())]
    fitting = [p for p in candidates if p.peak_memory_bytes <= memory_cap_bytes]
    if not fitting:
        least = min(p.peak_memory_bytes for p in candidates)
        raise NothingFits("no plan fits the memory cap", expected=f"peak memory <= {memory_cap_bytes / 2**30:.2f} GiB",
                          got=f"the least any plan needs is {least / 2**30:.2f} GiB",
                          hint="Raise --memory-cap, use more devices, or a smaller batch")
    return min(fitting, key=lambda p: (p.iteration_time_s, p.peak_memory_bytes))


def device_counts(cluster: Cluster, start: int = 1, stop: int | None = None) -> list[int]:
    stop = stop or cluster.num_devices
    counts, n = [], 1
    while n <= stop:
        if n >= start:
            counts.append(n)
        n *= 2
    if stop not in counts and stop >= start:
        counts.append(stop)
    return counts


def find_strategy(graph: Graph, cluster: Cluster | str, mode: str = "mini_time",
                  memory_cap_bytes: float | None = None, devices: int | None = None,
                  optimizer: str = "adam", device_range: tuple[int, int] | None = None,
                  space: SpaceOptions = FT_SPACE, options: FTOptions = PLANNER_FT, runnable: bool = True):
    """mini_time: least time under the cap on `devices`; mini_parallelism: fewest devices that
    fit; profiling: {device count: least-time plan or None} over `device_range`."""
    mode = values.one_of(mode.replace("-", "_") if isinstance(mode, str) else mode, "mode", MODES)
    space = runnable_space(space, runnable)
    if mode == "mini_time":
        ctx = context(graph, cluster, devices, optimizer)
        cap = memory_cap(ctx.cluster, ctx.num_devices, memory_cap_bytes)
        return mini_time(frontier(graph, cluster, ctx=ctx, space=space, options=options), cap)
    loaded = cluster if isinstance(cluster, Cluster) else load(cluster)
    table: dict[int, Plan | None] = {}
    for n in device_counts(loaded, *_device_range(loaded, device_range, devices)):
        ctx = context(graph, cluster, n, optimizer)
        cap = memory_cap(loaded, n, memory_cap_bytes)
        front = frontier(graph, cluster, ctx=ctx, space=space, options=options)
        try:
            table[n] = mini_time(front, cap)
        except NothingFits:
            table[n] = None
            least = min(p.peak_memory_bytes for p in front)
        if mode == "mini_parallelism" and table[n] is not None:
            return table[n]
    if mode == "profiling":
        return table
    raise NothingFits(f"no device count up to {max(table)} fits", got=f"the least memory at {max(table)} devices is "
                      f"{least / 2**30:.2f} GiB", hint="Use a larger cluster or a smaller batch")


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


# ---- one plan by name ----------------------------------------------------------------------------

Algorithm = Callable[..., Plan]


def _ft_min_time(ctx: PlanningContext, space: SpaceOptions = FT_SPACE, options: FTOptions = PLANNER_FT,
                 runnable: bool = True) -> Plan:
    front = frontier(ctx.graph, ctx.cluster, ctx=ctx, space=space, options=options, runnable=runnable)
    return replace(front.min_time, algorithm="ft")


def algorithms() -> dict[str, Algorithm]:
    from stratagem.search import baselines, exhaustive, expert, mcmc, tofu
    table: dict[str, Algorithm] = {"ft": _ft_min_time}
    table.update(baselines.BASELINES)
    table.update({"expert": expert.expert, "mcmc": mcmc.mcmc, "exhaustive": exhaustive.exhaustive,
                  "tofu": tofu.tofu})
    return table


def algorithm_named(name: str) -> Algorithm:
    """The search registered as `name`; an unknown name lists them and names the closest."""
    table = algorithms()
    return table[values.one_of(name, "search algorithm", sorted(table))]


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """Options an algorithm does not take are refused, not ignored (a misspelt budget_s)."""
    known = accepted_options(algorithm_named(name))
    unknown = sorted(k for k in options if known is not None and k not in known)
    if unknown:
        raise ConfigError(f"search algorithm {name!r} takes no option {unknown[0]!r}",
                          expected=f"some of {sorted(known)}" if known else "no options", got=repr(unknown[0]),
                          hint=values.closest(unknown[0], known))


def accepted_options(function: Algorithm) -> set[str] | None:
    """The keyword options of a search; None when it checks them itself (**kwargs)."""
    parameters = list(inspect.signature(function).parameters.values())[1:]
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters}


def search(graph: Graph, cluster: Cluster | str, algorithm: str = "ft", devices: int | None = None,
           optimizer: str = "adam", **kwargs) -> Plan:
    """One plan by `algorithm`. The searches (ft, mcmc, exhaustive, tofu) keep to configurations
    the runtime executes unless given runnable=False; the baselines are the papers' strategies
    as they are (`stratagem run` refuses, before launch, one that cannot run)."""
    check_options(algorithm, kwargs)
    ctx = context(graph, cluster, devices, optimizer)
    return algorithm_named(algorithm)(ctx, **kwargs)


__all__ = ["MODES", "NothingFits", "PlanningContext", "SearchSpace", "accepted_options", "algorithm_named",
           "algorithms", "check_graph", "check_options", "context", "device_counts", "device_memory_cap",
           "find_strategy", "frontier", "make_plan", "memory_cap", "mini_time", "search"]
