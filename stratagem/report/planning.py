"""The work behind `stratagem plan` and `stratagem frontier`: a zoo model, a cluster, a mode, a search.

    plan_model(request)        one Plan: mini_time (least time under the cap on the devices),
                               mini_parallelism (fewest devices that fit) - TensorOpt §4.1 - by FT
                               or by any algorithm of `planner.algorithms()`
    profile_devices(request)   profiling mode: {device count: least-time plan that fits, or None}
FT plans come from the frontier (the modes pick a point of it); any other algorithm returns one
plan per device count, which fits the cap or not.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from stratagem import values
from stratagem.errors import ConfigError
from stratagem.ir import Graph
from stratagem.plan import Frontier, Plan

DEFAULT_CLUSTER = "v100-2x8"          # TensorOpt's cluster: 2 nodes x 8 V100 16 GB


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


def check_algorithm(name: str, options: Mapping[str, Any] | None = None) -> None:
    """`name` is a registered search, and it takes every option given (budget_s, seed)."""
    from stratagem.search.planner import check_options
    check_options(name, options or {})


def cluster_reference(name: str) -> str:
    """What a plan file records: a preset name as given, a cluster file as an absolute path."""
    from pathlib import Path
    path = Path(name)
    return str(path.resolve()) if path.suffix in (".yaml", ".yml", ".json") else name


def check_cluster(name: str, devices: int | None):
    from stratagem.cluster import load
    cluster = load(name)
    cluster.device_count(devices)
    return cluster


def plan_at(graph: Graph, request: PlanRequest, devices: int) -> tuple[Plan, bool]:
    """The least-time plan on `devices` devices, and whether it fits the memory cap."""
    from stratagem.search import planner
    cluster = check_cluster(request.cluster, devices)
    cap = planner.memory_cap(cluster, devices, request.memory_cap_bytes)
    ctx = planner.context(graph, cluster, devices)
    ctx = replace(ctx, cluster_name=cluster_reference(request.cluster))
    if request.algorithm == "ft":
        front = planner.frontier(graph, cluster, ctx=ctx)
        try:
            return planner.mini_time(front, cap), True
        except planner.NothingFits:
            return front.min_memory, False
    function = planner.algorithm_named(request.algorithm)
    known = planner.accepted_options(function)          # None: it takes any option, the cap among them
    cap_option = {"memory_cap_bytes": cap} if known is None or "memory_cap_bytes" in known else {}
    plan = function(ctx, **request.options, **cap_option)
    return plan, plan.peak_memory_bytes <= cap


def device_counts(request: PlanRequest) -> list[int]:
    from stratagem.search.planner import device_counts as counts
    cluster = check_cluster(request.cluster, request.devices)
    return counts(cluster, 1, cluster.device_count(request.devices))


def plan_model(graph: Graph, request: PlanRequest, track: Track = lambda xs, _: xs) -> tuple[Plan, bool]:
    """(plan, fits the cap). mini_parallelism walks device counts up until one fits."""
    from stratagem.search.planner import MODES
    values.one_of(request.mode, "mode", MODES)
    if request.mode == "mini_time":
        cluster = check_cluster(request.cluster, request.devices)
        return plan_at(graph, request, cluster.device_count(request.devices))
    if request.mode != "mini_parallelism":
        raise ConfigError("mode is not one plan", expected="mini_time or mini_parallelism", got=repr(request.mode),
                          hint="profiling gives a plan per device count: profile_devices")
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
