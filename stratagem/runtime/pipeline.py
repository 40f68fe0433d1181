"""A pipeline plan on torch.distributed: each rank runs its stage's ops under
torch.distributed.pipelining (GPipe: Huang et al. 2019; 1F1B: PipeDream-Flush, Narayanan et al.
2021 §2.2), each stage through the op-by-op interpreter (runtime.execute) on its own ranks.

    ranks      rank r = s d + i is rank i of stage s (p stages of d ranks): a 2-D [pp, stage]
               layout of the world, as torchtitan's [pp, dp] mesh
    meshes     every mesh shape S any stage runs on is created once on every rank as the world
               mesh (p, *S) named ("pp", "axis0", ...) (`StageMeshBook`); a stage's ops run on its
               slice S (the stage's d ranks), and the "pp" groups {i, d + i, ...} are the pipeline
               groups: rank s d + i talks to (s - 1) d + i and (s + 1) d + i only
    stage      `StageModule`: the stage's plan (runtime.stages: its ops, configurations moved onto
               devices 0..d-1) run by PlanModule over the stage's meshes, wrapped in a
               PipelineStage whose metadata (the boundary blocks' shapes, dtypes, whether they carry
               gradients) is given up front, so no inference pass runs
    schedule   ScheduleGPipe, or Schedule1F1B; `step` runs the m micro-batches' forwards and
               backwards in the plan's order
    boundary   each activation crossing cut s (runtime.stages.Stage.sent: several per cut where
               they are, e.g. a slice made in stage 0 and read by every block) goes as this rank's
               local block of it, in its producer's layout, contiguous, to the rank of the same
               index in the next stage, which takes it as that layout's block (DTensor.from_local):
               no collective at a cut. Its gradient comes back the same way: the receiver's
               from_local gives it in the forward placements (Partial as Replicate), which is what
               the sender's to_local expects. An activation a stage only passes on is sent on as
               it came. (PipelineStage could carry DTensors themselves, but then needs their
               gradients' placements given or found by a trial step; plain blocks need neither.)
    inputs     each stage's module takes its micro-batch of the graph inputs its ops read as
               keyword arguments (the first stage's tokens, the last stage's targets; key `in<k>`:
               the k-th input the stage reads), which the schedule cuts into m chunks along each
               input's sample dim (kwargs_chunk_spec); in both schedules a stage's j-th forward
               is micro-batch j, so a stage's chunk j meets the activations of micro-batch j. A
               rank is handed its shard of the global batch (`shard_of`): for each micro-batch, the
               block the loader layout gives it, concatenated along the sample dim, so the chunks
               are its blocks of micro-batches 0..m-1
    loss       the last stage's module returns the graph's loss of its micro-batch; the schedule's
               loss_fn multiplies it by the micro-batch's weight (runtime.stages.loss_weight: 1/m
               for a mean), passed as the schedule's `target` (a tensor of m weights, one per
               micro-batch: the schedules call loss_fn(output, target's chunk j) only when given
               one), so backward accumulates the global batch's gradient; the step's loss
               is the weighted losses' sum, broadcast from the last stage to every rank
    gradients  a parameter's sync step (PlanModule's post-accumulate-grad hook) is deferred to the
               end of the step, once for all micro-batches (as DDP's no_sync); a weight held
               sharded reduce-scatters its gradient in each micro-batch's backward (runtime.move)

What torch.distributed.pipelining does not do as needed, and what stands in for it:
- Schedule1F1B refuses fewer micro-batches than stages (its constructor checks m >= p); its loop
  (warm-up min(m, p - s) forwards, then one backward, one forward) is PipeDream-Flush's for any m,
  which space.pipeline allows (`in_flight`). `_AnyCount1F1B` runs that same loop without the
  check; the pipeline-order IR it builds is descriptive only and unused here.
- A PipelineStage passes gradients only for its positional inputs and outputs; graph inputs read
  by later stages go in as keyword arguments (above), which carry no gradient (integer tokens and
  targets, or floating inputs, which need none).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.distributed.pipelining.microbatch import TensorChunkSpec
from torch.distributed.pipelining.schedules import PipelineScheduleSingle
from torch.distributed.tensor import DTensor

from stratagem.frontend.precision import torch_dtype
from stratagem.plan import Plan
from stratagem.runtime.errors import ExecutionError
from stratagem.runtime.execute import PlanModule, _contiguous_stride, world_of
from stratagem.runtime.meshes import MeshBook, torch_placements
from stratagem.runtime.stages import loss_weight, pipeline, requires_grad, stage_schedules, stages_of


class StageMeshBook(MeshBook):
    """The meshes of one stage's d ranks: shape S is this rank's slice of the world mesh (p, *S),
    created on every rank in the same order (MeshBook.add)."""

    def __init__(self, shapes, num_stages: int, stage_size: int, device_type: str):
        self.num_stages = num_stages
        self._whole: dict[tuple[int, ...], DeviceMesh] = {}
        super().__init__(shapes, stage_size, device_type)

    def _create(self, shape: tuple[int, ...]) -> DeviceMesh:
        if math.prod(shape) != self.world_size:
            raise ExecutionError(f"mesh {shape} does not cover a stage", expected=f"{self.world_size} devices",
                                 got=f"{math.prod(shape)}")
        names = ("pp", *(f"axis{k}" for k in range(len(shape))))
        ranks = torch.arange(self.num_stages * self.world_size, device="cpu").reshape(self.num_stages, *shape)
        whole = DeviceMesh(self.device_type, ranks, mesh_dim_names=names)
        self._whole[shape] = whole
        self._meshes[shape] = whole[names[1:]] if len(names) > 2 else whole[names[1]]
        return self._meshes[shape]

    @property
    def pipeline_group(self) -> dist.ProcessGroup:
        """The ranks of this rank's index in every stage, in stage order."""
        self.add([(self.world_size,)])
        return self._whole[(self.world_size,)].get_group("pp")


class StageModule(PlanModule):
    """This rank's stage of a pipeline plan. Its parameters are the stage's weights (DTensors named
    as in the original module); `forward_backward` runs one step of the schedule."""

    def __init__(self, plan: Plan, weights: Mapping[str, torch.Tensor], device: torch.device | None = None,
                 floating: torch.dtype | None = None):
        rank, _ = world_of(plan)
        stages = stages_of(plan)
        d = plan.num_devices // len(stages)
        s, i = divmod(rank, d)
        schedules = stage_schedules(stages, i)
        device_type = (device or torch.device("cpu")).type
        book = StageMeshBook({shape for sch in schedules for shape in sch.mesh_shapes}, len(stages), d, device_type)
        super().__init__(stages[s].plan, weights, device, book, floating, schedule=schedules[s])
        self.pipelined_plan = plan             # the whole plan; self.plan is the stage's
        self.stage = stages[s]
        self.sync_deferred = True
        self._last_rank = (len(stages) - 1) * d
        self._weights = torch.full((pipeline(plan).micro_batches,), loss_weight(plan), dtype=torch.float64)
        self._sent = _metas(self, self.stage.sent)     # what the next stage allocated to receive
        self._pipe_group = book.pipeline_group
        self._pipe = _schedule(self, self._pipe_group)

    # ---- the step -----------------------------------------------------------------------------
    def forward_backward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """One step over the m micro-batches: forwards and backwards in the schedule's order, then
        the gradients' sync. `inputs`: this rank's shard of the global batch of each graph input
        the stage reads (`shard_of`). Returns the global batch's loss, on every rank."""
        if len(inputs) != len(self.stage.inputs):
            raise ExecutionError(f"stage {self.stage.index} takes the graph inputs its ops read",
                                 expected=f"{len(self.stage.inputs)} ({', '.join(self.stage.inputs)})",
                                 got=str(len(inputs)), hint="StageModule.shard_of(batch) picks them")
        losses: list[torch.Tensor] = []
        last = self.stage.is_last
        self._pipe.step(**{_key(k): x.to(self.device) for k, x in enumerate(inputs)},
                        target=self._weights if last else None, losses=losses if last else None,
                        return_outputs=False)
        self.sync_gradients()
        return self._everywhere(losses)

    def _everywhere(self, losses: list[torch.Tensor]) -> torch.Tensor:
        """The sum of the last stage's weighted micro-batch losses (the global batch's loss), on
        every rank (a broadcast from the last stage's first rank)."""
        loss = torch.zeros((), dtype=torch.float64, device=self.device)
        if losses:
            loss = torch.stack([x.detach().to(torch.float64) for x in losses]).sum()
        dist.broadcast(loss, src=self._last_rank)
        return loss

    def forward(self, *received: torch.Tensor, **inputs: torch.Tensor):
        """One micro-batch through the stage (PipelineStage calls it): the received activations'
        local blocks, then the stage's graph inputs by key; the sent activations' local blocks, or
        the loss in the last stage."""
        values = self.run_steps(*received, *(inputs[_key(k)] for k in range(len(self.stage.inputs))))
        if self.stage.is_last:
            return values[self.stage.sent[0]].full_tensor()
        return _as_announced(tuple(values[t].to_local().contiguous() for t in self.stage.sent), self._sent)

    def _input(self, name: str, x: torch.Tensor) -> DTensor:
        """A received activation is this rank's block of its producer's layout."""
        if name not in self.stage.received:
            return super()._input(name, x)
        lay, shape = self.schedule.sources[name], tuple(self.plan.graph.tensors[name].shape)
        return DTensor.from_local(x, self.meshes[lay.mesh_shape], torch_placements(lay.placements),
                                  shape=torch.Size(shape), stride=_contiguous_stride(shape))

    # ---- data and results ---------------------------------------------------------------------
    def shard_of(self, batch: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """This rank's part of the global batch (the whole graph's inputs, m times the graph's batch):
        of each input the stage reads, its loader block of every micro-batch, concatenated along the
        sample dim in micro-batch order."""
        whole = self.pipelined_plan.graph
        given = dict(zip(whole.inputs, batch, strict=True))
        boxes = self.input_boxes()
        m = pipeline(self.pipelined_plan).micro_batches
        out = []
        for name in self.stage.inputs:
            spec = whole.tensors[name]
            dim, x = spec.sample_dim, given[name]
            expected = tuple(n * m if k == dim else n for k, n in enumerate(spec.shape))
            if tuple(x.shape) != expected:
                raise ExecutionError(f"input {name!r} is not the global batch",
                                     expected=f"{list(expected)} ({m} micro-batches of {list(spec.shape)})",
                                     got=str(list(x.shape)))
            block = tuple(slice(a, b) for a, b in boxes[name])
            out.append(torch.cat([c[block] for c in x.chunk(m, dim)], dim).contiguous())
        return tuple(out)

    def sum_over_stages(self, value: float) -> float:
        """`value` (the same on a stage's ranks) summed over the stages (every rank calls it)."""
        total = torch.tensor(value, dtype=torch.float64, device=self.device)
        dist.all_reduce(total, group=self._pipe_group)
        return float(total)

    def from_every_stage(self, found: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """`found` (whole tensors by name, the same on a stage's ranks) merged over the stages, on
        every rank (a collective of the world)."""
        gathered: list = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, found if self.schedule.rank == 0 else {})
        merged: dict[str, torch.Tensor] = {}
        for part in gathered:
            merged.update(part)
        return merged


class _AnyCount1F1B(Schedule1F1B):
    """Schedule1F1B's loop for fewer micro-batches than stages too (module docstring)."""

    def __init__(self, stage, n_microbatches: int, loss_fn, kwargs_chunk_spec, scale_grads: bool):
        PipelineScheduleSingle.__init__(self, stage, n_microbatches, loss_fn,
                                        kwargs_chunk_spec=kwargs_chunk_spec, scale_grads=scale_grads)


def _schedule(module: StageModule, group: dist.ProcessGroup) -> PipelineScheduleSingle:
    stage, pipe = module.stage, pipeline(module.pipelined_plan)
    pipe_stage = PipelineStage(module, stage.index, stage.num_stages, module.device,
                               input_args=_metas(module, stage.received),
                               output_args=module._sent, group=group)
    graph = module.plan.graph
    chunks = {_key(k): TensorChunkSpec(graph.tensors[name].sample_dim) for k, name in enumerate(stage.inputs)}
    if pipe.schedule == "gpipe":
        kind = ScheduleGPipe
    else:
        kind = Schedule1F1B if pipe.micro_batches >= pipe.num_stages else _AnyCount1F1B
    return kind(pipe_stage, pipe.micro_batches, loss_fn=_weighted, kwargs_chunk_spec=chunks, scale_grads=False)


def _metas(module: StageModule, names: tuple[str, ...]) -> tuple[torch.Tensor, ...]:
    """Example tensors (on the meta device) of this rank's blocks of `names`: what PipelineStage
    allocates receive buffers from."""
    graph, schedule = module.plan.graph, module.schedule
    found = []
    for name in names:
        spec = graph.tensors[name]
        box = schedule.sources[name].device_box(schedule.rank, spec.shape)
        x = torch.empty(tuple(b - a for a, b in box), dtype=torch_dtype(spec.dtype, module.floating), device="meta")
        found.append(x.requires_grad_(requires_grad(module.pipelined_plan.graph, name)))
    return tuple(found)


def _as_announced(blocks: tuple[torch.Tensor, ...], metas: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """The blocks a stage sends, checked against what the next stage receives them into: a block
    of another shape or dtype is refused here, before the send (not left to the transport)."""
    for block, meta in zip(blocks, metas, strict=True):
        if (block.shape, block.dtype) != (meta.shape, meta.dtype):
            raise ExecutionError("a boundary activation's block is not the one announced to the next stage",
                                 expected=f"{list(meta.shape)} {meta.dtype}",
                                 got=f"{list(block.shape)} {block.dtype}")
    return blocks


def _weighted(loss: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """A micro-batch's loss times its weight in the global batch's loss (its chunk of `target`)."""
    return loss * weight.to(loss.dtype).reshape(())


def _key(k: int) -> str:
    return f"in{k}"
