"""The work behind `stratagem plan` and `stratagem frontier`: a zoo model, a cluster, a mode, a search.

    plan_model(graph, request)        one plan and whether it fits: mini_time (least time under the cap
                                      on the devices) or mini_parallelism (fewest devices that fit)
    profile_devices(graph, request)   profiling: {device count: (plan, fits)}
    frontier_with_context(...)        FT's frontier and the context that priced it

The modes are search.modes' (TensorOpt §4.1), for FT or any registered search (search.registry).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stratagem import values
from stratagem.cluster import Cluster, load
from stratagem.errors import ConfigError
from stratagem.ir import Graph
from stratagem.plan import Frontier, Plan
from stratagem.search import modes, registry
from stratagem.search.context import PlanningContext, context
from stratagem.search.ft_search import FTSearchOptions
from stratagem.search.modes import fastest_fitting
from stratagem.search.progress import SILENT, Progress, phase

DEFAULT_CLUSTER = "v100-2x8"          # TensorOpt's cluster: 2 nodes x 8 V100 16 GB


@dataclass(frozen=True)
class PlanRequest:
    model: str
    cluster: str = DEFAULT_CLUSTER
    devices: int | None = None                 # None: every device of the cluster
    mode: str = "mini_time"
    memory_cap_bytes: float | None = None      # None: device memory / 1.1 (TensorOpt §5.2)
    algorithm: str = "ft"
    options: Mapping[str, Any] = field(default_factory=dict)   # the algorithm's options by name
    batch_size: int | None = None
    precision: str = "fp32"                    # ir.precision.PRECISIONS (the CLI: the zoo model's)


def zoo_precision(model: str) -> str:
    """The precision a zoo model's users train it in (zoo.info; imports torch)."""
    from stratagem import zoo
    return zoo.info(model).precision


def build_graph(model: str, batch_size: int | None = None) -> Graph:
    """The captured graph of a zoo model (imports torch)."""
    from stratagem import zoo
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zoo.build(model, batch_size=batch_size)


def check_algorithm(name: str, options: Mapping[str, Any] | None = None) -> None:
    """`name` is a registered search, and it takes every option given."""
    registry.make_options(name, options or {})


def cluster_reference(name: str) -> str:
    """What a plan file records: a preset name as given, a cluster file as an absolute path."""
    path = Path(name)
    return str(path.resolve()) if path.suffix in (".yaml", ".yml", ".json") else name


def check_cluster(name: str, devices: int | None) -> Cluster:
    cluster = load(name)
    cluster.device_count(devices)
    return cluster


def planning_context(graph: Graph, request: PlanRequest, devices: int | None,
                     progress: Progress = SILENT) -> PlanningContext:
    cluster = check_cluster(request.cluster, devices)
    ctx = context(graph, cluster, devices, memory_cap_bytes=request.memory_cap_bytes, precision=request.precision)
    return replace(ctx, cluster_name=cluster_reference(request.cluster), progress=progress)


def counts_of(request: PlanRequest) -> list[int]:
    cluster = check_cluster(request.cluster, request.devices)
    return modes.device_counts(cluster, 1, cluster.device_count(request.devices))


def plan_model(graph: Graph, request: PlanRequest, progress: Progress = SILENT) -> tuple[Plan, bool]:
    """(plan, fits the cap). mini_parallelism walks device counts up until one fits. The searches
    tell `progress` their phases; a Ctrl-C returns the best found so far (search.stopping)."""
    values.one_of(request.mode, "mode", modes.MODES)
    if request.mode == "mini_time":
        ctx = planning_context(graph, request, request.devices, progress)
        return modes.plan_at(ctx, request.algorithm, request.options)
    if request.mode != "mini_parallelism":
        raise ConfigError("mode is not one plan", expected="mini_time or mini_parallelism", got=repr(request.mode),
                          hint="profiling gives a plan per device count: profile_devices")
    return modes.fewest_devices(_contexts(graph, request, progress), request.algorithm, request.options)


def profile_devices(graph: Graph, request: PlanRequest, progress: Progress = SILENT
                    ) -> dict[int, tuple[Plan, bool]]:
    return modes.by_device_count(_contexts(graph, request, progress), request.algorithm, request.options)


def _contexts(graph: Graph, request: PlanRequest, progress: Progress) -> Iterator[PlanningContext]:
    """A planning context per device count, ascending: a phase of `progress`, one unit each."""
    counts = counts_of(request)
    with phase(progress, "device counts", len(counts)):
        for n in counts:
            yield planning_context(graph, request, n, progress)
            progress.advance()


def frontier_with_context(graph: Graph, cluster_name: str, devices: int | None,
                          memory_cap_bytes: float | None = None, precision: str = "fp32",
                          progress: Progress = SILENT, bound: bool = False) -> tuple[Frontier, PlanningContext]:
    """(frontier by FT, with plans with stages merged in across nodes; the planning context that
    priced it). Stopped by Ctrl-C: the points simulated so far (search.stopping). `bound`: with
    FT's gap to a certified lower bound (search.ft_bound)."""
    request = PlanRequest("", cluster_name, devices, memory_cap_bytes=memory_cap_bytes, precision=precision)
    ctx = planning_context(graph, request, devices, progress)
    return modes.frontier_and_stages(ctx, FTSearchOptions(bound=bound)), ctx


__all__ = ["DEFAULT_CLUSTER", "PlanRequest", "build_graph", "check_algorithm", "check_cluster",
           "cluster_reference", "counts_of", "fastest_fitting", "frontier_with_context", "plan_model",
           "planning_context", "profile_devices"]
