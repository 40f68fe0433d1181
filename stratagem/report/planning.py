"""The work behind `stratagem plan` and `stratagem frontier`: a zoo model, a cluster, a mode, a search.

    plan_model(request)        one Plan: mini_time (least time under the cap on the devices),
                               mini_parallelism (fewest devices that fit) - TensorOpt §4.1 - by FT
                               or by any algorithm of `planner.algorithms()`
    profile_devices(request)   profiling mode: {device count: least-time plan that fits, or None}
FT plans come from the frontier (the modes pick a point of it); any other algorithm returns one
plan per device count, which fits the cap or not.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from stratagem.errors import ConfigError
from stratagem.ir import Graph
from stratagem.plan import Frontier, Plan

DEFAULT_CLUSTER = "v100-2x8"          # TensorOpt's cluster: 2 nodes x 8 V100 16 GB
MODES = ("mini_time", "mini_parallelism", "profiling")


@dataclass(frozen=True)
class PlanRequest:
    model: str
    cluster: str = DEFAULT_CLUSTER
    devices: int | None = None                 # None: every device of the cluster
    mode: str = "mini_time"
    memory_cap_bytes: float | None = None      # None: device memory / 1.1 (TensorOpt §5.2)
    algorithm: str = "ft"
    options: Mapping[str, Any] = field(default_factory=dict)   # budget_s, seed, ... for the algorithm
    batch_size: int | None = None


Track = Callable[[Iterable[int], str], Iterable[int]]


def build_graph(model: str, batch_size: int | None = None) -> Graph:
    """The captured graph of a zoo model (imports torch)."""
    from stratagem import zoo
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zoo.build(model, batch_size=batch_size)


def check_algorithm(name: str) -> None:
    from stratagem.search.planner import algorithms
    known = sorted(algorithms())
    if name not in known:
        import difflib
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.4)
        raise ConfigError(f"no search algorithm {name!r}", expected=f"one of {', '.join(known)}", got=repr(name),
                          hint=f"Did you mean {' or '.join(close)}?" if close else None)


def cluster_reference(name: str) -> str:
    """What a plan file records: a preset name as given, a cluster file as an absolute path."""
    from pathlib import Path
    path = Path(name)
    return str(path.resolve()) if path.suffix in (".yaml", ".yml", ".json") else name


def check_cluster(name: str, devices: int | None):
    from stratagem.cluster import load
    cluster = load(name)
    if devices is not None and not 1 <= devices <= cluster.num_devices:
        raise ConfigError(f"--devices {devices} does not fit cluster {name!r}",
                          expected=f"1..{cluster.num_devices}", got=str(devices))
    return cluster


def memory_cap(cluster, devices: int, cap_bytes: float | None) -> float:
    from stratagem.search.planner import MEMORY_SAFETY
    if cap_bytes is not None:
        return cap_bytes
    return min(cluster.device(d).spec.memory_bytes for d in range(devices)) / MEMORY_SAFETY


def plan_at(graph: Graph, request: PlanRequest, devices: int) -> tuple[Plan, bool]:
    """The least-time plan on `devices` devices, and whether it fits the memory cap."""
    from stratagem.search import planner
    cluster = check_cluster(request.cluster, devices)
    cap = memory_cap(cluster, devices, request.memory_cap_bytes)
    ctx = planner.context(graph, cluster, devices)
    ctx = replace(ctx, cluster_name=cluster_reference(request.cluster))
    if request.algorithm == "ft":
        front = planner.frontier(graph, cluster, ctx=ctx)
        try:
            return planner.mini_time(front, cap), True
        except planner.NothingFits:
            return front.min_memory, False
    function = planner.algorithms()[request.algorithm]
    plan = function(ctx, **_accepted(function, {**request.options, "memory_cap_bytes": cap}))
    return plan, plan.peak_memory_bytes <= cap


def _accepted(function: Callable, options: Mapping[str, Any]) -> dict[str, Any]:
    parameters = inspect.signature(function).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return dict(options)
    names = {p.name for p in parameters}
    return {k: v for k, v in options.items() if k in names}


def device_counts(request: PlanRequest) -> list[int]:
    from stratagem.search.planner import device_counts as counts
    cluster = check_cluster(request.cluster, request.devices)
    return counts(cluster, 1, request.devices or cluster.num_devices)


def plan_model(graph: Graph, request: PlanRequest, track: Track = lambda xs, _: xs) -> tuple[Plan, bool]:
    """(plan, fits the cap). mini_parallelism walks device counts up until one fits."""
    if request.mode == "mini_time":
        cluster = check_cluster(request.cluster, request.devices)
        return plan_at(graph, request, request.devices or cluster.num_devices)
    if request.mode != "mini_parallelism":
        raise ConfigError("unknown mode", expected="mini-time, mini-parallelism or profiling", got=repr(request.mode))
    last = None
    for n in track(device_counts(request), "device counts"):
        last = plan_at(graph, request, n)
        if last[1]:
            return last
    return last


def profile_devices(graph: Graph, request: PlanRequest, track: Track = lambda xs, _: xs
                    ) -> dict[int, tuple[Plan, bool]]:
    return {n: plan_at(graph, request, n) for n in track(device_counts(request), "device counts")}


def fastest_fitting(table: Mapping[int, tuple[Plan, bool]]) -> Plan | None:
    fitting = [plan for plan, fits in table.values() if fits]
    return min(fitting, key=lambda p: (p.iteration_time_s, p.num_devices)) if fitting else None


def frontier_with_context(graph: Graph, cluster_name: str, devices: int | None):
    """(frontier by FT, the planning context that priced it)."""
    from stratagem.search import planner
    cluster = check_cluster(cluster_name, devices)
    ctx = replace(planner.context(graph, cluster, devices), cluster_name=cluster_reference(cluster_name))
    return planner.frontier(graph, cluster, ctx=ctx), ctx
