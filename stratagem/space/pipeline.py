"""Pipeline stages (GPipe, Huang et al. 2019; 1F1B, PipeDream-Flush, Narayanan et al. 2021 §2.2):
the one account of which ops run in which stage, on which devices, over how many micro-batches.

    Pipeline(cuts, micro_batches, schedule)
    cuts           the first op of every stage after the first, in program order: stage s runs
                   graph.ops[start_s : start_{s+1}] (contiguous op ranges)
    micro_batches  m: the global batch is m times the batch of the graph the plan holds (a plan
                   with stages holds the graph of one micro-batch)
    schedule       "gpipe" (every micro-batch's forward, then every backward) or "1f1b" (after
                   p - 1 - s warm-up forwards, stage s alternates one forward, one backward)

Stage s of p runs on devices [s * d, (s + 1) * d), d = num_devices / p: every op of the stage has
its configuration inside that block (its own mesh there, with every split and weight state the rest
of the planner has). A weight is read in one stage only (a tied embedding and head cannot be cut
apart). Between stages flow the boundary activations forward and their gradients backward
(`boundary_tensors`); graph inputs (tokens, targets) are read where their readers are.

In flight (activations kept for backward) on stage s at most: m micro-batches under GPipe,
min(m, p - s) under 1F1B (`in_flight`). Both take (m + p - 1)(f + b) for uniform stages of forward
f and backward b per micro-batch: a bubble of (p - 1)/(m + p - 1) of the iteration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from stratagem.errors import ConfigError
from stratagem.ir import Graph, Role
from stratagem.values import closest

SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class Pipeline:
    cuts: tuple[str, ...]
    micro_batches: int
    schedule: str = "1f1b"

    def __post_init__(self) -> None:
        object.__setattr__(self, "cuts", tuple(self.cuts))
        if self.schedule not in SCHEDULES:
            raise ConfigError("unknown pipeline schedule", expected=" | ".join(SCHEDULES), got=repr(self.schedule))
        if isinstance(self.micro_batches, bool) or not isinstance(self.micro_batches, int) or self.micro_batches < 1:
            raise ConfigError("micro-batch count is not valid", expected="an integer >= 1",
                              got=repr(self.micro_batches))

    @property
    def num_stages(self) -> int:
        return len(self.cuts) + 1

    def stage_devices(self, num_devices: int) -> tuple[range, ...]:
        """Each stage's device block: equal contiguous blocks of num_devices / num_stages."""
        p = self.num_stages
        if num_devices % p:
            raise ConfigError("stages do not divide the devices", expected=f"a device count divisible by {p} stages",
                              got=f"{num_devices} devices", hint="Use a stage count that divides the device count")
        d = num_devices // p
        return tuple(range(s * d, (s + 1) * d) for s in range(p))

    def in_flight(self, stage: int) -> int:
        """The most micro-batches whose activations stage `stage` keeps at once."""
        return in_flight(self.schedule, self.micro_batches, self.num_stages, stage)

    def __str__(self) -> str:
        return f"{self.num_stages} stages x {self.micro_batches} micro-batches ({self.schedule})"


def in_flight(schedule: str, micro_batches: int, stages: int, stage: int) -> int:
    """The most micro-batches whose activations stage `stage` of `stages` keeps at once."""
    return micro_batches if schedule == "gpipe" else min(micro_batches, stages - stage)


def stage_starts(graph: Graph, pipeline: Pipeline) -> tuple[int, ...]:
    """The index in graph.ops of each stage's first op."""
    index = graph.op_index
    unknown = [c for c in pipeline.cuts if c not in index]
    if unknown:
        raise ConfigError("pipeline cut names an op the graph does not have", expected="op names of the graph",
                          got=repr(unknown[0]), hint=closest(unknown[0], list(index)))
    starts = (0, *(index[c] for c in pipeline.cuts))
    if any(b <= a for a, b in zip(starts, starts[1:])):
        raise ConfigError("pipeline cuts are not in program order", expected="distinct ops, each after the last",
                          got=", ".join(pipeline.cuts))
    return starts


def stage_ops(graph: Graph, pipeline: Pipeline) -> tuple[tuple[str, ...], ...]:
    starts = (*stage_starts(graph, pipeline), len(graph.ops))
    return tuple(tuple(op.name for op in graph.ops[a:b]) for a, b in zip(starts, starts[1:]))


def stage_of(graph: Graph, pipeline: Pipeline) -> dict[str, int]:
    return {op: s for s, ops in enumerate(stage_ops(graph, pipeline)) for op in ops}


def boundary_tensors(graph: Graph, pipeline: Pipeline) -> tuple[tuple[str, ...], ...]:
    """Per cut (between stage s and s + 1, and later stages): the activations produced at or before
    stage s and read after it, which stage s sends on (graph inputs and weights are not sent)."""
    stage = stage_of(graph, pipeline)
    found: list[dict[str, None]] = [{} for _ in pipeline.cuts]
    producers = graph.producer
    for op in graph.ops:
        for t in op.inputs:
            producer = producers.get(t)
            if producer is None:
                continue
            for s in range(stage[producer.name], stage[op.name]):
                found[s].setdefault(t)
    return tuple(tuple(f) for f in found)


def check_pipeline(graph: Graph, configs: Mapping, pipeline: Pipeline, num_devices: int) -> None:
    """Refuse a pipeline whose ops sit outside their stage's devices or whose weights span stages."""
    blocks = pipeline.stage_devices(num_devices)
    stage = stage_of(graph, pipeline)
    for op in graph.ops:
        block, devices = blocks[stage[op.name]], configs[op.name].devices
        if devices.start < block.start or devices.stop > block.stop:
            raise ConfigError(f"op {op.name!r} of stage {stage[op.name]} runs outside the stage's devices",
                              expected=f"devices {block.start}..{block.stop - 1}",
                              got=f"devices {devices.start}..{devices.stop - 1}",
                              hint="Place every op of a stage on its stage's device block")
    readers: dict[str, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            if graph.tensors[t].role in (Role.WEIGHT, Role.BUFFER):
                first = readers.setdefault(t, stage[op.name])
                if first != stage[op.name]:
                    raise ConfigError(f"weight {t!r} is read in stages {first} and {stage[op.name]}",
                                      expected="every weight read in one stage",
                                      got=f"op {op.name!r} reads it in stage {stage[op.name]}",
                                      hint="Cut elsewhere: a tied weight keeps its readers in one stage")


def staged(graph: Graph, pipeline: Pipeline, num_devices: int, per_stage: Mapping) -> dict:
    """Every op's configuration moved into its stage's device block: `per_stage` maps each op to a
    configuration on devices 0..d-1 (d = num_devices / stages), as a plan for one stage's devices
    has it; stage s's ops move up by s * d."""
    blocks = pipeline.stage_devices(num_devices)
    stage = stage_of(graph, pipeline)
    out = {}
    for op in graph.ops:
        config, block = per_stage[op.name], blocks[stage[op.name]]
        if config.devices.stop > len(block):
            raise ConfigError(f"op {op.name!r} does not fit in one stage's devices",
                              expected=f"a configuration on devices 0..{len(block) - 1}", got=str(config))
        out[op.name] = replace(config, first_device=config.first_device + block.start)
    return out
