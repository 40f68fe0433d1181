"""A plan as an nn.Module: `parallelize(module, plan)` (TensorOpt §4, Listing 1).

Under torchrun, every rank builds the same `PlanModule` from the same module (same weights); its
parameters are DTensors placed as the plan's owner ops read them. `forward(*inputs)` takes each
input whole (each rank keeps its shard) or as the block this rank reads (`input_boxes()`: its
shard of the batch, what a data loader hands each rank) and runs the graph op by op:

    for each op, in graph order:
        each input -> move() to the layout the op reads it in (runtime.move)
                   -> to_local(grad_placements = the layout's input gradients), so backward leaves
                      the partial gradients of inputs the op's devices used differently
                   -> a window's input split along positions: moved to its regular base layout,
                      then each rank's region completed by the halo exchange (runtime.halo)
        the local kernel or its adapter (runtime.localops) on this rank's shards; an input this rank
        reads nothing of is given as None, and anchored so its gradient is a zero on this rank
        outputs -> DTensor.from_local(placements = the layout's outputs; P(sum) for split reductions)
    the graph's outputs, whole on every rank (a scalar loss: the sum of the partial losses)

Gradient synchronization (the plan's sync step) runs in post-accumulate-grad hooks: a parameter's
accumulated gradient is redistributed to the parameter's own placements (or, `sync_deferred`, once
in `sync_gradients` after several backward passes). Any torch.optim optimizer then steps the DTensor
parameters.

A plan with pipeline stages: `parallelize` gives this rank's stage, a StageModule (runtime.pipeline):
a PlanModule over the stage's plan, on the stage's ranks and meshes (the `schedule` it is given).

A weight its owner holds sharded (cost.weight_state) is a DTensor in its stored layout, sharded
over the data-parallel axes: reading it is an all-gather (runtime.move), whose backward is the
reduce-scatter of its gradient into the stored layout, so the optimizer steps shards and keeps
sharded state. Under "sharded" the kernel's saved copy is dropped and gathered again in backward
(runtime.regather); under "sharded_kept" autograd keeps it until backward. "offloaded" (shards in
host memory) runs on CPU ranks, where host memory is the device's, as "sharded" does: the same
training, none of the memory it saves on a GPU; GPU ranks refuse it (not built: the shards would
live in pinned host memory and be copied in before each gather, as FSDP2's CPUOffloadPolicy does).

Activation offload (cost.activation_offload): each op of an offloaded block runs its kernel under
saved-tensor hooks (runtime.activation_offload) that copy what autograd saves of its activations to
host memory and back for backward, weights (and gathered weights' notes) left on the device;
`offloaded_bytes` says how many bytes the last forward sent. On CPU ranks the copies are real but
save nothing: the training is checked, the memory is not.

Mixed precision (a plan whose graph computes in bf16 while the module's weights are float32, the
plan's `precision` "bf16-mixed"): parameters stay float32 DTensors, the master weights any
torch.optim optimizer steps; an op reads a weight cast to the graph's dtype, cast before it is
gathered (so gathers and their reduce-scatters move bf16, as FSDP2's MixedPrecisionPolicy), and
autograd casts its gradient back to float32. Floating-point inputs are cast to the graph's dtype.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor
from torch.utils.checkpoint import checkpoint

from stratagem.cost.activation_offload import check_offload
from stratagem.cost.recompute import blocks
from stratagem.space.tensor_layout import TensorLayout
from stratagem.frontend.precision import cast_floating, recorded_constant, torch_dtype
from stratagem.ir import Role, has_master_weights, weight_owner
from stratagem.plan import Plan
from stratagem.runtime.activation_offload import offloaded
from stratagem.runtime.errors import ExecutionError
from stratagem.runtime.halo import with_halo
from stratagem.runtime.localops import run_local
from stratagem.runtime.meshes import MeshBook, torch_placements
from stratagem.runtime.move import move
from stratagem.runtime.op_timing import OpTimer, settled
from stratagem.runtime.regather import freed_after_forward, gathered_weights
from stratagem.runtime.schedule import OpStep, Schedule, build_schedule
from stratagem.space import REPLICATE


class PlanModule(nn.Module):
    """Runs `plan` on this rank; parameters are DTensors named as in the original module."""

    def __init__(self, plan: Plan, weights: Mapping[str, torch.Tensor], device: torch.device | None = None,
                 meshes: MeshBook | None = None, floating: torch.dtype | None = None,
                 schedule: Schedule | None = None):
        super().__init__()
        self.plan = plan
        self.device = device or torch.device("cpu")
        _check_offload(plan, self.device)
        self.floating = floating          # floating-point tensors in this dtype, not the captured one
        # given: a pipeline stage's (runtime.pipeline), over the stage's ranks and meshes
        self.schedule: Schedule = schedule or _world_schedule(plan)
        self.meshes = _mesh_book(meshes, self.schedule.mesh_shapes, self.schedule.num_devices, self.device.type)
        self.sync_deferred = False        # True: gradients wait for sync_gradients() (micro-batches)
        self._buffers_dt: dict[str, DTensor] = {}
        self.state_updates: dict[str, str] = dict(plan.graph.meta.get("state_updates") or {})
        self.timer: OpTimer | None = None      # per-op times when set (runtime.op_timing); off: no cost
        kept = set(plan.graph.outputs) | set(self.state_updates.values())
        self._released = released_after(self.schedule, kept)
        self._blocks = recomputed_blocks(plan, self.schedule, kept)
        self._offloaded = offloaded_ops(plan)
        self.offloaded_bytes = 0          # sent to host memory by the last forward (offloaded blocks)
        self._install(weights)

    # ---- parameters ---------------------------------------------------------------------------
    def _install(self, weights: Mapping[str, torch.Tensor]) -> None:
        graph = self.plan.graph
        for name in self.schedule.parameters:
            spec = graph.tensors[name]
            value = cast_floating(_weight(weights, name, spec.shape).detach(), self.floating)
            placed = self._distribute(value.to(self.device), self.schedule.sources[name])
            if spec.role is Role.WEIGHT:
                param = nn.Parameter(placed, requires_grad=True)
                param.register_post_accumulate_grad_hook(self._sync_hook(weight_owner(graph, name)))
                _attach(self, name, param)
            else:
                self._buffers_dt[name] = placed
                if name in self.state_updates:             # state: in state_dict (checkpoints) too
                    _attach(self, name, placed, buffer=True)

    def _sync_hook(self, owner: str | None):
        """The gradient's sync step, unless deferred (a weak reference: the parameter's hook does
        not keep the module alive)."""
        module = weakref.ref(self)

        def hook(param: DTensor) -> None:
            found = module()
            if found is None:
                _sync_gradient(param)
            elif not found.sync_deferred:
                found._sync(param, owner)
        return hook

    def _sync(self, param: DTensor, owner: str | None) -> None:
        """The sync step, timed under the module's timer when it has one."""
        timer = self.timer
        if timer is None:
            _sync_gradient(param)
            return
        begin = timer.now()
        _sync_gradient(param)
        timer.add(owner or "(unowned weights)", "sync", timer.now() - begin)

    def sync_gradients(self) -> None:
        """The sync step of every parameter, after the gradients deferred theirs (`sync_deferred`:
        a pipeline stage accumulates m micro-batches' first, runtime.pipeline)."""
        for name, param in self.named_parameters():
            if param.grad is not None:
                self._sync(param, weight_owner(self.plan.graph, name))

    def _distribute(self, value: torch.Tensor, lay: TensorLayout) -> DTensor:
        return distribute_tensor(value, self.meshes[lay.mesh_shape], torch_placements(lay.placements),
                                 src_data_rank=None)

    def input_boxes(self) -> dict[str, tuple[tuple[int, int], ...]]:
        """Per graph input, the block of it this rank reads ((start, stop) per dim): a data loader
        can hand `forward` just that block (the batch's shard), or the whole input."""
        rank = self.schedule.rank
        return {name: self.schedule.sources[name].device_box(rank, self.plan.graph.tensors[name].shape)
                for name in self.plan.graph.inputs}

    def _input(self, name: str, x: torch.Tensor) -> DTensor:
        """A graph input given whole (every rank keeps its shard) or as this rank's block."""
        shape = tuple(self.plan.graph.tensors[name].shape)
        lay = self.schedule.sources[name]
        if tuple(x.shape) == shape:
            return self._distribute(x, lay)
        box = self.input_boxes()[name]
        local = tuple(stop - start for start, stop in box)
        if tuple(x.shape) != local:
            raise ExecutionError(f"input {name!r} has the wrong shape",
                                 expected=f"the whole input {list(shape)} or this rank's block {list(local)}",
                                 got=str(list(x.shape)), hint="PlanModule.input_boxes() says which block a rank reads")
        return DTensor.from_local(x, self.meshes[lay.mesh_shape], torch_placements(lay.placements),
                                  shape=torch.Size(shape), stride=_contiguous_stride(shape))

    def named_plan_parameters(self) -> dict[str, nn.Parameter]:
        return {name: p for name, p in self.named_parameters()}

    # ---- forward ------------------------------------------------------------------------------
    def forward(self, *inputs: torch.Tensor) -> Any:
        values = self.run_steps(*inputs)
        outs = tuple(values[t].full_tensor() for t in self.plan.graph.outputs)
        return outs[0] if len(outs) == 1 else outs

    def run_steps(self, *inputs: torch.Tensor) -> dict[str, DTensor]:
        """Every step on the graph's inputs; the values left at the end (outputs and resident ones)."""
        graph = self.plan.graph
        if len(inputs) != len(graph.inputs):
            raise ExecutionError("wrong number of inputs", expected=f"{len(graph.inputs)} ({', '.join(graph.inputs)})",
                                 got=str(len(inputs)))
        self.offloaded_bytes = 0
        values = self._resident_values()
        for name, x in zip(graph.inputs, inputs):
            values[name] = self._input(name, self._cast(name, x.to(self.device)))
        moved: dict[tuple[str, TensorLayout], DTensor] = {}
        i = 0
        while i < len(self.schedule.steps):
            block = self._blocks.get(i)
            if block is None:
                self._step(i, values, moved)
                i += 1
                continue
            outs = checkpoint(self._run_block, block, *(values[t] for t in block.inputs), use_reentrant=False)
            values.update(zip(block.outputs, outs))
            for j in range(block.start, block.end):
                for t in self._released[j][0]:
                    values.pop(t, None)
            i = block.end
        self._write_state(values)
        return values

    def _resident_values(self) -> dict[str, DTensor]:
        """The buffers and parameters, by graph tensor name."""
        values: dict[str, DTensor] = dict(self._buffers_dt)
        values.update(self.named_plan_parameters())
        return values

    def _step(self, i: int, values, moved, in_block: bool = False) -> None:
        """Step i: read its inputs, run it, keep its outputs, let go what no later step reads."""
        step = self.schedule.steps[i]
        if self.timer is None or in_block:
            args = [self._read(values, moved, t, lay) for t, lay in zip(step.op.inputs, step.inputs)]
            outs = self._run(step, args, regather=not in_block)
        else:
            outs = self._timed_step(step, values, moved)
        for t, out in zip(step.op.outputs, outs):
            values[t] = out
        tensors, copies = self._released[i]
        for t in tensors:
            values.pop(t, None)
        for key in copies:
            moved.pop(key, None)

    def _run_block(self, block: "RecomputedBlock", *inputs: DTensor) -> tuple[DTensor, ...]:
        """A recomputed block's steps (torch.utils.checkpoint runs it again in backward): its
        inputs as given, the weights and buffers from the module, its own moved copies."""
        values = self._resident_values()
        values.update(zip(block.inputs, inputs))
        moved: dict[tuple[str, TensorLayout], DTensor] = {}
        for i in range(block.start, block.end):
            self._step(i, values, moved, in_block=True)
        return tuple(values[t] for t in block.outputs)

    def _write_state(self, values: dict[str, DTensor]) -> None:
        """Each buffer the forward writes takes its next value, laid out as the buffer is, as eager
        PyTorch writes it during forward (frontend/state.py)."""
        for buffer, tensor in self.state_updates.items():
            new = move(values[tensor], self.schedule.sources[tensor], self.schedule.sources[buffer], self.meshes)
            new = new.detach().to(self._buffers_dt[buffer].dtype)
            self._buffers_dt[buffer] = new
            _attach(self, buffer, new, buffer=True)

    def _timed_step(self, step: OpStep, values, moved) -> list[DTensor]:
        timer, name = self.timer, step.op.name
        begin = timer.now()
        args = [settled(self._read(values, moved, t, lay)) for t, lay in zip(step.op.inputs, step.inputs)]
        read = timer.now()
        outs = self._run(step, args)
        timer.add(name, "move", read - begin)
        timer.add(name, "forward", timer.now() - read)
        return outs

    def _read(self, values, moved, tensor: str, lay: TensorLayout) -> DTensor:
        key = (tensor, lay)
        if key not in moved:
            moved[key] = move(self._cast(tensor, values[tensor]), self.schedule.sources[tensor], lay, self.meshes)
        return moved[key]

    def _run(self, step: OpStep, args: list[DTensor], regather: bool = True) -> list[DTensor]:
        locals_, dropped = [], []
        for i, x in enumerate(args):
            local = x.to_local(grad_placements=_gradient_placements(step, i, x))
            if i in step.halos:
                local = with_halo(local, step.halos[i], self.meshes[step.mesh_shape])
            if step.view.reads[i]:
                locals_.append(local)
            else:
                locals_.append(None)
                dropped.append(local)
        if self.timer is not None:
            locals_ = [self.timer.stamp(x, step.op.name, "in") for x in locals_]
        with self._saved_hooks(step, locals_, regather):
            result = run_local(step.op.kind, step.attrs, locals_, step.view, step.analysis, step.adapter)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        results = [self._cast(t, r) for t, r in zip(step.op.outputs, results)]
        if self.timer is not None:
            results = [self.timer.stamp(r, step.op.name, "out") for r in results]
        results[0] = anchor(results[0], dropped)
        mesh = self.meshes[step.mesh_shape]
        placements = torch_placements(step.outputs.placements)
        return [DTensor.from_local(r, mesh, placements, shape=torch.Size(self.plan.graph.tensors[t].shape),
                                   stride=_contiguous_stride(self.plan.graph.tensors[t].shape))
                for t, r in zip(step.op.outputs, results)]

    def _saved_hooks(self, step: OpStep, locals_: list[torch.Tensor | None], regather: bool):
        """What the kernel saves for backward, as the plan keeps it: an offloaded block's op sends
        its activations to host memory (runtime.activation_offload), weights left on the device
        and gathered ones noted to be gathered again; under "sharded" alone, only the notes
        (runtime.regather); else as autograd saves it."""
        gathered = {i: locals_[i] for i in step.stored} if step.regather and regather else None
        again = partial(self._regather, step)
        if step.op.name in self._offloaded:
            graph = self.plan.graph
            weights = [x for t, x in zip(step.op.inputs, locals_)
                       if graph.tensors[t].role in (Role.WEIGHT, Role.BUFFER)]
            notes = gathered_weights(gathered, again) if gathered is not None else None
            return offloaded(weights, self._count_offloaded, notes)
        return freed_after_forward(gathered, again) if gathered is not None else nullcontext()

    def _count_offloaded(self, size_bytes: int) -> None:
        self.offloaded_bytes += size_bytes

    def _regather(self, step: OpStep, position: int) -> torch.Tensor:
        """The local block of weight input `position`, gathered again from its shards (backward)."""
        name = step.op.inputs[position]
        with torch.no_grad():
            param = self._cast(name, self.get_parameter(name).detach())
            return move(param, step.stored[position], step.inputs[position], self.meshes).to_local()

    def _cast(self, tensor: str, value: torch.Tensor) -> torch.Tensor:
        dtype = torch_dtype(self.plan.graph.tensors[tensor].dtype, self.floating)
        return value if value.dtype == dtype else value.to(dtype)


# ---- helpers ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RecomputedBlock:
    """Steps [start, end) run under torch.utils.checkpoint: their inputs from outside (the
    checkpoint's arguments, kept for backward) and the outputs read after them."""
    start: int
    end: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def recomputed_blocks(plan: Plan, schedule: Schedule, kept: set[str]) -> dict[int, RecomputedBlock]:
    """The plan's recomputed blocks (cost.recompute), by their first step."""
    position = {step.op.name: i for i, step in enumerate(schedule.steps)}
    found = {}
    for block in blocks(plan.graph):
        if block.name not in plan.recompute:
            continue
        start, end = position[block.ops[0]], position[block.ops[-1]] + 1
        read_after = {t for step in schedule.steps[end:] for t in step.op.inputs} | kept
        outputs = tuple(t for name in block.ops for t in plan.graph.op(name).outputs if t in read_after)
        found[start] = RecomputedBlock(start, end, block.inputs, outputs)
    return found


def offloaded_ops(plan: Plan) -> frozenset[str]:
    """The ops of the plan's offloaded blocks (cost.activation_offload), checked: blocks of the
    graph, none also recomputed (a recomputed block runs under torch.utils.checkpoint, whose own
    saved-tensor hooks would be the innermost)."""
    names = set(check_offload(plan.graph, plan.offload_activations, plan.recompute))
    return frozenset(op for block in blocks(plan.graph) if block.name in names for op in block.ops)


def released_after(schedule: Schedule, kept: set[str]) -> tuple[tuple[tuple[str, ...], tuple[tuple], ...], ...]:
    """Per step: the tensors, and the moved copies (tensor, layout), that no later step reads, so
    that forward lets them go as it passes (autograd keeps what backward needs): a re-scheduled copy
    or an output no one saves lives until its last reader, as the cost model and the simulator
    count it, not to the end of forward. `kept`: the graph's outputs and the state updates' sources."""
    last_read: dict[str, int] = {}
    last_move: dict[tuple, int] = {}
    for i, step in enumerate(schedule.steps):
        for t, lay in zip(step.op.inputs, step.inputs):
            last_read[t] = i
            last_move[(t, lay)] = i
    tensors: list[list[str]] = [[] for _ in schedule.steps]
    copies: list[list[tuple]] = [[] for _ in schedule.steps]
    for t, i in last_read.items():
        if t not in kept:
            tensors[i].append(t)
    for key, i in last_move.items():
        copies[i].append(key)
    return tuple((tuple(a), tuple(b)) for a, b in zip(tensors, copies))


class _Anchor(torch.autograd.Function):
    """Passes `out` through; gives each dropped input a zero gradient, so that every rank's autograd
    graph reaches the same tensors (and so runs the same collectives in backward)."""

    @staticmethod
    def forward(ctx, out, *dropped):
        ctx.specs = [(d.shape, d.dtype, d.device) for d in dropped]
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad):
        return (grad, *(torch.zeros(s, dtype=t, device=d) for s, t, d in ctx.specs))


def anchor(out: torch.Tensor, dropped: list[torch.Tensor]) -> torch.Tensor:
    needing = [d for d in dropped if d.requires_grad]
    if not needing or not out.dtype.is_floating_point:
        return out
    return _Anchor.apply(out, *needing)


def _gradient_placements(step: OpStep, i: int, x: DTensor) -> tuple:
    """Where input i's gradient lands: the layout's, or, for a one-device plan (no mesh axes; it
    runs on the mesh (1,)), replicated."""
    placements = step.layout.input_gradients[i] or (REPLICATE,) * x.device_mesh.ndim
    if i in step.halos:      # the halo exchange's backward returns each rank's chunk: S(d)
        placements = tuple(b if p is None else p for p, b in zip(placements, step.halos[i].base.placements))
    return torch_placements(placements)


def _sync_gradient(param: DTensor) -> None:
    """The plan's sync step: the accumulated gradient onto the parameter's own placements."""
    grad = param.grad
    if isinstance(grad, DTensor) and tuple(grad.placements) != tuple(param.placements):
        param.grad = grad.redistribute(param.device_mesh, param.placements)


def _attach(root: nn.Module, name: str, param: torch.Tensor, buffer: bool = False) -> None:
    """Register `param` (or a buffer) under its dotted name, creating empty submodules on the way."""
    *path, leaf = name.split(".")
    module = root
    for part in path:
        child = module._modules.get(part)
        if child is None:
            child = nn.Module()
            module.add_module(part, child)
        module = child
    if buffer:
        module.register_buffer(leaf, param)
    else:
        module.register_parameter(leaf, param)


def _weight(weights: Mapping[str, torch.Tensor], name: str, shape: tuple[int, ...]) -> torch.Tensor:
    if name not in weights:
        raise ExecutionError(f"no value for {name!r}", expected="a parameter or buffer of that name in the module",
                             hint="Pass the module the plan's graph was captured from")
    value = weights[name]
    if tuple(value.shape) != tuple(shape):
        raise ExecutionError(f"{name!r} has the wrong shape", expected=str(tuple(shape)), got=str(tuple(value.shape)))
    return value


def _check_offload(plan: Plan, device: torch.device) -> None:
    """Refuse a plan with offloaded weights on ranks whose memory is not the host's."""
    offloaded = [op for op, config in plan.strategy.items() if config.offloaded]
    if offloaded and device.type != "cpu":
        raise ExecutionError("the runtime runs the 'offloaded' weight state on CPU ranks only",
                             expected="CPU ranks for a plan whose weights are offloaded to host memory",
                             got=f"{device.type} ranks; {len(offloaded)} ops offloaded (first {offloaded[0]!r})",
                             hint="Plan without offload (--option offload=false; fsdp's state 'sharded') to run "
                                  "on GPUs: copying shards between host and device is priced and simulated, "
                                  "not yet run")


def _mesh_book(book: MeshBook | None, shapes, world: int, device_type: str) -> MeshBook:
    if book is None:
        return MeshBook(shapes, world, device_type)
    if (book.world_size, book.device_type) != (world, device_type):
        raise ExecutionError("the shared mesh book is for another world",
                             expected=f"{world} {device_type} ranks",
                             got=f"{book.world_size} {book.device_type} ranks")
    book.add(shapes)
    return book


def _contiguous_stride(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


def _world_schedule(plan: Plan) -> Schedule:
    """This rank's schedule of a plan over the whole world."""
    rank, world = world_of(plan)
    return build_schedule(plan.graph, plan.strategy, world, rank)


def world_of(plan: Plan) -> tuple[int, int]:
    """This rank and the world's size, which must be the plan's device count."""
    rank, world = _world()
    if plan.num_devices != world:
        raise ExecutionError("plan and world differ in size", expected=f"{plan.num_devices} ranks",
                             got=f"{world}", hint=f"Launch with --nproc-per-node={plan.num_devices}")
    return rank, world


def _world() -> tuple[int, int]:
    if not dist.is_available() or not dist.is_initialized():
        raise ExecutionError("torch.distributed is not initialized",
                             hint="Run under torchrun and call torch.distributed.init_process_group first "
                                  "(or use `stratagem run plan.json`)")
    return dist.get_rank(), dist.get_world_size()


def module_weights(module: nn.Module, graph) -> dict[str, torch.Tensor]:
    """Every weight and buffer the graph names, from the module (tied aliases and constants too)."""
    found = {**dict(module.named_parameters(remove_duplicate=False)),
             **dict(module.named_buffers(remove_duplicate=False))}
    for name, c in (graph.meta.get("constants") or {}).items():
        found[name] = recorded_constant(c)
    return found


def parallelize(module: nn.Module, plan: Plan, device: torch.device | str | None = None,
                meshes: MeshBook | None = None) -> PlanModule:
    """The module, run as `plan` says, on this torchrun rank (TensorOpt's Listing 1). Several plans
    run in one world can share `meshes` (MeshBook), so their process groups are created once. A
    module whose parameters are in another floating dtype than the plan's graph (float64 for a
    check) runs in that dtype, but for float32 weights under a mixed-precision plan: the masters.
    A plan with pipeline stages gives this rank's StageModule (runtime.pipeline: train it with
    `forward_backward(*shard_of(batch))`), on meshes of its own."""
    from stratagem.runtime.runnable import require_runnable
    require_runnable(plan)
    weights = module_weights(module, plan.graph)
    device = torch.device(device) if device else None
    if plan.strategy.pipeline is not None:          # this rank's stage (runtime.pipeline)
        from stratagem.runtime.pipeline import StageModule
        return StageModule(plan, weights, device, _floating_dtype(weights, plan))
    return PlanModule(plan, weights, device, meshes, _floating_dtype(weights, plan))


def _floating_dtype(weights: Mapping[str, torch.Tensor], plan: Plan) -> torch.dtype | None:
    """The module's floating-point dtype where it differs from the graph's (None: the same, or
    float32 master weights of a mixed-precision plan)."""
    for name, value in weights.items():
        spec = plan.graph.tensors.get(name)
        if spec is not None and value.is_floating_point() and str(value.dtype) != f"torch.{spec.dtype}":
            mixed = has_master_weights(plan.precision) and value.dtype == torch.float32
            return None if mixed else value.dtype
    return None
