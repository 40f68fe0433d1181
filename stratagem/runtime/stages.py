"""A pipeline plan cut into its stages, each a plan for one stage's devices (no torch here).

A plan with stages (space.pipeline) holds the graph of one micro-batch; stage s of p runs
graph.ops[start_s : start_{s+1}] on devices [s d, (s + 1) d), d = num_devices / p. The runtime
(runtime.pipeline) runs each stage as an ordinary plan for d devices, so everything the op-by-op
interpreter does (splits, sharded weight states, recomputed and offloaded blocks, mixed precision)
holds inside a stage unchanged:

    Stage(s).plan   graph    the stage's ops; its inputs, in this order: the activations it
                             receives (`received`: the boundary tensors of cut s - 1), then the
                             graph inputs its ops read (`inputs`: tokens in the first stage,
                             targets in the last); its outputs: the boundary tensors of cut s
                             (`sent`; those it only passes on included), or the loss in the last
                             stage. Its weights are the ones its ops read (space.pipeline refuses
                             a weight read in two stages); weights no op reads go with stage 0.
                    configurations  each op's, moved down by s d onto devices 0..d-1
                    recompute       the plan's recomputed blocks found in the stage's graph
                    offload_activations   the plan's offloaded blocks found there, likewise
    stage_schedules(stages, i)     what rank s d + i runs in each stage (runtime.schedule): a
                             received activation arrives in the layout its producer left it in
                             (the sender passes its local block, rank s d + i to (s + 1) d + i), so
                             no collective runs at a cut; each consumer then moves it as usual

What micro-batching cannot run as the same training (space.micro_batching) is refused before
anything launches (`require_micro_batchable`, called by runtime.runnable).

The loss: the graph's loss is a mean (or sum) over one micro-batch; each micro-batch's loss is
weighted by `loss_weight` (1/m for a mean, 1 for a sum) before backward, so that the m gradients
accumulate to the gradient of the global batch's loss, and the weighted losses add up to it.
`rounding_steps_of(plan)` counts the rounding of that computation for the same-training check
(runtime.compare): the micro-batch graph's steps, the loss's own over the global batch (its
reduction runs over m times the elements), and the m - 1 additions of the micro-batch losses.
A mean whose count depends on the data (cross-entropy over the targets that are not ignore_index)
is weighted 1/m per micro-batch all the same: exact when no target is ignored (the zoo's inputs),
not otherwise, which no check before launch can see; a class-weighted mean is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stratagem.cost.recompute import blocks
from stratagem.errors import ConfigError
from stratagem.ir import Graph, Role
from stratagem.ir.attrs import Attrs
from stratagem.ir.dtypes import FLOATING
from stratagem.plan import Plan
from stratagem.runtime.errors import NotRunnable
from stratagem.runtime.schedule import Schedule, build_schedule
from stratagem.space import (
    Pipeline, Strategy, boundary_tensors, check_pipeline, pipeline_of, stage_ops,
)
from stratagem.space.micro_batching import check_micro_batchable, loss_reduction
from stratagem.space.tensor_layout import TensorLayout
from stratagem.tdl.graphops import AnalysisCache
from stratagem.tdl.rounding import op_steps, rounding_steps



@dataclass(frozen=True)
class Stage:
    index: int
    num_stages: int
    plan: Plan                      # the stage's ops as a plan for its d devices
    received: tuple[str, ...]       # activations from the stage before, in boundary order
    inputs: tuple[str, ...]         # graph inputs its ops read, in graph order
    sent: tuple[str, ...]           # to the stage after; the loss in the last stage

    @property
    def is_last(self) -> bool:
        return self.index == self.num_stages - 1


def pipeline(plan: Plan) -> Pipeline | None:
    return pipeline_of(plan.strategy)


def stages_of(plan: Plan) -> tuple[Stage, ...]:
    pipe = _pipeline(plan)
    graph, p = plan.graph, pipe.num_stages
    device_blocks = pipe.stage_devices(plan.num_devices)
    boundary = boundary_tensors(graph, pipe)
    found = []
    for s, names in enumerate(stage_ops(graph, pipe)):
        received = boundary[s - 1] if s > 0 else ()
        sent = boundary[s] if s < p - 1 else tuple(graph.outputs)
        found.append(_stage(plan, s, p, names, received, sent, device_blocks[s].start))
    return tuple(found)


def _stage(plan: Plan, s: int, p: int, names: tuple[str, ...], received: tuple[str, ...],
           sent: tuple[str, ...], first_device: int) -> Stage:
    graph = _stage_graph(plan.graph, s, names, received, sent)
    own = set(names)
    strategy = Strategy({n: replace(plan.strategy[n], first_device=plan.strategy[n].first_device - first_device)
                         for n in names},
                        {e: o for e, o in plan.strategy.reuse.items() if e.dst_op in own})
    found = {b.name for b in blocks(graph)}
    stage_plan = Plan(graph, plan.cluster, plan.num_devices // p, strategy, algorithm=plan.algorithm,
                      optimizer=plan.optimizer, model=plan.model, precision=plan.precision,
                      recompute=tuple(b for b in plan.recompute if b in found),
                      offload_activations=tuple(b for b in plan.offload_activations if b in found))
    inputs = tuple(t for t in graph.inputs if t not in received)
    return Stage(s, p, stage_plan, tuple(received), inputs, tuple(sent))


def _stage_graph(graph: Graph, s: int, names: tuple[str, ...], received: tuple[str, ...],
                 sent: tuple[str, ...]) -> Graph:
    """The stage's ops over their tensors; inputs: the received activations, then the graph
    inputs the ops read; outputs: `sent`. Stage 0 holds the weights no op reads too."""
    ops = tuple(graph.op(n) for n in names)
    read = {t for op in ops for t in op.inputs}
    tensors = {t: replace(graph.tensors[t], role=Role.INPUT) for t in received}
    tensors.update((t, graph.tensors[t]) for t in graph.inputs if t in read)
    for op in ops:
        tensors.update((t, graph.tensors[t]) for t in (*op.inputs, *op.outputs) if t not in tensors)
    if s == 0:
        tensors.update((spec.name, spec) for spec in graph.tensors.values()
                       if spec.role in (Role.WEIGHT, Role.BUFFER) and spec.name not in graph.consumers)
    updates = {b: t for b, t in (graph.meta.get("state_updates") or {}).items() if b in tensors}
    return Graph(f"{graph.name}/stage{s}", tensors, ops, sent, Attrs({**graph.meta, "state_updates": updates}))


def stage_schedules(stages: tuple[Stage, ...], rank_in_stage: int) -> tuple[Schedule, ...]:
    """Rank `rank_in_stage`'s schedule in every stage (every rank builds all of them, so all agree
    on the meshes to create); a received activation's layout is the one its producer gave it."""
    layouts: dict[str, TensorLayout] = {}
    found = []
    for stage in stages:
        p = stage.plan
        schedule = build_schedule(p.graph, p.strategy, p.num_devices, rank_in_stage,
                                  {t: layouts[t] for t in stage.received})
        layouts.update((t, schedule.sources[t]) for t in stage.sent)
        found.append(schedule)
    return tuple(found)


def requires_grad(graph: Graph, tensor: str) -> bool:
    """Whether backward produces a gradient for `tensor` (floating, computed from a weight)."""
    return graph.tensors[tensor].dtype in FLOATING and tensor in graph.requires_grad


# ---- what micro-batching runs as the same training -------------------------------------------

def require_micro_batchable(plan: Plan) -> None:
    """Refuse (NotRunnable, nothing launched) a pipeline plan whose micro-batches would not train
    as the global batch does (space.micro_batching); a plan without stages passes."""
    pipe = pipeline(plan)
    if pipe is None:
        return
    check_pipeline(plan.graph, plan.strategy, pipe, plan.num_devices)
    try:
        check_micro_batchable(plan.graph)
    except ConfigError as error:
        raise NotRunnable(error.what, expected=error.expected, got=error.got,
                          hint=f"Nothing was launched. {error.hint}") from None


def loss_weight(plan: Plan) -> float:
    """Each micro-batch loss's weight in the global batch's loss: 1/m for a mean, 1 for a sum
    (space.micro_batching; require_micro_batchable refuses any other)."""
    pipe = _pipeline(plan)
    return 1.0 / pipe.micro_batches if loss_reduction(plan.graph) == "mean" else 1.0


def rounding_steps_of(plan: Plan) -> float:
    """steps() of what the run computes (stratagem.tdl.rounding), for runtime.compare's bounds."""
    pipe, graph = pipeline(plan), plan.graph
    steps = rounding_steps(graph)
    if pipe is None:
        return steps
    analyses = AnalysisCache(graph)
    loss = graph.producer[graph.outputs[0]]
    elements = sum(_numel(graph.tensors[t].shape) for t in loss.outputs)
    loss_steps = op_steps(analyses[loss.name] if loss.kind != "opaque" else None, elements)
    return steps + (pipe.micro_batches - 1) * loss_steps + pipe.micro_batches - 1


def global_batch_factor(plan: Plan) -> int:
    """How many of the graph's batches one step trains on: m for a pipeline plan, else 1."""
    pipe = pipeline(plan)
    return 1 if pipe is None else pipe.micro_batches




def _pipeline(plan: Plan) -> Pipeline:
    pipe = pipeline(plan)
    if pipe is None:
        raise ConfigError("the plan has no pipeline stages", expected="a plan whose strategy has a pipeline")
    return pipe


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n

