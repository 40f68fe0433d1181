"""Operator cost under one configuration (TensorOpt Eq. 1), per device of the configuration.

    forward, backward   compute.ComputeModel.times (table, else roofline)
    sync                for the op's own trainable weights whose gradient is P(sum) on some mesh
                        axes (replicated weight, axis splitting other dims: data parallelism),
                        one all-reduce of the local gradient shard over those axes, flattened into
                        one group per coordinate of the other axes, all groups at once; weights with
                        the same axes share one bucket (as DDP's gradient buckets). With
                        `shard_updates` (ZeRO-style) a reduce-scatter, the update of 1/p of the
                        shard, and an all-gather of the updated parameters instead.
    update              one memory-bound pass of the optimizer over the local shard (/p sharded)
    gather              weights held sharded (cost.weight_state: the configuration's `state`):
                        an all-gather per data-parallel bucket before forward, again before
                        backward for "sharded"; their gradient is reduce-scattered (the sync step)
                        and their weight, gradient, optimizer state and update are 1/p;
                        "offloaded": as "sharded", each gather after a copy of the local shards
                        in from the host, the reduce-scatter followed by a copy of the gradient's
                        shards out (both over the device's host link: "host_to_device",
                        "device_to_host"), the update on the host CPU (the traffic over the host's
                        `optimizer_bytes_per_s`), and the three held in host memory, not the device's
    memory              memory.MemoryCost; a gathered weight kept until backward ("sharded_kept")
                        is held like a saved activation, one freed after forward ("sharded") lives
                        only while the op runs (cost.transient's own term)
    mixed precision     (`model.mixed_precision`: the graph computes in bf16) the op's own weights
                        are held in float32, the master its optimizer steps: weight, gradient and
                        optimizer state at 4 bytes an element, the all-reduce of a replicated
                        weight's gradient in float32; the op reads a bf16 copy (cast, then gathered
                        when sharded: gathers and reduce-scatters move bf16, as FSDP2's
                        MixedPrecisionPolicy(param_dtype=bfloat16)), kept until backward when the op's
                        backward needs its weight (`keeps_weight_copy`: a linear's), else freed

What the cost reads of the graph besides the configuration is the op's `OpFacts` (`op_facts`):
ops with equal facts cost the same under one configuration, so the cost model prices the ops of
a repeated layer once (CostModel.op_cost).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from stratagem.cost.compute import OpWork, is_contraction, local_extents
from stratagem.cost.compute_table import ProfileRequest
from stratagem.cost.costs import OpCost, WeightCopies
from stratagem.cost.memory import MemoryCost, kept_inside_bytes, keeps_weight_copy, saved_tensors
from stratagem.cost.recompute import as_captured
from stratagem.cost.steps import CommStep
from stratagem.cost.weight_state import ShardedWeight, sharded_weights
from stratagem.ir import Attrs, Role, dtype_bytes, owned_parameters
from stratagem.ir.ownership import PARAMETER_ROLES
from stratagem.space import Configuration, Partial
from stratagem.tdl.analysis import Analysis
from stratagem.tdl.library import LIBRARY
from stratagem.tdl.rng import MASK_BYTES_PER_DRAW
from stratagem.space.tensor_layout import TensorLayout, output_layout

LOW_PRECISION = ("bfloat16", "float16")


@dataclass(frozen=True)
class DescribedWork:
    """What an op's description says one device's share does: FLOPs, bytes of its inputs and
    outputs, its tensors' dtype, whether it is one contraction (before its record's facts on how
    PyTorch runs it, `work_of`)."""
    request: ProfileRequest
    flops: float
    num_bytes: float
    dtype: str
    contraction: bool
    operands: frozenset[int] = frozenset()    # Analysis.contraction_operands
    random_draws: float = 0.0                 # Analysis.random_draws: counter-based random numbers drawn


def described_work(model, op_name: str, config: Configuration) -> DescribedWork:
    op, graph = model.graph.op(op_name), model.graph
    analysis = model.analyses[op_name]
    inputs = [model.input_layout(op_name, config, i) for i in range(len(op.inputs))]
    output = output_layout(model.layout(op_name, config))
    in_bytes = sum(lay.local_num_elements(graph.tensors[t].shape) * dtype_bytes(graph.tensors[t].dtype)
                   for lay, t in zip(inputs, op.inputs))
    out_bytes = sum(_local_bytes(graph, t, output) for t in op.outputs)
    return DescribedWork(model.profile_request(op_name, config), analysis.flops(local_extents(analysis, config.degrees)),
                         in_bytes + out_bytes, graph.tensors[op.outputs[0]].dtype, is_contraction(analysis),
                         analysis.contraction_operands, analysis.random_draws(local_extents(analysis, config.degrees)))


def op_work(model, op_name: str, config: Configuration) -> OpWork:
    return work_of(described_work(model, op_name, config))


def work_of(described: DescribedWork) -> OpWork:
    """The description with the op record's facts on how PyTorch runs it: a view moves no bytes,
    its math's precision (`math_dtype`), `matrix_engine`, `gemm`; and the bytes the runtime moves
    drawing its counter-based random numbers (`tdl.rng.MASK_BYTES_PER_DRAW` each, forward only)."""
    kind = described.request.kind
    record = LIBRARY.get(kind)
    view = record is not None and record.view is not None
    return OpWork(described.request, described.flops, 0.0 if view else described.num_bytes,
                  math_dtype(kind, described.dtype), described.contraction or (record is not None and record.matrix_engine),
                  described.operands, record is not None and record.gemm, described.random_draws * MASK_BYTES_PER_DRAW)


def math_dtype(kind: str, dtype: str) -> str:
    """The precision an op's math runs in: its record's `float32_math` for float32 tensors
    (TF32 for convolutions, PyTorch's default), else the tensors' dtype. A device without a peak
    for it is priced at its 'default' peak (its float32 one)."""
    return LIBRARY[kind].float32_math if dtype == "float32" and kind in LIBRARY else dtype


@dataclass(frozen=True)
class TensorFacts:
    """What an op's cost reads of one of its tensors (its spec but the name, and whether backward
    makes its gradient)."""
    shape: tuple[int, ...]
    dtype: str
    role: Role
    sample_dim: int | None
    requires_grad: bool


@dataclass(frozen=True)
class OpFacts:
    """What `build_op_cost` reads of the graph besides the configuration, found once per op: ops
    with equal facts cost the same under every configuration. The op's tensors are numbered by
    their first place among its inputs, then its outputs (`tensors`); `inputs`, `outputs` and
    `saved` name them by that number."""
    analysis: Analysis                  # its layouts, FLOPs, contraction (one object per signature)
    kind: str                           # its record: view, math dtype, matrix engine, saves, keeps inside
    attrs: Attrs                        # the measured table's key
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    tensors: tuple[TensorFacts, ...]
    owned: tuple[int, ...]              # input positions of the weights and buffers it owns
    saved: tuple[int, ...]              # what autograd keeps for its backward (memory.saved_tensors)
    kept_copies: tuple[bool, ...]       # per owned position: keeps_weight_copy of the op as captured
    recomputed: bool                    # its block recomputes
    offloaded: bool = False             # its block offloads its activations


def op_facts(model, op_name: str) -> OpFacts:
    graph = model.graph
    op = graph.op(op_name)
    names = tuple(dict.fromkeys(op.inputs + op.outputs))
    number = {t: i for i, t in enumerate(names)}
    owned = owned_parameters(graph, op)
    captured = as_captured(graph, op)
    return OpFacts(model.analyses[op_name], op.kind, op.attrs, tuple(number[t] for t in op.inputs),
                   tuple(number[t] for t in op.outputs), tuple(_tensor_facts(graph, t) for t in names), owned,
                   tuple(number[t] for t in saved_tensors(graph, op)),
                   tuple(keeps_weight_copy(graph, captured, op.inputs[i]) for i in owned),
                   op_name in model.recomputed, op_name in model.offloaded)


def _tensor_facts(graph, tensor: str) -> TensorFacts:
    spec = graph.tensors[tensor]
    return TensorFacts(spec.shape, spec.dtype, spec.role, spec.sample_dim, tensor in graph.requires_grad)


def build_op_cost(model, op_name: str, config: Configuration) -> OpCost:
    op, graph = model.graph.op(op_name), model.graph
    inputs = [model.input_layout(op_name, config, i) for i in range(len(op.inputs))]
    output = output_layout(model.layout(op_name, config))
    work = op_work(model, op_name, config)
    times = model.compute.times(work)
    weights = [i for i in owned_parameters(graph, op) if graph.tensors[op.inputs[i]].role is Role.WEIGHT]
    grads = {i: model.input_layout(op_name, config, i, gradient=True) for i in weights}
    sharded = {w.position: w for w in sharded_weights(graph, model.layouts, op_name, config)}
    sync = _sync_steps(model, op, inputs, grads, sharded)
    shards = _update_shards(model, grads, sharded)
    gather = _gather_steps(model, tuple(sharded.values()))
    recomputed = op_name in model.recomputed
    copies = _weight_copies(model, op, inputs, weights, sharded, config.regathers, recomputed)
    backward_s = times.backward_time_s + (times.forward_time_s if recomputed else 0.0)
    host = frozenset(sharded) if config.offloaded else frozenset()
    if host:
        gather = (_host_copy(model, "host_to_device", config, _stored_bytes(model, sharded)), *gather)
        sync = (*sync, _host_copy(model, "device_to_host", config, _stored_bytes(model, sharded, gradient=True)))
    memory = _memory(model, op, inputs, output, shards, sharded, copies, recomputed, host)
    if op_name in model.offloaded:
        memory = replace(memory, offloaded_bytes=_offloaded_bytes(model, op, inputs, output))
    sent = memory.offloaded_bytes
    return OpCost(times.forward_time_s, backward_s, _update_time_s(model, op, inputs, shards, host), sync,
                  sum((s.time_s for s in sync), 0.0), memory,
                  times.source, gather, bool(gather) and (config.regathers or recomputed), copies,
                  (_host_copy(model, "device_to_host", config, sent),) if sent else (),
                  (_host_copy(model, "host_to_device", config, sent),) if sent else ())


def _offloaded_bytes(model, op, inputs: list[TensorLayout], output: TensorLayout) -> float:
    """What an op of an offloaded block sends to the host on each device (cost.activation_offload):
    the local blocks of the activations it would keep, and what its kernel keeps inside."""
    graph = model.graph
    sent = graph.meta["offload_saved"][op.name]
    inside = kept_inside(model, op, inputs[0]) if inputs else 0.0
    return inside + sum(_local_bytes(graph, t, output if t in op.outputs else inputs[op.inputs.index(t)])
                        for t in sent)


def _stored_bytes(model, sharded: dict[int, ShardedWeight], gradient: bool = False) -> float:
    """Bytes of one device's shards of the sharded weights as held (their gradients with
    `gradient`: a weight without one, frozen, has none)."""
    graph = model.graph
    return sum(_held_bytes(model, w.tensor, w.stored) for w in sharded.values()
               if not gradient or w.tensor in graph.requires_grad)


def _host_copy(model, kind: str, config: Configuration, num_bytes: float) -> CommStep:
    """A copy of `num_bytes` between each device of `config` and its host, all at once."""
    groups = tuple((d,) for d in config.devices)
    return CommStep(kind, groups, num_bytes, model.price(kind, num_bytes, groups, None))


def _weight_copies(model, op, inputs: list[TensorLayout], weights: list[int], sharded: dict[int, ShardedWeight],
                   regathers: bool, recomputed: bool) -> WeightCopies:
    """The copies of its own weights the op reads: gathered (sharded state) or cast to the
    compute dtype (mixed precision), and how long each lives. A recomputed op makes again in
    backward what it would keep."""
    graph = model.graph
    freed = kept = regathered = 0.0
    for i in weights:
        tensor = op.inputs[i]
        if i in sharded:
            size = sharded[i].read_bytes(graph)
            if regathers or recomputed:
                regathered += size
            else:
                kept += size
        elif held_itemsize(model, graph.tensors[tensor]) != dtype_bytes(graph.tensors[tensor].dtype):
            size = _local_bytes(graph, tensor, inputs[i])
            if not keeps_weight_copy(graph, as_captured(graph, op), tensor):
                freed += size
            elif recomputed:
                regathered += size
            else:
                kept += size
    return WeightCopies(freed, kept, regathered)


def held_itemsize(model, spec) -> int:
    """Bytes an element of a weight or buffer is held in: float32 under mixed precision (a
    weight's master, which the optimizer steps; buffers as the module keeps them,
    `model.mixed_precision`), else its dtype's."""
    if model.mixed_precision and spec.role in PARAMETER_ROLES and spec.dtype in LOW_PRECISION:
        return 4
    return dtype_bytes(spec.dtype)


def _local_bytes(graph, tensor: str, layout: TensorLayout) -> float:
    spec = graph.tensors[tensor]
    return float(layout.local_num_elements(spec.shape) * dtype_bytes(spec.dtype))


def _held_bytes(model, tensor: str, layout: TensorLayout) -> float:
    spec = model.graph.tensors[tensor]
    return float(layout.local_num_elements(spec.shape) * held_itemsize(model, spec))


def _partial_axes(layout: TensorLayout) -> tuple[int, ...]:
    """Axes on which a weight's gradient is partial (irregular axes counted as partial)."""
    return tuple(a for a, p in enumerate(layout.placements) if p is None or isinstance(p, Partial))


def _sync_steps(model, op, inputs: list[TensorLayout], grads: dict[int, TensorLayout],
                sharded: dict[int, ShardedWeight]) -> tuple[CommStep, ...]:
    """One collective per weight whose gradient is partial, as the runtime syncs each parameter on
    its own (`runtime.execute._sync_gradient`: a weight's and a bias's gradients are two
    collectives): a replicated weight's all-reduce (reduce-scatter and all-gather with
    `shard_updates`), a sharded weight's reduce-scatter of its gathered copy's gradient."""
    steps: list[CommStep] = []
    kinds = ("reduce_scatter", "all_gather") if model.shard_updates else ("all_reduce",)
    for i, grad in grads.items():
        axes = _partial_axes(grad)
        if not axes:
            continue
        groups = grad.axis_groups(axes)
        if i in sharded:               # the gathered copy's gradient (compute dtype): its move's backward
            num_bytes = _local_bytes(model.graph, op.inputs[i], inputs[i])
            weight_kinds, issued = ("reduce_scatter",), "move"
        else:                          # the held weight's gradient
            num_bytes, weight_kinds, issued = _held_bytes(model, op.inputs[i], inputs[i]), kinds, "sync"
        steps.extend(CommStep(k, groups, num_bytes, model.price(k, num_bytes, groups, issued)) for k in weight_kinds)
    return tuple(steps)


def _gather_steps(model, sharded: tuple[ShardedWeight, ...]) -> tuple[CommStep, ...]:
    """One all-gather per bucket of data-parallel axes of the sharded weights (as FSDP gathers a
    unit's parameters in one collective)."""
    buckets: dict[tuple, float] = {}
    for w in sharded:
        buckets[w.groups] = buckets.get(w.groups, 0.0) + w.read_bytes(model.graph)
    return tuple(CommStep("all_gather", groups, num_bytes, model.price("all_gather", num_bytes, groups, "move"))
                 for groups, num_bytes in buckets.items())


def _update_shards(model, grads: dict[int, TensorLayout], sharded: dict[int, ShardedWeight]) -> dict[int, int]:
    """Per weight position: how many devices split its update (1 unless held sharded or `shard_updates`)."""
    shards = {}
    for i, grad in grads.items():
        axes = _partial_axes(grad)
        if i in sharded:
            shards[i] = sharded[i].shards
        else:
            shards[i] = math.prod(grad.mesh_shape[a] for a in axes) if model.shard_updates and axes else 1
    return shards


def _update_traffic_bytes(model, op, inputs: list[TensorLayout], shards: dict[int, int]) -> float:
    """Bytes the optimizer's step moves over the local shards of the weights in `shards`."""
    traffic = 0.0
    for i in shards:
        spec = model.graph.tensors[op.inputs[i]]
        elements = inputs[i].local_num_elements(spec.shape) / shards[i]
        traffic += elements * model.optimizer.update_traffic_per_element(held_itemsize(model, spec))
    return traffic


def _update_time_s(model, op, inputs: list[TensorLayout], shards: dict[int, int], host: frozenset[int]) -> float:
    """The step on the device (one memory-bound pass), and on the host CPU for the weights in
    `host` (offloaded: their traffic over the host's `optimizer_bytes_per_s`)."""
    on_device = {i: n for i, n in shards.items() if i not in host}
    on_host = {i: n for i, n in shards.items() if i in host}
    time_s = 0.0
    if on_device:
        device = model.device
        traffic = _update_traffic_bytes(model, op, inputs, on_device)
        time_s += traffic / (device.memory_efficiency.at(traffic) * device.memory_bandwidth_bytes_per_s)
        time_s += len(on_device) * device.launch_overhead_s
    if on_host:
        time_s += _update_traffic_bytes(model, op, inputs, on_host) / model.cluster.spec.host.optimizer_bytes_per_s
    return time_s


def _memory(model, op, inputs: list[TensorLayout], output: TensorLayout, shards: dict[int, int],
            sharded: dict[int, ShardedWeight], copies: WeightCopies, recomputed: bool,
            host: frozenset[int]) -> MemoryCost:
    """A weight held sharded has its weight, gradient and optimizer state in its stored layout;
    `shards` (with `shard_updates`) divides optimizer state only; weights are held in
    `held_itemsize`; those of the weights in `host` (offloaded) are in host memory. A weight copy
    kept until backward counts with the saved activations, and so does what the kernel keeps
    inside (cost.memory.kept_inside_bytes), unless its block recomputes or offloads."""
    graph = model.graph

    def held(i: int) -> float:
        return _held_bytes(model, op.inputs[i], sharded[i].stored if i in sharded else inputs[i])

    def optimizer(i: int) -> float:
        spec = graph.tensors[op.inputs[i]]
        elements = inputs[i].local_num_elements(spec.shape) / shards[i]
        return elements * model.optimizer.state_bytes_per_element(held_itemsize(model, spec))

    device_held = [i for i in owned_parameters(graph, op) if i not in host]
    parameter = sum(held(i) for i in device_held)
    gradient = sum(held(i) for i in shards if i not in host)
    optimizer_bytes = sum(optimizer(i) for i in shards if i not in host)
    host_bytes = sum(held(i) for i in host) + sum(held(i) + optimizer(i) for i in shards if i in host)
    saved = saved_tensors(graph, op)
    inside = 0.0 if recomputed or op.name in model.offloaded or not inputs else kept_inside(model, op, inputs[0])
    activation = sum(_local_bytes(graph, t, output if t in op.outputs else inputs[op.inputs.index(t)])
                     for t in saved) + copies.kept_bytes + inside
    temporary = sum(_local_bytes(graph, t, output) for t in op.outputs if t not in saved)
    return MemoryCost(parameter, gradient, optimizer_bytes, activation, temporary, inside, host_bytes)


def kept_inside(model, op, first_input: TensorLayout | None) -> float:
    """What `op`'s kernel keeps for backward besides its saved tensors, its first input laid out
    as `first_input`, on the model's devices."""
    if first_input is None:
        return 0.0
    graph = model.graph
    return kept_inside_bytes(graph, op, first_input.local_num_elements(graph.tensors[op.inputs[0]].shape),
                             model.device.fused_kernels)
