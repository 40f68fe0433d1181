"""Refuse, before anything is launched, a plan the runtime cannot execute (no torch here).

`check_runnable(plan)` lists (op, reason) for every op whose configuration the runtime cannot run
(space.runnable.refusal: sub-blocks of devices, irregular placements, uneven splits, splits a local
kernel gets wrong and no adapter fixes, non-sum partial outputs, unrecorded opaque calls).
"""

from __future__ import annotations

from dataclasses import dataclass

from stratagem.plan import Plan
from stratagem.runtime.errors import NotRunnable
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
    found = []
    for op in plan.graph.ops:
        config = plan.strategy[op.name]
        reason = refusal(analyses[op.name], config, plan.num_devices)
        if reason:
            found.append(Refusal(op.name, op.kind, str(config), reason))
    return found


def require_runnable(plan: Plan, shown: int = 10) -> None:
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
