"""What every search takes and returns through, below all of them.

    context(graph, cluster, devices, optimizer, memory_cap_bytes)  -> PlanningContext
    make_plan(ctx, strategy, algorithm)   a strategy, priced (TensorOpt Eq. 3) and simulated: a Plan
    NothingFits                           no plan fits the memory cap

A search is `run(ctx, options) -> Plan` (search.registry); it finds the graph, the cluster, the
cost model, the optimizer and the memory cap in the context, never as loose arguments, and the
reporter it tells its progress (search.progress; silent unless a caller gives one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from stratagem import values
from stratagem.forked import shared_map
from stratagem.cluster import Cluster, load
from stratagem.cost import CostModel
from stratagem.cost.recompute import blocks
from stratagem.cost.throughput import throughput
from stratagem.cost.transient import transient_terms
from stratagem.errors import ConfigError, StratagemError
from stratagem.ir import Graph, has_master_weights, with_precision
from stratagem.plan import Plan
from stratagem.search.agreement import memory_gap_note
from stratagem.search.progress import SILENT, Progress
from stratagem.search.space import additive_cost
from stratagem.sim.builder import Simulation
from stratagem.sim.pipeline import PipelineSimulation
from stratagem.space import Configuration, SpaceOptions, Strategy, pipeline_of

T = TypeVar("T")

MEMORY_SAFETY = 1.1       # TensorOpt §5.2: a 16 GB device plans for 16 / 1.1 = 14.5 GB


class NothingFits(StratagemError):
    """No plan fits the memory cap."""


@dataclass(frozen=True)
class NoOptions:
    """The options of a search that takes none."""


@dataclass(frozen=True)
class PlanningContext:
    graph: Graph
    cluster: Cluster
    cluster_name: str                  # as a plan file records it: a preset name or a file path
    model: CostModel
    optimizer: str
    memory_cap_bytes: float            # per device: what a plan must fit in
    zoo_name: str = ""
    precision: str = "fp32"            # ir.precision.PRECISIONS
    progress: Progress = field(default=SILENT, compare=False, repr=False)   # search.progress: who watches

    @property
    def num_devices(self) -> int:
        return self.model.num_devices


def context(graph: Graph, cluster: Cluster | str, devices: int | None = None, optimizer: str = "adam",
            memory_cap_bytes: float | str | None = None, model_options: Mapping[str, Any] | None = None,
            precision: str = "fp32", recompute: tuple[str, ...] = (),
            offload_activations: tuple[str, ...] = ()) -> PlanningContext:
    """What every search plans with: the graph as `precision` computes it (ir.precision), its cost
    model on the cluster with the blocks `recompute` recomputed (cost.recompute) and the blocks
    `offload_activations` offloading theirs (cost.activation_offload), the memory cap."""
    check_graph(graph)
    graph = with_precision(graph, precision)
    loaded = cluster if isinstance(cluster, Cluster) else load(cluster)
    options = {"mixed_precision": has_master_weights(precision), "recompute": tuple(recompute),
               "offload_activations": tuple(offload_activations), **dict(model_options or {})}
    model = CostModel(graph, loaded, optimizer=optimizer, num_devices=devices, **options)
    name = cluster if isinstance(cluster, str) else loaded.name
    cap = memory_cap(loaded, model.num_devices, memory_cap_bytes)
    return PlanningContext(graph, loaded, name, model, optimizer, cap, graph.meta.get("zoo", ""), precision)


def check_graph(graph: Any) -> None:
    if not isinstance(graph, Graph):
        raise ConfigError("not a graph", expected="a Graph from sg.zoo.build(name) or sg.capture(module, inputs)",
                          got=type(graph).__name__)


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


def runnable_space(space: SpaceOptions, runnable: bool) -> SpaceOptions:
    """`space`, kept to what stratagem.runtime executes when `runnable` (the planner's default:
    a plan it returns runs; runnable=False searches the papers' whole spaces)."""
    return replace(space, runnable=True) if runnable else space


LABELS = ("label", "stage_plan", "stage_points")     # a plan's details that say what it is, kept by its variants


def labels_of(plan: Plan) -> dict[str, Any]:
    """The details of `plan` that a variant of it (other blocks recomputed) keeps."""
    return {key: plan.details[key] for key in LABELS if key in plan.details}


def make_plan(ctx: PlanningContext, strategy: Mapping[str, Configuration], algorithm: str,
              reuse: Mapping[int, str] | None = None, details: Mapping[str, Any] | None = None) -> Plan:
    """A simulated plan with both its additive and its simulated costs. `reuse`: tensor-reuse
    choices by edge index (FT's form), or none."""
    chosen = strategy_with_reuse(ctx, strategy, reuse)
    if chosen.pipeline is not None:
        return _pipeline_plan(ctx, chosen, algorithm, details)
    terms = tuple(transient_terms(ctx.model, chosen))        # T(S)'s terms, read three times below
    mem, time = additive_cost(ctx.model, chosen, terms)
    simulation = Simulation(ctx.model, chosen, representative=True)
    result = simulation.run()
    details = dict(details or {})
    gap = memory_gap_note(ctx.model, chosen, mem, simulation, result.peak_memory_bytes, terms)
    if gap:
        details["memory_gap"] = gap
    details["memory_by_kind"] = memory_by_kind(ctx.model, chosen, terms)
    rate = throughput(ctx.model, result.iteration_time_s)
    details["throughput"] = {"per_s": rate.items_per_s, "unit": rate.unit, "mfu": rate.mfu}
    states = Counter(c.state for c in chosen.values() if c.sharded_state)
    if states.get("offloaded") or ctx.model.offload_activations:
        details["host_memory"] = {"per_node_bytes": ctx.model.host_bytes_per_node(chosen),
                                  "node_bytes": ctx.model.cluster.spec.host.memory_bytes}
    if states:
        details["weight_states"] = dict(states)
        details["weight_states_effect"] = sharding_effect(ctx.model, chosen, terms)
    if ctx.model.recompute:
        details["recompute_effect"] = recompute_effect(ctx, chosen, terms)
    if ctx.model.offload_activations:
        details["offload_effect"] = offload_effect(ctx, chosen, terms)
    plan = Plan(ctx.graph, ctx.cluster_name, ctx.num_devices, chosen, additive_time_s=time,
                additive_memory_bytes=mem, algorithm=algorithm, optimizer=ctx.optimizer,
                model=ctx.zoo_name, details=details, precision=ctx.precision, recompute=ctx.model.recompute,
                offload_activations=ctx.model.offload_activations)
    return plan.with_simulation(result)


def strategy_with_reuse(ctx: PlanningContext, strategy: Mapping[str, Configuration],
                        reuse: Mapping[int, str] | None = None) -> Strategy:
    """The strategy a plan simulates: `strategy` with the tensor-reuse choices `reuse` (by edge
    index, FT's form) and its stages."""
    edges = ctx.model.edges()
    return Strategy(strategy, {edges[k]: option for k, option in (reuse or {}).items()}, pipeline_of(strategy))


def plans_shared(ctx: PlanningContext, make: Callable[[T], Plan | None], items: Sequence[T],
                 on_plan: Callable[[int, Plan | None], None] | None = None, workers: int | None = None
                 ) -> list[Plan | None]:
    """[make(item) for item in items] (each a plan of ctx.graph, priced and simulated, or None),
    shared among forked workers (stratagem.forked): each plan comes back without its graph, which
    this process has, and gets it here; `on_plan(i, plan)` sees each as it comes."""
    def made(item: T) -> Plan | None:
        return _graph_set(make(item), None)

    def back(i: int, plan: Plan | None) -> None:
        if on_plan is not None:
            on_plan(i, _graph_set(plan, ctx.graph))

    return [_graph_set(plan, ctx.graph) for plan in shared_map(made, items, back, workers)]


def _graph_set(plan: Plan | None, graph: Graph | None) -> Plan | None:
    return None if plan is None else replace(plan, graph=graph)


def _pipeline_plan(ctx: PlanningContext, strategy: Strategy, algorithm: str,
                   details: Mapping[str, Any] | None) -> Plan:
    """A plan with stages, simulated (sim.pipeline). Eq. 3 prices one step on every device, not a
    schedule: such a plan records its simulated costs as its additive ones, and says so."""
    simulation = PipelineSimulation(ctx.model, strategy, representative=True)
    result = simulation.run()
    pipe, run = strategy.pipeline, simulation.schedule_run
    details = dict(details or {})
    details["memory_by_kind"] = memory_by_kind(ctx.model, strategy)
    details["pipeline"] = {"in_flight": list(run.in_flight),
                           "bubble": max(run.idle_fraction(s) for s in range(pipe.num_stages)),
                           "stage_times_s": [[t.forward_s, t.backward_s, t.tail_s, t.send_s, t.send_back_s]
                                             for t in simulation.stage_times()]}
    rate = throughput(ctx.model, result.iteration_time_s, pipe.micro_batches)
    details["throughput"] = {"per_s": rate.items_per_s, "unit": rate.unit, "mfu": rate.mfu}
    details["additive"] = "Eq. 3 prices no schedule: the simulated costs"
    if ctx.model.offload_activations or any(c.state == "offloaded" for c in strategy.values()):
        details["host_memory"] = {"per_node_bytes": simulation.host_bytes_per_node(),
                                  "node_bytes": ctx.model.cluster.spec.host.memory_bytes}
    plan = Plan(ctx.graph, ctx.cluster_name, ctx.num_devices, strategy, additive_time_s=result.iteration_time_s,
                additive_memory_bytes=result.peak_memory_bytes, algorithm=algorithm, optimizer=ctx.optimizer,
                model=ctx.zoo_name, details=details, precision=ctx.precision, recompute=ctx.model.recompute,
                offload_activations=ctx.model.offload_activations)
    return plan.with_simulation(result)


def recomputing(ctx: PlanningContext, names: tuple[str, ...] | None = None) -> PlanningContext:
    """The same planning with the blocks `names` recomputed (None: every block of the graph)."""
    names = tuple(b.name for b in blocks(ctx.graph)) if names is None else names
    return replace(ctx, model=ctx.model.recomputing(names))


def offloading(ctx: PlanningContext, names: tuple[str, ...] | None = None) -> PlanningContext:
    """The same planning with the blocks `names` offloading their activations to host memory
    (None: every block of the graph), the others keeping theirs."""
    names = tuple(b.name for b in blocks(ctx.graph)) if names is None else names
    return replace(ctx, model=ctx.model.with_activations((), names))


def offload_effect(ctx: PlanningContext, strategy: Strategy, terms: Sequence[tuple] | None = None
                   ) -> dict[str, float]:
    """What offloading the plan's blocks' activations saves (kept activations on the device where
    the plan peaks) and costs (additive time: the copies to the host and back), against keeping
    them (the recomputed blocks recomputed as before)."""
    return _effect(ctx.model.with_activations(ctx.model.recompute, ()), strategy, ctx.model, strategy,
                   ("activations",), terms)


def sharding_effect(model, strategy: Strategy, terms: Sequence[tuple] | None = None) -> dict[str, float]:
    """What holding weights sharded saves (weights, gradients and optimizer state on the device
    where the plan peaks) and costs (additive time: gathers, reduce-scatters), against the same
    strategy with every weight replicated. `terms`: the strategy's transient_terms, where the
    caller has them."""
    replicated = Strategy({op: c.base for op, c in strategy.items()}, strategy.reuse)
    return _effect(model, replicated, model, strategy, ("weights", "gradients", "optimizer_state"), terms)


def recompute_effect(ctx: PlanningContext, strategy: Strategy, terms: Sequence[tuple] | None = None
                     ) -> dict[str, float]:
    """What recomputing the plan's blocks saves (kept activations on the device where the plan
    peaks) and costs (additive time), against keeping every activation."""
    return _effect(ctx.model.recomputing(()), strategy, ctx.model, strategy, ("activations",), terms)


def _effect(model_a, strategy_a, model_b, strategy_b, kinds, terms_b: Sequence[tuple] | None = None
            ) -> dict[str, float]:
    parts_a, parts_b = model_a.memory_parts(strategy_a), model_b.memory_parts(strategy_b, terms_b)
    device = max(range(model_b.num_devices), key=lambda d: sum(kind[d] for kind in parts_b.values()))
    saved = sum(parts_a[k][device] - parts_b[k][device] for k in kinds)
    return {"saved_bytes": saved,
            "time_s": model_b.plan_times_s(strategy_b)[0] - model_a.plan_times_s(strategy_a)[0]}


def memory_by_kind(model, strategy: Mapping[str, Configuration], terms: Sequence[tuple] | None = None
                   ) -> dict[str, Any]:
    """The additive memory by kind (cost.model.memory_parts) on the device where it peaks."""
    parts = model.memory_parts(strategy, terms)
    device = max(range(model.num_devices), key=lambda d: sum(kind[d] for kind in parts.values()))
    found = {"device": device, **{kind: values[device] for kind, values in parts.items()}}
    if any(config.offloaded for config in strategy.values()):
        found["host"] = model.host_bytes(strategy)[device]
    return found


def fits_host(plan: Plan) -> bool:
    """Whether what the plan offloads fits its nodes' host memory (nothing offloaded: it does)."""
    host = plan.details.get("host_memory")
    return host is None or host["per_node_bytes"] <= host["node_bytes"]


def least_time(plans: list[Plan], memory_cap_bytes: float) -> Plan:
    """The least simulated time under the cap (TensorOpt §4.1's mini-time choice), of the plans
    whose offloaded state fits the host memory too."""
    under_cap = [p for p in plans if p.peak_memory_bytes <= memory_cap_bytes]
    fitting = [p for p in under_cap if fits_host(p)]
    if under_cap and not fitting:
        least = min(p.details["host_memory"]["per_node_bytes"] for p in under_cap)
        raise NothingFits("no plan under the memory cap fits the host memory it offloads to",
                          expected=f"at most {under_cap[0].details['host_memory']['node_bytes'] / 2**30:.0f} GiB "
                                   "of host memory per node (the cluster file's host.memory_bytes)",
                          got=f"the least any plan offloads is {least / 2**30:.1f} GiB per node",
                          hint="Use more devices (more nodes share the offloaded state) or a cluster file "
                               "with more host memory")
    if not fitting:
        least = min(p.peak_memory_bytes for p in plans)
        raise NothingFits("no plan fits the memory cap", expected=f"peak memory <= {memory_cap_bytes / 2**30:.2f} GiB",
                          got=f"the least any plan needs is {least / 2**30:.2f} GiB",
                          hint="Raise --memory-cap, use more devices, or a smaller batch")
    return min(fitting, key=lambda p: (p.iteration_time_s, p.peak_memory_bytes))
