"""The classic strategies as searches, each one plan (TensorOpt §5.1 and FlexFlow §8.1 compare
against them); their strategies are built in search.strategies.

    data-parallel   every op splits its batch (sample) dim over all devices (or replicates)
    fsdp            data parallel with every weight, gradient and optimizer state sharded over the
                    devices (FSDP2's fully_shard per op; ZeRO-3), weights gathered for forward and
                    again for backward (reshard_after_forward=False: kept from forward to backward);
                    recompute=True adds full activation checkpointing of every repeated block,
                    recompute_to_fit=True only of the fewest leading blocks that fit the memory cap
                    (search.selective); offload=True keeps the shards in host memory, the
                    optimizer stepping on the host CPU (FSDP2's CPUOffloadPolicy)
    fsdp-tp         what practitioners configure for LLMs (torchtitan's FSDP + TP): Megatron's
                    tensor parallelism within a node (with sequence parallelism, as torchtitan's),
                    FSDP over the data-parallel axis, every block
                    recomputed (recompute_to_fit=True: the fewest leading blocks that fit)
    model-parallel  layers to devices: contiguous runs of whole ops, balanced by compute time
    owt             Krizhevsky's one weird trick: data parallel, fully-connected layers split
    optcnn          a single objective: the min-time end of the frontier (TensorOpt: OptCNN "always
                    finds the point with the shortest per-iteration time")
    tofu-like       every tensor split across all devices, no replication (TensorOpt simulates
                    ToFu so): FT over the space without replicated axes, its min-time end
    mesh-tf         Mesh-TensorFlow's restricted space (TensorOpt §4.2): the frontier of that
                    space, its min-time end (`mesh_tf_frontier` gives the whole frontier)

tofu-like and mesh-tf take `runnable`: True keeps to what the runtime executes; False searches
the papers' whole space, as the reproduced figures do. tofu-like searches the runnable space by
default, as FT does; mesh-tf enumerates the papers' layouts as they are by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from stratagem.errors import ConfigError, StratagemError
from stratagem.plan import Frontier, Plan
from stratagem.search.context import NoOptions, PlanningContext, make_plan, recomputing
from stratagem.search.frontier import Frontier as RawFrontier
from stratagem.search.ft_search import FTSearchOptions, frontier
from stratagem.search.selective import recomputed_to_fit
from stratagem.search.space import FT_SPACE, additive_cost
from stratagem.search.strategies import (
    data_parallel_strategy, logical_dims, mesh_tf_strategies, model_parallel_strategy, owt_strategy,
    tensor_parallel_strategy, with_sharded_state,
)
from stratagem.space import SpaceOptions, ordered_factorizations
from stratagem.space.runnable import refusal

TOFU_SPACE = SpaceOptions(allow_fewer_devices=False, allow_replicate=False, max_axes=FT_SPACE.max_axes)
MESH_TF_AXES = 2
MESH_TF_LAYOUT_LIMIT = 20_000     # Mesh-TF enumerates every layout; more than this takes hours


@dataclass(frozen=True)
class RestrictedOptions:
    runnable: bool = field(default=True, metadata={"help": "keep to what stratagem.runtime executes "
                                                           "(False: the papers' whole space)"})


@dataclass(frozen=True)
class MeshTFOptions:
    runnable: bool = field(default=False, metadata={"help": "leave out the layouts stratagem.runtime "
                                                            "cannot execute"})
    layout_limit: int = field(default=MESH_TF_LAYOUT_LIMIT, metadata={"help": "refuse spaces with more "
                                                                                "layouts than this"})


TO_FIT_HELP = ("recompute only the fewest leading blocks with which the plan fits the memory cap "
               "(search.selective; instead of `recompute`'s every block or none)")
OFFLOAD_HELP = ("keep the shards of weights, gradients and optimizer state in host memory, copied in before "
                "each gather and out after each reduce-scatter, the optimizer stepping on the host CPU "
                "(FSDP2's CPUOffloadPolicy; the cluster file's `host` section prices it)")


@dataclass(frozen=True)
class FSDPOptions:
    reshard_after_forward: bool = field(default=True, metadata={
        "help": "free each gathered weight after forward and gather it again for backward "
                "(False: keep it until backward)"})
    recompute: bool = field(default=False, metadata={"help": "recompute every repeated block in backward "
                                                             "(full activation checkpointing)"})
    recompute_to_fit: bool = field(default=False, metadata={"help": TO_FIT_HELP})
    offload: bool = field(default=False, metadata={"help": OFFLOAD_HELP})


@dataclass(frozen=True)
class FSDPTPOptions:
    tensor: int = field(default=0, metadata={"help": "tensor-parallel width (0: the devices of a node, "
                                                     "halved until the data-parallel width divides the batch)"})
    recompute: bool = field(default=True, metadata={"help": "recompute every repeated block in backward"})
    reshard_after_forward: bool = field(default=True, metadata={"help": "as fsdp's"})
    recompute_to_fit: bool = field(default=False, metadata={"help": TO_FIT_HELP})
    offload: bool = field(default=False, metadata={"help": OFFLOAD_HELP})
    sequence_parallel: bool = field(default=True, metadata={
        "help": "split the sequence over the tensor axis between a row-parallel linear and the next "
                "column-parallel one (reduce-scatter, then all-gather, instead of an all-reduce), as "
                "torchtitan's tensor parallelism does"})


class TooManyLayouts(StratagemError):
    """Mesh-TensorFlow's space is too large to enumerate."""


def data_parallel(ctx: PlanningContext, options: NoOptions = NoOptions()) -> Plan:
    return make_plan(ctx, data_parallel_strategy(ctx), "data-parallel")


def fsdp(ctx: PlanningContext, options: FSDPOptions = FSDPOptions()) -> Plan:
    state = weight_state(options)
    return _recomputed(ctx, lambda c: with_sharded_state(c, data_parallel_strategy(c), state), "fsdp", options)


def fsdp_tp(ctx: PlanningContext, options: FSDPTPOptions = FSDPTPOptions()) -> Plan:
    tensor = options.tensor or tensor_width(ctx)
    if tensor < 1 or ctx.num_devices % tensor:
        raise StratagemError("tensor-parallel width does not divide the devices",
                             expected=f"a divisor of {ctx.num_devices}", got=str(tensor))
    state = weight_state(options)
    def strategy(c: PlanningContext) -> dict:
        return with_sharded_state(c, tensor_parallel_strategy(c, tensor, options.sequence_parallel), state)
    return _recomputed(ctx, strategy, "fsdp-tp", options)


def weight_state(options: FSDPOptions | FSDPTPOptions) -> str:
    """The weight state (space.config) FSDP's options give: offloaded (which frees each gathered
    weight after forward, as FSDP2 does with CPUOffloadPolicy), else freed or kept after forward."""
    if options.offload:
        if not options.reshard_after_forward:
            raise ConfigError("offload frees each gathered weight after forward",
                              expected="reshard_after_forward=true with offload=true",
                              got="reshard_after_forward=false", hint="Drop one of the two options")
        return "offloaded"
    return "sharded" if options.reshard_after_forward else "sharded_kept"


def _recomputed(ctx: PlanningContext, strategy_of, algorithm: str, options: FSDPOptions | FSDPTPOptions) -> Plan:
    """The practitioners' plan with its blocks recomputed as `options` say: the fewest that fit
    (`recompute_to_fit`), every one (`recompute`) or none."""
    if options.recompute_to_fit:
        return recomputed_to_fit(ctx, make_plan(ctx, strategy_of(ctx), algorithm))
    ctx = recomputing(ctx) if options.recompute else ctx
    return make_plan(ctx, strategy_of(ctx), algorithm)


def tensor_width(ctx: PlanningContext) -> int:
    """The devices of a node, halved until the remaining (data-parallel) width divides the batch."""
    tensor = min(ctx.model.cluster.spec.devices_per_node, ctx.num_devices)
    batch = min(ctx.graph.batch_sizes, default=1)
    while tensor > 1 and (ctx.num_devices % tensor or batch % (ctx.num_devices // tensor)):
        tensor //= 2
    return tensor


def owt(ctx: PlanningContext, options: NoOptions = NoOptions()) -> Plan:
    return make_plan(ctx, owt_strategy(ctx), "owt")


def model_parallel(ctx: PlanningContext, options: NoOptions = NoOptions()) -> Plan:
    return make_plan(ctx, model_parallel_strategy(ctx), "model-parallel")


def optcnn(ctx: PlanningContext, options: NoOptions = NoOptions()) -> Plan:
    """OptCNN minimizes its cost model's time: the frontier's additive (Eq. 3) min-time end."""
    return replace(frontier(ctx)[-1], algorithm="optcnn")


def tofu_like(ctx: PlanningContext, options: RestrictedOptions = RestrictedOptions()) -> Plan:
    front = frontier(ctx, FTSearchOptions(space=TOFU_SPACE, runnable=options.runnable))
    return replace(front.min_time, algorithm="tofu-like")


def mesh_tf_layout_count(ctx: PlanningContext) -> int:
    """How many (mesh shape, logical dim per axis) layouts `mesh_tf_strategies` walks."""
    names = len(set(logical_dims(ctx).values()))
    return sum((names + 1) ** len(shape) for shape in ordered_factorizations(ctx.num_devices, MESH_TF_AXES))


def mesh_tf_frontier(ctx: PlanningContext, options: MeshTFOptions = MeshTFOptions()) -> Frontier:
    """Every Mesh-TF layout priced (Eq. 3), the additive frontier of them simulated; with
    `runnable`, the layouts whose plan the runtime refuses are left out."""
    count = mesh_tf_layout_count(ctx)
    if count > options.layout_limit:
        raise TooManyLayouts("Mesh-TF's space is too large to enumerate",
                             expected=f"at most {options.layout_limit:,} layouts",
                             got=f"about {count:,} (every logical dim on every axis of every 2-axis mesh)")
    seen, candidates = set(), []
    for key, strategy in mesh_tf_strategies(ctx, MESH_TF_AXES):
        signature = tuple(sorted((op, str(c)) for op, c in strategy.items()))
        if signature in seen or (options.runnable and _refused(ctx, strategy)):
            continue
        seen.add(signature)
        candidates.append((additive_cost(ctx.model, strategy), strategy, key))
    mems = np.array([c[0][0] for c in candidates])
    times = np.array([c[0][1] for c in candidates])
    reduced = RawFrontier.reduce(mems, times, list(range(len(candidates))))
    plans = [make_plan(ctx, candidates[i][1], "mesh-tf",
                       details={"mesh": list(candidates[i][2][0]), "logical_dims": list(candidates[i][2][1])})
             for i in reduced.payload]
    return Frontier(plans, {"algorithm": "mesh-tf", "layouts": len(candidates)})


def _refused(ctx: PlanningContext, strategy) -> bool:
    return any(refusal(ctx.model.analyses[op], config, ctx.num_devices) for op, config in strategy.items())


def mesh_tf(ctx: PlanningContext, options: MeshTFOptions = MeshTFOptions()) -> Plan:
    return replace(mesh_tf_frontier(ctx, options).min_time, algorithm="mesh-tf")
