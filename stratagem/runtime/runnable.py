"""Refuse, before anything is launched, a plan the runtime cannot execute (no torch here).

`check_runnable(plan)` lists (op, reason) for every op whose configuration the runtime cannot run
(space.runnable.refusal: sub-blocks of devices, irregular placements, uneven splits, splits a local
kernel gets wrong and no adapter fixes, non-sum partial outputs, unrecorded opaque calls). In a
pipeline plan each op is checked on its stage's devices (it must cover the stage's block), and
`require_runnable` first refuses what micro-batches cannot train as the global batch does
(runtime.stages.require_micro_batchable).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stratagem.plan import Plan
from stratagem.runtime.errors import NotRunnable
from stratagem.runtime.stages import require_micro_batchable
from stratagem.space import Configuration, stage_of
from stratagem.space.runnable import refusal
from stratagem.tdl.graphops import AnalysisCache


@dataclass(frozen=True)
class Refusal:
    op: str
    kind: str
    config: str
    reason: str

    def __str__(self) -> str:
        return f"{self.op} ({self.kind}, {self.config}): {self.reason}"


def check_runnable(plan: Plan) -> list[Refusal]:
    analyses = AnalysisCache(plan.graph)
    blocks = _device_blocks(plan)
    found = []
    for op in plan.graph.ops:
        config, num_devices = _on_its_devices(plan.strategy[op.name], blocks[op.name])
        reason = refusal(analyses[op.name], config, num_devices)
        if reason:
            found.append(Refusal(op.name, op.kind, str(config), reason))
    return found


def _device_blocks(plan: Plan) -> dict[str, range]:
    """Per op, the devices it must cover: the plan's, or its stage's in a pipeline plan."""
    pipe = plan.strategy.pipeline
    if pipe is None:
        return dict.fromkeys(plan.strategy, range(plan.num_devices))
    blocks = pipe.stage_devices(plan.num_devices)
    return {op: blocks[s] for op, s in stage_of(plan.graph, pipe).items()}


def _on_its_devices(config: Configuration, block: range) -> tuple[Configuration, int]:
    """The configuration moved onto its block's devices 0..len(block)-1 (one that starts before
    the block stays as it is, refused: check_pipeline names it)."""
    if config.first_device < block.start:
        return config, block.stop
    return replace(config, first_device=config.first_device - block.start), len(block)


def require_runnable(plan: Plan, shown: int = 10) -> None:
    require_micro_batchable(plan)
    refusals = check_runnable(plan)
    if not refusals:
        return
    lines = "".join(f"\n  {r}" for r in refusals[:shown])
    more = f"\n  ... and {len(refusals) - shown} more" if len(refusals) > shown else ""
    raise NotRunnable(f"the runtime cannot run {len(refusals)} of the plan's {len(plan.graph.ops)} ops",
                      expected="every op on all devices with placements a local kernel can run",
                      got=lines + more + "\n",
                      hint="Nothing was launched. Search with SpaceOptions(runnable=True) (FT's default "
                           "space is runnable) so that every configuration is one the runtime executes")
